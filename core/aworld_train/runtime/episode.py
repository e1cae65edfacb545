"""One agent episode's conversation with the policy: the handler behind its endpoint URL.

Each chat request the agent sends is answered with one turn of the policy and recorded in a
:class:`~aworld_train.runtime.trajectory.Trajectory`. The first request's messages and tools are
the prompt. Every later request must repeat the conversation so far (as every chat client does);
the messages it adds (tool results, feedback) are appended with mask 0. A request that rewrites
what was already sent ends the episode as a failure: the episode would no longer be one token
sequence (keep the agent's memory whole while training).

Limits: a turn has at most the request's own ``max_tokens`` (or ``max_completion_tokens``)
and what is left of the episode's budget. After ``max_turns`` model turns, or once the response
holds the episode's ``max_tokens`` tokens, a further request is answered with an empty turn and
``finish_reason: "length"``, and the agent is expected to stop.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from aworld_train.runtime.trajectory import (
    ChatRenderer,
    Trajectory,
    assistant_message,
    parse_tool_calls,
)


@dataclass
class Generated:
    """One model turn: the token ids the policy sampled and the log-prob of each."""

    token_ids: list[int]
    logprobs: list[float]


#: What an engine gives the runtime: continue ``prompt_ids`` with at most ``max_tokens`` tokens,
#: sampled with the engine's own settings, from the engine's own generator.
Generate = Callable[[list[int], int], Awaitable[Generated]]


@dataclass(frozen=True)
class Limits:
    """What bounds one episode.

    :ivar max_turns: the most model turns.
    :ivar max_tokens: the most response tokens, the model's and the environment's together.
    :ivar timeout: seconds from the agent's start to its answer.
    """

    max_turns: int
    max_tokens: int
    timeout: float = 600.0


def describe_failure(error: BaseException) -> str:
    """An exception as one line."""
    return f"{type(error).__name__}: {' '.join(str(error).split()) or 'no message'}"


class Episode:
    """Answers one agent's chat requests with the policy, recording the tokens.

    :param renderer: the chat template of the policy's tokenizer.
    :param generate: the engine's generate function.
    :param limits: the episode's limits.
    :param model: the model name the answers carry.
    """

    def __init__(
        self, renderer: ChatRenderer, generate: Generate, limits: Limits, model: str = "policy"
    ) -> None:
        self.renderer = renderer
        self.generate = generate
        self.limits = limits
        self.model = model
        self.trajectory: Trajectory | None = None
        self.messages: list[dict[str, Any]] = []  # the conversation the trajectory holds
        self.prompt_messages = 0  # how many of them the first request sent: the prompt
        self.tools: list[dict[str, Any]] | None = None
        self.turns = 0
        self.tool_messages = 0
        self.failure: str | None = None
        self.ended = False
        self._turn_ended = True
        self._one_turn_at_a_time = asyncio.Lock()

    @property
    def full(self) -> bool:
        return (
            self.trajectory is not None
            and len(self.trajectory.response_ids) >= self.limits.max_tokens
        )

    async def chat(self, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one chat-completions request body. Requests are answered one at a time, in
        the order they came: the episode is one token sequence. A request that fails (the
        generator, the chat template) ends the episode as a failure, so that a retried request
        cannot append its messages twice."""
        async with self._one_turn_at_a_time:
            try:
                return await self._answer(request)
            except Exception as error:
                self.fail(describe_failure(error))
                raise

    def fail(self, reason: str) -> None:
        """End the episode as a failure; the first reason is the one kept."""
        self.failure = self.failure or reason
        self.ended = True

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        messages = [chat_message(message) for message in request["messages"]]
        if self.ended:
            return self._completion("", [], "length")
        if self.trajectory is None:
            self.tools = request.get("tools") or None
            self.prompt_messages = len(messages)
            self.trajectory = Trajectory(self.renderer.prompt_ids(messages, self.tools))
        elif messages[: len(self.messages)] != self.messages:
            self.fail(
                "the agent rewrote the conversation it had sent, so the episode is not one "
                "token sequence (keep the agent's memory whole while training)"
            )
            return self._completion("", [], "length")
        else:
            added = messages[len(self.messages) :]
            self.trajectory.add_context(
                self.renderer.context_ids(added, self.tools, turn_ended=self._turn_ended)
            )
            self.tool_messages += sum(message["role"] == "tool" for message in added)
        budget = self.limits.max_tokens - len(self.trajectory.response_ids)
        asked = request.get("max_completion_tokens") or request.get("max_tokens")
        if isinstance(asked, int) and asked > 0:  # the agent's own limit for this turn
            budget = min(budget, asked)
        if budget <= 0:
            self.ended = True
            return self._completion("", [], "length")
        generated = await self.generate(self.trajectory.ids, budget)
        self.trajectory.add_model(generated.token_ids, generated.logprobs)
        self.turns += 1
        eos = self.renderer.eos_token_id
        self._turn_ended = bool(generated.token_ids) and generated.token_ids[-1] == eos
        content, calls = parse_tool_calls(self.renderer.decode(generated.token_ids))
        if any("error" in call for call in calls):  # a malformed call: the agent sees the text
            content, calls = self.renderer.decode(generated.token_ids), []
        content = self.renderer.strip_special(content)
        self.ended = self.full or self.turns >= self.limits.max_turns
        self.messages = [*messages, assistant_message(content, calls)]
        finish = (
            "length" if self.full or not self._turn_ended else ("tool_calls" if calls else "stop")
        )
        return self._completion(content, calls, finish, len(generated.token_ids))

    def _completion(
        self, content: str, calls: list[dict[str, Any]], finish: str, completion_tokens: int = 0
    ) -> dict[str, Any]:
        total = len(self.trajectory.ids) if self.trajectory is not None else 0
        return completion(
            content,
            calls,
            finish,
            model=self.model,
            prompt_tokens=total - completion_tokens,
            completion_tokens=completion_tokens,
        )


def chat_message(message: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI request message in the form the episode keeps (and the chat template renders):
    text content, an assistant's tool calls as :func:`assistant_message` writes them (arguments
    as objects, no ids), so that a repeated turn compares equal to the one answered."""
    role, content = message.get("role"), text_of(message.get("content"))
    if role == "tool":
        kept = {"role": "tool", "content": content}
        if message.get("name"):
            kept["name"] = message["name"]
        return kept
    if role != "assistant":
        return {"role": role, "content": content}
    calls = [
        {
            "name": call["function"]["name"],
            "arguments": _arguments(call["function"].get("arguments")),
        }
        for call in message.get("tool_calls") or []
    ]
    return assistant_message(content.strip(), calls)


def text_of(content: Any) -> str:
    """A message's content as text: OpenAI clients send a string or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def _arguments(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            return arguments
    return {} if arguments is None else arguments


def completion(
    content: str,
    calls: list[dict[str, Any]],
    finish_reason: str,
    *,
    model: str,
    prompt_tokens: int,
    completion_tokens: int,
) -> dict[str, Any]:
    """An OpenAI chat-completion response body."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            }
            for call in calls
        ]
    return {
        "id": f"chatcmpl-{uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
