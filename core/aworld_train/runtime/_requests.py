"""What an agent's request asks of its turn, read from either OpenAI API an agent calls.

Agents call their model through ``chat/completions`` (the OpenAI SDK's ``chat`` API, LangChain,
LangGraph, smolagents, AWorld) or the Responses API (the OpenAI Agents SDK's default). Both come
down to one :class:`TurnRequest`: the conversation as chat messages, the tools as chat-style
function schemas, and the few fields that shape the turn (its token limit, stop sequences,
``tool_choice``, log-probs). Every other field a client may send is decided here, once for both
APIs (the table is in ``docs/agents.md``):

- :data:`GOVERNED`: sampling settings the training owns. The job's generation settings apply,
  and the first request that sends one logs a warning naming it (frameworks send them on every
  call, so the warning is once per process).
- :data:`NO_EFFECT`: fields that change nothing about the turn (bookkeeping, caching, the model's
  name): accepted.
- A field whose meaning the runtime cannot deliver and that the agent's logic would depend on
  (``n > 1``, a ``response_format`` or ``text.format`` it cannot enforce, built-in tools,
  images, server-side conversations) is a :class:`Refused` request: an OpenAI-style 400 naming
  the field.
- Any other field is accepted with a warning, once, that it is ignored.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger(__name__)

#: Sampling settings the training governs (the job's generation settings apply).
GOVERNED = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "frequency_penalty",
        "presence_penalty",
        "repetition_penalty",
        "logit_bias",
    }
)

#: Fields that change nothing about the turn.
NO_EFFECT = frozenset(
    {
        "model",
        "metadata",
        "user",
        "store",
        "parallel_tool_calls",
        "service_tier",
        "stream",
        "stream_options",
        "prompt_cache_key",
        "safety_identifier",
        "reasoning_effort",
        "reasoning",
        "verbosity",
        "include",
        "truncation",
        "prediction",
        "modalities",
    }
)

#: The fields each API reads into the turn.
_CHAT_FIELDS = frozenset(
    {
        "messages",
        "tools",
        "tool_choice",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "logprobs",
        "top_logprobs",
        "n",
        "response_format",
    }
)
_RESPONSES_FIELDS = frozenset(
    {
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "max_output_tokens",
        "previous_response_id",
        "top_logprobs",
        "text",
        "background",
        "conversation",
        "prompt",
    }
)

_warned: set[str] = set()


class Refused(ValueError):
    """A request the endpoint answers with HTTP 400: the message names the field and the fix."""


@dataclass
class TurnRequest:
    """One turn asked of the policy, whichever API asked it.

    :ivar messages: the conversation, as chat-completions messages.
    :ivar tools: the tools offered, as chat-completions function schemas, or ``None``.
    :ivar max_tokens: the agent's own limit for this turn, or ``None``.
    :ivar stop: stop sequences: the turn ends before the first one the model writes.
    :ivar tool_choice: ``auto``, ``none``, ``required`` or the name of one function.
    :ivar logprobs: whether the answer carries each token's log-prob.
    :ivar top_logprobs: how many alternatives per token were asked for (the engines record only
        the sampled token's log-prob: it is the one alternative returned).
    :ivar include_usage: whether a streamed chat answer ends with a usage chunk
        (``stream_options.include_usage``).
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    tool_choice: str = "auto"
    logprobs: bool = False
    top_logprobs: int = 0
    include_usage: bool = False


def chat_request(body: Any) -> TurnRequest:
    """A ``chat/completions`` request body as a turn.

    :raises Refused: for a body that is not a chat request, or a field the runtime cannot honour.
    """
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise Refused("a chat-completions request needs a 'messages' list")
    if not all(isinstance(message, dict) for message in body["messages"]):
        raise Refused("'messages' must be a list of message objects")
    _note_other_fields(body, _CHAT_FIELDS)
    _flag(body, "stream")  # the endpoint streams on it
    n = body.get("n")
    if n not in (None, 1):
        raise Refused(
            f"n={n} is not supported by the training endpoint: each request is one turn of one "
            "episode (GRPO samples the group as separate episodes); send n=1 or leave it out"
        )
    response_format = _mapping(body.get("response_format"), "response_format")
    if response_format.get("type") not in (None, "text"):
        raise Refused(
            f"response_format {response_format.get('type')!r} is not supported by the training "
            "endpoint: the policy's output is not constrained; ask for the format in the prompt "
            "and let the reward score it"
        )
    tools = body.get("tools") or None
    return TurnRequest(
        messages=body["messages"],
        tools=_function_tools(tools, responses=False) if tools else None,
        max_tokens=_positive(body, "max_completion_tokens", "max_tokens"),
        stop=_stop(body.get("stop")),
        tool_choice=_tool_choice(body.get("tool_choice")),
        logprobs=_flag(body, "logprobs"),
        top_logprobs=_count(body.get("top_logprobs"), "top_logprobs"),
        include_usage=bool(
            _mapping(body.get("stream_options"), "stream_options").get("include_usage")
        ),
    )


def responses_request(body: Any, history: dict[str, list[dict[str, Any]]]) -> TurnRequest:
    """A Responses API request body as a turn.

    :param history: each earlier response's id -> its conversation (input and output as chat
        messages), for ``previous_response_id``.
    :raises Refused: for a body that is not a Responses request, or a field the runtime cannot
        honour.
    """
    if not isinstance(body, dict) or "input" not in body:
        raise Refused("a Responses API request needs an 'input'")
    _note_other_fields(body, _RESPONSES_FIELDS)
    _flag(body, "stream")  # the endpoint streams on it
    for name in ("background", "conversation", "prompt"):
        if body.get(name):
            raise Refused(
                f"'{name}' is not supported by the training endpoint: it keeps no server-side "
                "state or stored prompts; send the conversation as 'input'"
            )
    text_format = _mapping(_mapping(body.get("text"), "text").get("format"), "text.format")
    if text_format.get("type") not in (None, "text"):
        raise Refused(
            f"text.format {text_format.get('type')!r} is not supported by the training endpoint: "
            "the policy's output is not constrained; ask for the format in the prompt and let "
            "the reward score it"
        )
    messages: list[dict[str, Any]] = []
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise Refused("'previous_response_id' must be a string, the id of an earlier response")
    if previous:
        if previous not in history:
            raise Refused(f"previous_response_id {previous!r} is not a response of this episode")
        messages = [dict(message) for message in history[previous]]
        messages = [m for m in messages if m.get("role") != "system"]
    if body.get("instructions"):
        messages.insert(0, {"role": "system", "content": str(body["instructions"])})
    messages += input_messages(body["input"])
    tools = body.get("tools") or None
    include = body.get("include") or []
    if not isinstance(include, list):
        raise Refused("'include' must be a list of strings")
    return TurnRequest(
        messages=messages,
        tools=_function_tools(tools, responses=True) if tools else None,
        max_tokens=_positive(body, "max_output_tokens"),
        tool_choice=_tool_choice(body.get("tool_choice")),
        logprobs=bool(body.get("top_logprobs")) or "message.output_text.logprobs" in include,
        top_logprobs=_count(body.get("top_logprobs"), "top_logprobs"),
    )


def input_messages(items: Any) -> list[dict[str, Any]]:
    """Responses API input items as chat messages: messages keep their role (``developer`` is a
    system message), a model's function calls join the assistant message before them, each
    call's output is a tool message, and reasoning items (the policy writes none) are dropped."""
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    if not isinstance(items, list):
        raise Refused("'input' must be a string or a list of items")
    messages: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message") if isinstance(item, dict) else None
        if kind == "message" and "role" in item:
            role = "system" if item["role"] == "developer" else item["role"]
            messages.append({"role": role, "content": _input_text(item.get("content"))})
        elif kind == "function_call":
            if not isinstance(item.get("name"), str):
                raise Refused("a function_call input item needs its function's 'name'")
            call = {
                "id": item.get("call_id") or item.get("id"),
                "type": "function",
                "function": {"name": item["name"], "arguments": item.get("arguments") or "{}"},
            }
            last = messages[-1] if messages else None
            if last is None or last["role"] != "assistant":
                last = {"role": "assistant", "content": ""}
                messages.append(last)
            last.setdefault("tool_calls", []).append(call)
        elif kind == "function_call_output":
            output = item.get("output")
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": item.get("call_id"),
                    "content": output if isinstance(output, str) else _input_text(output),
                }
            )
        elif kind == "reasoning":
            continue
        else:
            raise Refused(
                f"input item type {kind!r} is not supported by the training endpoint (it takes "
                "messages, function_call and function_call_output items)"
            )
    return messages


