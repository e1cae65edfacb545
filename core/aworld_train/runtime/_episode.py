"""One agent episode's conversation with the policy: the answerer behind its endpoint URL.

Each request the agent sends is answered with one turn of the policy and recorded as token
sequences (:class:`~aworld_train.runtime._trajectory.Trajectory`). The first request's messages and
tools are the prompt. While every later request repeats the conversation so far (as chat clients
do), the messages it adds (tool results, feedback) are appended with mask 0 and the episode stays
one sequence. A request that rewrites what was already sent (smolagents re-renders its memory on
every call; a summarising agent drops old turns) starts a new *segment*: that request's
conversation, rendered as a prompt of its own, and the turns generated for it. An engine trains
each segment as a row of its own, all with the episode's reward; an engine that trains an episode
as one sequence names itself in :attr:`Limits.one_sequence`, and a rewrite then ends the episode
as a failure that says which message changed.

Limits: a turn has at most the request's own token limit and what is left of the segment's
budget. After ``max_turns`` model turns, or once a segment's response holds ``max_tokens``
tokens, a further request is answered with an empty turn and ``finish_reason: "length"``, and
the agent is expected to stop. A turn ends at the first of the request's stop sequences: the
tokens up to it are kept exactly as the model wrote them, and the stop text is not returned.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aworld_train.runtime._replies import Turn
from aworld_train.runtime._requests import TurnRequest
from aworld_train.runtime._trajectory import (
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
    :ivar max_tokens: the most response tokens of a segment, the model's and the environment's
        together.
    :ivar timeout: seconds from the agent's start to its answer.
    :ivar one_sequence: the engine's name when it trains an episode as one token sequence only,
        so that a rewritten conversation fails the episode; empty when it trains each segment.
    :ivar segment_engines: the installed engines that train each segment, which the failure
        names.
    """

    max_turns: int
    max_tokens: int
    timeout: float = 600.0
    one_sequence: str = ""
    segment_engines: tuple[str, ...] = ()


def describe_failure(error: BaseException) -> str:
    """An exception as one line."""
    return f"{type(error).__name__}: {' '.join(str(error).split()) or 'no message'}"


