"""The token stream of one agent episode, as an engine trains on it.

The first request's messages and tools, rendered by the model's chat template with the
generation prompt, are the prompt. Each model turn is appended exactly as the policy generated
it, with its log-probs (mask 1): no decoding and re-encoding, so no tokenisation drift. What the
environment adds between two turns (tool results, feedback) is appended as the chat template
renders it (mask 0): the template's text after the model's end-of-turn token, then the new
messages, then the next generation prompt. The template must render a conversation append-only
(a longer conversation starts with the text of a shorter one), as ChatML, Llama and Qwen
templates do; one that does not is an episode failure naming the cause.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)

# A conversation whose last turn is the assistant's: what new messages are rendered after, so
# that a template that looks at the previous message (Qwen groups tool results) renders them as
# it would after a model turn.
_BASE = [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]

#: How many rendered prompts a renderer keeps: a GRPO step renders each prompt once per
#: completion of its group, and every step's prompts anew.
PROMPT_CACHE_SIZE = 4096


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The text before the first tool call, and each call as ``{"name", "arguments"}``.

    Calls are read as Qwen and Hermes chat templates write them: ``<tool_call>{"name": ...,
    "arguments": {...}}</tool_call>``. A call that is not a JSON object with a string ``name``
    is kept with ``"error"`` saying why.
    """
    matches = list(TOOL_CALL.finditer(text))
    content = text[: matches[0].start()] if matches else text
    calls = []
    for match in matches:
        try:
            call = json.loads(match.group(1))
        except json.JSONDecodeError as error:
            calls.append(
                {
                    "name": "",
                    "arguments": {},
                    "error": f"the tool call is not valid JSON: {error.msg}",
                }
            )
            continue
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            calls.append(
                {
                    "name": "",
                    "arguments": {},
                    "error": 'a tool call needs {"name": ..., "arguments": {...}}',
                }
            )
            continue
        arguments = call.get("arguments")
        calls.append({"name": call["name"], "arguments": {} if arguments is None else arguments})
    return content.strip(), calls


def assistant_message(content: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """A model turn as a chat message in the form chat templates render."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"type": "function", "function": {"name": call["name"], "arguments": call["arguments"]}}
            for call in calls
        ]
    return message


class ChatRenderer:
    """Renders an episode's messages to token ids with a tokenizer's chat template.

    :param tokenizer: a Hugging Face tokenizer with a chat template.
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.eos_token_id: int | None = tokenizer.eos_token_id
        base = self._text(_BASE, None, generation_prompt=False)
        eos = tokenizer.eos_token or ""
        # What the template writes after the model's end-of-turn token (ChatML: a newline).
        self.turn_end = base[base.rindex(eos) + len(eos) :] if eos and eos in base else ""
        # Rendering and tokenizing a prompt costs more than the rest of a one-turn request; a
        # template that renders the date (strftime_now) is rendered every time.
        self._prompts: dict[str, list[int]] | None = (
            None if "strftime_now" in str(getattr(tokenizer, "chat_template", None)) else {}
        )

    def prompt_ids(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> list[int]:
        """The episode's prompt: ``messages`` and ``tools`` with the generation prompt."""
        cache = self._prompts
        key = None if cache is None else _cache_key(messages, tools)
        if cache is None or key is None:
            return self._ids(self._text(messages, tools, generation_prompt=True))
        ids = cache.get(key)
        if ids is None:
            if len(cache) >= PROMPT_CACHE_SIZE:
                cache.clear()
            ids = cache[key] = self._ids(self._text(messages, tools, generation_prompt=True))
        return list(ids)  # the caller's own list: trajectories extend theirs

    def context_ids(
        self, added: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *, turn_ended: bool
    ) -> list[int]:
        """The tokens that follow a model turn when ``added`` messages come after it.

        :param turn_ended: whether the model's turn ended with its end-of-turn token; when it
            did not (cut at the token budget), the token is added here.
        """
        base = self._text(_BASE, tools, generation_prompt=False)
        longer = self._text([*_BASE, *added], tools, generation_prompt=True)
        if not longer.startswith(base):
            raise ValueError(
                "the chat template does not render a conversation append-only, so "
                "an episode cannot be one token sequence"
            )
        ids = self._ids(self.turn_end + longer[len(base) :])
        if not turn_ended and self.eos_token_id is not None:
            ids.insert(0, self.eos_token_id)
        return ids

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def strip_special(self, text: str) -> str:
        """``text`` without the tokenizer's special tokens (end of turn, padding)."""
        for token in self.tokenizer.all_special_tokens:
            text = text.replace(token, "")
        return text.strip()

    def _text(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        *,
        generation_prompt: bool,
    ) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tools=tools or None, tokenize=False, add_generation_prompt=generation_prompt
        )

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])


def _cache_key(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str | None:
    """The prompt as JSON (key order kept: a template renders a mapping in its order), or
    ``None`` for content that is not plain JSON."""
    try:
        return json.dumps([messages, tools or None], ensure_ascii=False)
    except (TypeError, ValueError):
        return None


@dataclass
class Trajectory:
    """One episode's tokens: the prompt, then every token after it with its mask and log-prob.

    :ivar prompt_ids: the first request rendered with the generation prompt.
    :ivar response_ids: everything after the prompt, model and environment tokens interleaved.
    :ivar mask: per response token, 1 for the model's, 0 for the environment's.
    :ivar logprobs: per response token, the log-prob the policy sampled it with (0.0 for the
        environment's).
    """

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)

    @property
    def model_tokens(self) -> int:
        return sum(self.mask)

    @property
    def ids(self) -> list[int]:
        """The whole sequence so far: what the policy is asked to continue."""
        return self.prompt_ids + self.response_ids

    def add_model(self, ids: list[int], logprobs: list[float]) -> None:
        self.response_ids += ids
        self.mask += [1] * len(ids)
        self.logprobs += list(logprobs)

    def add_context(self, ids: list[int]) -> None:
        self.response_ids += ids
        self.mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)

    def cut(self, length: int) -> Trajectory:
        """The trajectory with at most ``length`` response tokens."""
        return Trajectory(
            self.prompt_ids, self.response_ids[:length], self.mask[:length], self.logprobs[:length]
        )