def _input_text(content: Any) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise Refused(
            "a message's 'content' (a function_call_output's 'output') must be a string or a "
            "list of content parts"
        )
    texts = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text"):
            raise Refused(
                f"content part {kind!r} is not supported by the training endpoint: the policy "
                "reads text only"
            )
        texts.append(part.get("text", ""))
    return "".join(texts)


def _function_tools(tools: Any, *, responses: bool) -> list[dict[str, Any]]:
    """The tools as chat-completions function schemas; a built-in tool is refused."""
    schemas = []
    for tool in tools if isinstance(tools, list) else []:
        kind = tool.get("type") if isinstance(tool, dict) else None
        if kind != "function":
            raise Refused(
                f"tool type {kind!r} is not supported by the training endpoint: only function "
                "tools, which the agent runs itself"
            )
        function = tool if responses else tool.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            where = "a 'name'" if responses else "a 'function' object with a 'name'"
            raise Refused(f"each function tool needs {where}")
        if responses:
            function = {
                key: tool[key] for key in ("name", "description", "parameters") if key in tool
            }
        schemas.append({"type": "function", "function": function})
    return schemas


def _tool_choice(choice: Any) -> str:
    if choice is None:
        return "auto"
    if choice in ("auto", "none"):
        return str(choice)
    name = None
    if isinstance(choice, dict):
        name = _mapping(choice.get("function"), "tool_choice.function").get("name") or choice.get(
            "name"
        )
    if choice == "required" or isinstance(name, str):
        if "tool_choice" not in _warned:
            _warned.add("tool_choice")
            logger.warning(
                "agents send tool_choice=%s; the policy's turn is not constrained to call a "
                "tool: a turn without a call is returned as text (the reward teaches the call)",
                json.dumps(choice)[:60],
            )
        return "required" if choice == "required" else str(name)
    raise Refused(
        f"tool_choice {choice!r} is not one the training endpoint knows: 'auto', 'none', "
        "'required' or one function"
    )