class Episode:
    """Answers one agent's requests with the policy, recording the tokens.

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
        self.segments: list[Trajectory] = []
        self.messages: list[dict[str, Any]] = []  # the conversation the last segment holds
        self.prompt_messages = 0  # how many of them its first request sent: the prompt
        self.tools: list[dict[str, Any]] | None = None
        self.rewrite: str | None = None  # how the agent first rewrote its conversation
        self.turns = 0
        self.calls = 0  # the tool calls answered so far: each call's id is its number
        self.tool_messages = 0
        self.failure: str | None = None
        self.ended = False
        self._turn_ended = True
        self._one_turn_at_a_time = asyncio.Lock()

    @property
    def trajectory(self) -> Trajectory | None:
        """The segment being recorded (the episode's only one unless the agent rewrote it)."""
        return self.segments[-1] if self.segments else None

    @property
    def full(self) -> bool:
        return (
            self.trajectory is not None
            and len(self.trajectory.response_ids) >= self.limits.max_tokens
        )

    async def chat(self, request: TurnRequest) -> Turn:
        """Answer one request. Requests are answered one at a time, in the order they came: a
        segment is one token sequence. A request that fails (the generator, the chat template)
        ends the episode as a failure, so that a retried request cannot append its messages
        twice."""
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

    async def _answer(self, request: TurnRequest) -> Turn:
        messages = [chat_message(message) for message in request.messages]
        tools = request.tools or None
        if self.ended:
            return self._turn("", "length")
        trajectory = self.trajectory
        extends = messages[: len(self.messages)] == self.messages and tools == self.tools
        if trajectory is None or not extends:
            if trajectory is not None:
                rewrite = self._rewrite(messages, tools)
                self.rewrite = self.rewrite or rewrite
                if self.limits.one_sequence:
                    engines = ", ".join(self.limits.segment_engines) or "none installed here"
                    self.fail(
                        f"the agent rewrote the conversation it had sent ({rewrite}); engine "
                        f"'{self.limits.one_sequence}' trains an episode as one token sequence; "
                        f"engines that train each model call as a row ({engines}) can train "
                        "it: see docs/agents.md"
                    )
                    return self._turn("", "length")
            self.tools = tools
            self.prompt_messages = len(messages)
            self.segments.append(Trajectory(self.renderer.prompt_ids(messages, tools)))
            self._turn_ended = True
        else:
            added = messages[len(self.messages) :]
            trajectory.add_context(
                self.renderer.context_ids(added, tools, turn_ended=self._turn_ended)
            )
            self.tool_messages += sum(message["role"] == "tool" for message in added)
        trajectory = self.segments[-1]
        budget = self.limits.max_tokens - len(trajectory.response_ids)
        if request.max_tokens is not None:  # the agent's own limit for this turn
            budget = min(budget, request.max_tokens)
        if budget <= 0:
            self.ended = True
            self.messages = messages  # what the segment holds: the context was added
            return self._turn("", "length")
        generated = await self.generate(trajectory.ids, budget)
        ids, logprobs = generated.token_ids, generated.logprobs
        text = self.renderer.decode(ids)
        stopped = _stop_at(text, request.stop)
        if stopped is not None:
            kept = self._tokens_up_to(ids, stopped + _stop_length(text, stopped, request.stop))
            ids, logprobs, text = ids[:kept], logprobs[:kept], text[:stopped]
        trajectory.add_model(ids, logprobs)
        self.turns += 1
        self._turn_ended = bool(ids) and ids[-1] == self.renderer.eos_token_id
        content, calls = parse_tool_calls(text)
        if request.tool_choice == "none" or any("error" in call for call in calls):
            content, calls = text, []  # a malformed call: the agent sees the text
        content = self.renderer.strip_special(content)
        self.ended = self.full or self.turns >= self.limits.max_turns
        self.messages = [*messages, assistant_message(content, calls)]
        cut = self.full or (not self._turn_ended and stopped is None)
        finish = "length" if cut else ("tool_calls" if calls else "stop")
        tokens = None
        if request.logprobs:
            tokens = [(self.renderer.decode([t]), lp) for t, lp in zip(ids, logprobs)]
        return self._turn(content, finish, calls, len(ids), tokens)

    def _rewrite(self, messages: list[dict[str, Any]], tools: Any) -> str:
        """Which message the agent changed, with a short before and after."""
        if tools != self.tools:
            return "the tools it offers changed"
        index = next(
            (i for i, (old, new) in enumerate(zip(self.messages, messages)) if old != new),
            len(messages),
        )
        if index >= len(messages):
            return f"it sent {len(messages)} of the {len(self.messages)} messages it had sent"
        old, new = self.messages[index], messages[index]
        return (
            f"message {index} ({old.get('role')}) was {_short(old)} and is now "
            f"{_short(new)} ({new.get('role')})"
        )

    def _tokens_up_to(self, ids: list[int], end: int) -> int:
        """The fewest leading tokens whose text reaches character ``end``."""
        low, high = 1, len(ids)
        while low < high:
            middle = (low + high) // 2
            if len(self.renderer.decode(ids[:middle])) >= end:
                high = middle
            else:
                low = middle + 1
        return high

    def _turn(
        self,
        content: str,
        finish: str,
        calls: list[dict[str, Any]] | None = None,
        completion_tokens: int = 0,
        tokens: list[tuple[str, float]] | None = None,
    ) -> Turn:
        total = len(self.trajectory.ids) if self.trajectory is not None else 0
        calls = calls or []
        # Ids numbered within the episode, not random: an agent that renders them into its
        # context (smolagents) sends the same tokens for the same episode, and the policy is
        # not trained on noise it could never predict.
        call_ids = [f"call_{self.calls + n}" for n in range(len(calls))]
        self.calls += len(calls)
        return Turn(
            content,
            calls,
            finish,
            prompt_tokens=total - completion_tokens,
            completion_tokens=completion_tokens,
            tokens=tokens,
            call_ids=call_ids,
        )


def _stop_at(text: str, stops: list[str]) -> int | None:
    """Where the first stop sequence in ``text`` starts, or ``None``."""
    found = [index for index in (text.find(stop) for stop in stops) if index >= 0]
    return min(found) if found else None


def _stop_length(text: str, at: int, stops: list[str]) -> int:
    return max(len(stop) for stop in stops if text.startswith(stop, at))


def _short(message: dict[str, Any]) -> str:
    text = message.get("content") or json.dumps(message.get("tool_calls"))
    text = " ".join(str(text).split())
    return repr(text if len(text) <= 40 else text[:37] + "...")


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
