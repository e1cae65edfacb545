"""The token stream of one agent episode, as VeRL trains on it.

Both agent loops build their episodes with :class:`Trajectory`: the prompt is rendered once with
the chat template; each model turn appends the token ids and log-probs ``generate`` returned,
unchanged (response mask 1); each tool result or other message from the environment is appended
as the chat template renders it (response mask 0), by VeRL's continuous-token builder. So the
trajectory holds exactly the tokens the model produced, with no re-tokenising drift.

This module imports VeRL at the top: only VeRL's agent-loop workers import it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput
from verl.utils.profiler import simple_timer

TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The text before the first tool call, and each call as ``{"name", "arguments"}``.

    Calls are read as Qwen and Hermes chat templates write them: ``<tool_call>{"name": ...,
    "arguments": {...}}</tool_call>``. A call that is not a JSON object with a string ``name``
    is kept with ``"error"`` saying why, so that the model is told, as of any other mistake.
    """
    matches = list(TOOL_CALL.finditer(text))
    content = text[: matches[0].start()] if matches else text
    calls = []
    for match in matches:
        try:
            call = json.loads(match.group(1))
        except json.JSONDecodeError as error:
            calls.append({"name": "", "arguments": {}, "error": f"the tool call is not valid JSON: {error.msg}"})
            continue
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            calls.append({"name": "", "arguments": {}, "error": 'a tool call needs {"name": ..., "arguments": {...}}'})
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


def describe_failure(error: BaseException) -> str:
    """An exception as one line for ``agent_failure``."""
    return f"{type(error).__name__}: {' '.join(str(error).split()) or 'no message'}"


@dataclass
class Trajectory:
    """One episode's tokens, masks, log-probs and counts.

    :ivar loop: the agent loop whose tokenizer, builder and server manager the episode uses.
    :ivar runtime_ids: the prompt and everything appended to it so far.
    :ivar response_mask: per token after the prompt: 1 for the model's, 0 for the environment's.
    :ivar failure: why the episode failed (scored 0), or ``None``.
    """

    loop: AgentLoopBase
    runtime_ids: list[int]
    sampling_params: dict[str, Any]
    tools: list[dict[str, Any]] | None = None
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] | None = None
    request_id: str = field(default_factory=lambda: uuid4().hex)
    turns: int = 0
    context_rounds: int = 0
    tool_calls: int = 0
    failure: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    extra_fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    async def start(cls, loop: AgentLoopBase, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                    sampling_params: dict[str, Any]) -> Trajectory:
        """An episode whose prompt is ``messages`` rendered with ``tools``, sampled with
        ``sampling_params``; it records log-probs when they ask for them (``logprobs``), so
        that every episode of a batch has them, even one cut short before its first turn."""
        prompt_ids = await loop.ct_build_initial_tokens(messages, tools=tools)
        return cls(loop=loop, runtime_ids=list(prompt_ids), sampling_params=sampling_params, tools=tools,
                   response_logprobs=[] if sampling_params.get("logprobs") else None)

    @property
    def response_length(self) -> int:
        return int(self.loop.rollout_config.response_length)

    @property
    def full(self) -> bool:
        """Whether the response has reached ``rollout.response_length`` tokens."""
        return len(self.response_mask) >= self.response_length

    async def generate(self) -> Any:
        """One model turn, appended as it was generated (mask 1); returns ``generate``'s output."""
        with simple_timer("generate_sequences", self.metrics):
            output = await self.loop.server_manager.generate(
                request_id=self.request_id, prompt_ids=self.runtime_ids, sampling_params=self.sampling_params
            )
        self.turns += 1
        if not self.extra_fields:
            self.extra_fields.update(output.extra_fields or {})
        merged, self.response_mask, self.response_logprobs = await self.loop.ct_merge_assistant_token(
            self.runtime_ids,
            output.token_ids,
            self.response_mask,
            self.response_logprobs,
            assistant_logprobs=output.log_probs if self.response_logprobs is not None else None,
        )
        self.runtime_ids = merged.token_ids
        return output

    async def add_context(self, previous: list[dict[str, Any]], updated: list[dict[str, Any]]) -> None:
        """Append the messages ``updated`` adds to ``previous`` (tool results, ...) with mask 0."""
        merged, self.response_mask, self.response_logprobs = await self.loop.ct_merge_context_msg(
            previous, updated, self.runtime_ids, self.response_mask, self.response_logprobs, tools=self.tools
        )
        self.runtime_ids = merged.token_ids
        self.context_rounds += 1

    def output(self) -> AgentLoopOutput:
        """The episode for VeRL, cut to ``rollout.response_length``; ``agent_failure`` and
        ``tool_calls`` in its extra fields are what the reward module reads and reports."""
        length = self.response_length
        prompt_end = len(self.runtime_ids) - len(self.response_mask)
        self.extra_fields.update({
            "turn_scores": [],
            "tool_rewards": [],
            "tool_calls": self.tool_calls,
            "agent_failure": self.failure,
        })
        return AgentLoopOutput(
            prompt_ids=self.runtime_ids[:prompt_end],
            response_ids=self.runtime_ids[prompt_end:][:length],
            response_mask=self.response_mask[:length],
            response_logprobs=self.response_logprobs[:length] if self.response_logprobs is not None else None,
            num_turns=1 + self.turns + self.context_rounds,
            metrics=self.metrics,
            extra_fields=self.extra_fields,
        )