def _stop(stop: Any) -> list[str]:
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise Refused("'stop' must be a string or a list of strings")
    return [s for s in stops if s]


def _mapping(value: Any, name: str) -> dict[str, Any]:
    """An object field (``{}`` when left out)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Refused(f"'{name}' must be an object, not {type(value).__name__}")
    return value


def _count(value: Any, name: str) -> int:
    """A count field (0 when left out)."""
    if value is None:
        return 0
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Refused(f"'{name}' must be a whole number, 0 or more")
    return value


def _positive(body: dict[str, Any], *names: str) -> int | None:
    """The first of the token-limit fields ``names`` that ``body`` sets (``None`` when none)."""
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise Refused(f"'{name}' must be a whole number above 0")
        return value
    return None


def _flag(body: dict[str, Any], name: str) -> bool:
    """A true-or-false field (false when left out): a string "false" must not read as true."""
    value = body.get(name)
    if value is not None and not isinstance(value, bool):
        raise Refused(f"'{name}' must be true or false, not {type(value).__name__}")
    return bool(value)


def _note_other_fields(body: dict[str, Any], read: frozenset[str]) -> None:
    """Warn once per field for a governed sampling setting or an unknown field."""
    for name, value in body.items():
        if name in read or name in NO_EFFECT or value is None or name in _warned:
            continue
        _warned.add(name)
        if name in GOVERNED:
            logger.warning(
                "agents send %s=%s; the training's own generation settings apply (the job's "
                "temperature, top_p, ...), so the request's is ignored",
                name,
                json.dumps(value)[:40],
            )
        else:
            logger.warning("agents send '%s', which the training endpoint ignores", name)
