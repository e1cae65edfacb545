"""One model turn as each OpenAI API answers it: a chat completion, its stream of chunks, a
Responses API response and its stream of events.

The policy generates a turn whole; a streaming request then gets it as a stream (a content
delta, a delta per tool call, the finish reason, usage when asked), so that a client that
streams reads the same turn a plain request gets.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4


@dataclass
class Turn:
    """The policy's answer to one request.

    :ivar content: the turn's text (without tool calls, stop sequence or special tokens).
    :ivar calls: the tool calls, each ``{"name", "arguments"}`` (arguments as an object).
    :ivar finish_reason: ``stop``, ``tool_calls`` or ``length``.
    :ivar prompt_tokens: the tokens before the turn.
    :ivar completion_tokens: the tokens the turn kept.
    :ivar tokens: each kept token's text and log-prob, when the request asked for log-probs.
    :ivar call_ids: one id per call, numbered within the episode (``call_0``, ...).
    """

    content: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str = "stop"
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: list[tuple[str, float]] | None = None
    call_ids: list[str] = field(default_factory=list)

    def tool_calls(self) -> list[dict[str, Any]]:
        """The calls as chat-completions ``tool_calls``."""
        return [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
            }
            for call_id, call in zip(self.call_ids, self.calls)
        ]

    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }


def chat_completion(turn: Turn, model: str) -> dict[str, Any]:
    """A chat-completion response body."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if turn.calls:
        message["tool_calls"] = turn.tool_calls()
    return {
        "id": f"chatcmpl-{uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": turn.finish_reason,
                "logprobs": _chat_logprobs(turn),
            }
        ],
        "usage": turn.usage(),
    }


def chat_chunks(turn: Turn, model: str, *, usage: bool) -> Iterator[dict[str, Any]]:
    """The chat-completion chunks of a streamed turn: the role and content, one chunk per tool
    call, the finish reason, then usage (as its own chunk, with no choices) when asked."""
    head = {
        "id": f"chatcmpl-{uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None, **extra}
        return {**head, "choices": [choice]}

    yield chunk({"role": "assistant", "content": ""})
    if turn.content:
        yield chunk({"content": turn.content}, logprobs=_chat_logprobs(turn))
    for index, call in enumerate(turn.tool_calls()):
        yield chunk({"tool_calls": [{"index": index, **call}]})
    yield chunk({}, turn.finish_reason)
    if usage:
        yield {**head, "choices": [], "usage": turn.usage()}


def _chat_logprobs(turn: Turn) -> dict[str, Any] | None:
    if turn.tokens is None:
        return None
    return {"content": [_token_logprob(text, logprob) for text, logprob in turn.tokens]}


def _token_logprob(text: str, logprob: float) -> dict[str, Any]:
    # The engines record the sampled token's log-prob only: it is the one "top" alternative.
    token = {"token": text, "logprob": logprob, "bytes": list(text.encode())}
    return {**token, "top_logprobs": [dict(token)]}


def response_output(turn: Turn) -> list[dict[str, Any]]:
    """The turn as Responses API output items: a message with its text, then a function call
    item per tool call."""
    items: list[dict[str, Any]] = []
    if turn.content or not turn.calls:
        text: dict[str, Any] = {"type": "output_text", "text": turn.content, "annotations": []}
        if turn.tokens is not None:
            text["logprobs"] = [_token_logprob(t, lp) for t, lp in turn.tokens]
        items.append(
            {
                "type": "message",
                "id": f"msg_{uuid4().hex}",
                "status": "completed",
                "role": "assistant",
                "content": [text],
            }
        )
    for call_id, call in zip(turn.call_ids, turn.calls):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{uuid4().hex}",
                "call_id": call_id,
                "name": call["name"],
                "arguments": json.dumps(call["arguments"]),
                "status": "completed",
            }
        )
    return items


def response(turn: Turn, model: str, request: dict[str, Any], response_id: str) -> dict[str, Any]:
    """A Responses API response object."""
    cut = turn.finish_reason == "length"
    return {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "model": model,
        "instructions": request.get("instructions"),
        "output": response_output(turn),
        "parallel_tool_calls": bool(request.get("parallel_tool_calls", True)),
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "temperature": request.get("temperature"),
        "top_p": request.get("top_p"),
        "max_output_tokens": request.get("max_output_tokens"),
        "previous_response_id": request.get("previous_response_id"),
        "metadata": request.get("metadata") or {},
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "usage": {
            "input_tokens": turn.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": turn.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": turn.prompt_tokens + turn.completion_tokens,
        },
    }


def response_events(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The Responses API's stream of events for a finished response ``body``: created, each
    output item added, its text or arguments (delta, done), the item done, completed."""
    # The response as it starts: what identifies it (clients take the rest from the last event).
    started = {key: body[key] for key in ("id", "object", "created_at", "model")}
    started.update(status="in_progress", output=[], usage=None)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(body["output"]):
        if item["type"] == "message":
            events += _message_events(index, item)
        else:
            events += _function_call_events(index, item)
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    done = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    events.append({"type": done, "response": body})
    for number, event in enumerate(events):
        event["sequence_number"] = number
        yield event


def _message_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream's events for output message ``item``: added empty, its one text part added,
    the text (one delta, done), the part done."""
    where = {"output_index": index, "item_id": item["id"]}
    part = item["content"][0]
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {
            "type": "response.content_part.added",
            **where,
            "content_index": 0,
            "part": {**part, "text": ""},
        },
        {
            "type": "response.output_text.delta",
            **where,
            "content_index": 0,
            "delta": part["text"],
            "logprobs": part.get("logprobs", []),
        },
        {
            "type": "response.output_text.done",
            **where,
            "content_index": 0,
            "text": part["text"],
            "logprobs": part.get("logprobs", []),
        },
        {"type": "response.content_part.done", **where, "content_index": 0, "part": part},
    ]


def _function_call_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream's events for function call ``item``: added without arguments, then its
    arguments (one delta, done)."""
    where = {"output_index": index, "item_id": item["id"]}
    return [
        {
            "type": "response.output_item.added",
            "output_index": index,
            "item": {**item, "status": "in_progress", "arguments": ""},
        },
        {"type": "response.function_call_arguments.delta", **where, "delta": item["arguments"]},
        {
            "type": "response.function_call_arguments.done",
            **where,
            "name": item["name"],
            "arguments": item["arguments"],
        },
    ]
