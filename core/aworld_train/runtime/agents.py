"""The three forms of agent, each run against one episode's endpoint URL.

- An AWorld ``Agent``: a fresh copy per episode, its LLM pointed at the episode's URL, run by
  AWorld's own ``Runners`` on the row's last user message; its answer is the task's answer.
- A Python agent: the user's ``run(row, llm)`` (sync or async), where ``row`` is the dataset row
  (``prompt`` and every other column) and ``llm`` carries ``base_url``, ``model`` and
  ``api_key`` for an OpenAI client. It returns the final answer as a string, or a mapping with
  ``answer`` and extra fields the reward receives in ``extra_info``.
- The spec form (system prompt, tools, MCP servers, ``max_turns``): :func:`run_spec_agent`, a
  small chat loop of the core's own that calls the model over the same endpoint and the tools
  through the agent's :class:`~aworld_train.tools.ToolSet`.

AWorld is imported only for an AWorld agent; the OpenAI SDK is never imported by the core.
"""

from __future__ import annotations

import asyncio
import inspect
import io
import pickle
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from aworld_train.quiet import apply_quiet_libraries

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec
    from aworld_train.tools import ToolSet

#: The API key agents send to the loopback endpoint (their own key never leaves the driver).
LOOPBACK_API_KEY = "aworld-train-loopback"


@dataclass(frozen=True)
class LLM:
    """What a Python agent needs to reach the policy with an OpenAI client:
    ``AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key)`` and ``model=llm.model``."""

    base_url: str
    model: str
    api_key: str = LOOPBACK_API_KEY


@dataclass
class Answer:
    """What an agent returned: the text the reward scores, and extra fields for the reward."""

    text: str
    extra: dict[str, Any] = field(default_factory=dict)


async def run_agent(
    spec: AgentSpec, row: dict[str, Any], llm: LLM, tools: ToolSet | None
) -> Answer:
    """Run the agent ``spec`` describes on ``row`` with its model at ``llm``."""
    if spec.run is not None:
        return await _run_python(spec, row, llm)
    if spec.source is not None:
        return await _run_aworld(spec.source, row, llm)
    return await run_spec_agent(spec, row, llm, tools)


async def _run_python(spec: AgentSpec, row: dict[str, Any], llm: LLM) -> Answer:
    function = getattr(spec.run, "function", spec.run)  # a function loaded from a reference
    # An async function, or an object whose __call__ is one.
    if inspect.iscoroutinefunction(function) or (
        callable(function) and inspect.iscoroutinefunction(function.__call__)
    ):
        result = await function(row, llm)
    else:  # a sync agent blocks: it runs in a thread, so that other episodes go on
        result = await asyncio.to_thread(function, row, llm)
        if inspect.isawaitable(result):
            result = await result
    return as_answer(result, spec)


def as_answer(result: Any, spec: AgentSpec) -> Answer:
    """What a Python agent returned, as an :class:`Answer`.

    :raises TypeError: for anything but a string or a mapping with a string ``answer``.
    """
    if isinstance(result, str):
        return Answer(result)
    if isinstance(result, dict) and isinstance(result.get("answer"), str):
        return Answer(result["answer"], {k: v for k, v in result.items() if k != "answer"})
    raise TypeError(
        f"{spec.name}() returned {type(result).__name__}: a Python agent returns the "
        "final answer as a string, or a dict with a string 'answer' and extra fields"
    )


async def _run_aworld(agent: Any, row: dict[str, Any], llm: LLM) -> Answer:
    from aworld.runner import Runners

    copy_ = aworld_copy(agent, llm)
    # AWorld's logs stay out of the user's folder in the processes it starts (the CLI set this
    # before AWorld was imported; see aworld_train.quiet).
    apply_quiet_libraries()
    # Each run gets a session of its own: AWorld's default session id is a timestamp to the
    # second, and episodes that share one share their memory.
    response = await Runners.run(
        input=last_user_text(row["prompt"]), agent=copy_, session_id=f"aworld-train-{uuid4().hex}"
    )
    if response is None or not getattr(response, "success", True):
        raise RuntimeError(
            f"the agent's task failed: {getattr(response, 'msg', None) or 'no message'}"
        )
    return Answer(str(getattr(response, "answer", "") or ""))


def aworld_copy(agent: Any, llm: LLM | None) -> Any:
    """A fresh copy of an AWorld ``Agent`` (AWorld agents keep state between runs), its LLM
    pointed at ``llm``."""
    agent = pickle.loads(dump_aworld_agent(agent, _by_value_pickler()))
    # AWorld keeps an agent's memory by its id: copies running at once need ids of their own.
    agent._id = f"{agent.name()}---uuid{uuid4().hex[:6]}uuid"
    if llm is not None:
        conf = agent.conf.llm_config
        conf.llm_provider = "openai"
        conf.llm_base_url = llm.base_url
        conf.llm_api_key = llm.api_key
        conf.llm_stream_call = False
        agent._llm = None  # AWorld builds its client lazily from llm_config: rebuild it
    if hasattr(type(agent), "_save_failed_request_context"):
        # AWorld saves every model request that failed into ./failed_requests of whatever folder
        # the process runs in; the runtime records the episode's failure itself.
        agent._save_failed_request_context = _no_failed_request_file
    return agent


async def _no_failed_request_file(*_: Any, **__: Any) -> None:
    return None


#: What an AWorld sandbox is built from (its constructor's keywords, read back as properties).
SANDBOX_SETTINGS = (
    "mcp_servers",
    "mcp_config",
    "black_tool_actions",
    "skill_configs",
    "tools",
    "custom_env_tools",
    "agents",
    "env_content_name",
    "env_content",
    "workspaces",
)


def aworld_pickler(base: type[pickle.Pickler] = pickle.Pickler) -> type[pickle.Pickler]:
    """``base`` extended to pickle an AWorld sandbox (the MCP servers' runtime) as its settings:
    a live one holds open log files and is registered under its id, so each copy of an agent
    builds its own.

    :param base: the pickler class to extend (``cloudpickle.Pickler`` for another process).
    """
    from aworld.sandbox import Sandbox

    class AgentPickler(base):  # type: ignore[misc, valid-type]
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, Sandbox):
                return rebuild_sandbox, (
                    type(obj),
                    {key: getattr(obj, key) for key in SANDBOX_SETTINGS},
                )
            parent = getattr(super(), "reducer_override", None)
            return parent(obj) if parent is not None else NotImplemented

    return AgentPickler


def dump_aworld_agent(agent: Any, pickler: type[pickle.Pickler] = pickle.Pickler) -> bytes:
    """An AWorld ``Agent`` pickled with :func:`aworld_pickler` of ``pickler``."""
    buffer = io.BytesIO()
    aworld_pickler(pickler)(buffer).dump(agent)
    return buffer.getvalue()


def _by_value_pickler() -> type[pickle.Pickler]:
    """cloudpickle's pickler where it is installed (AWorld brings it): an agent subclass
    defined in a user's script pickles by value, not by a name nothing can import."""
    try:
        import cloudpickle
    except ImportError:
        return pickle.Pickler
    return cloudpickle.Pickler


def rebuild_sandbox(cls: type, settings: dict[str, Any]) -> Any:
    """A new AWorld sandbox, with an id of its own, from a pickled one's settings."""
    return cls(**settings)


def last_user_text(prompt: Any) -> str:
    """The task an AWorld agent gets: the prompt's last user message (its system prompt is the
    agent's own), or the prompt itself when it is a string."""
    if isinstance(prompt, str):
        return prompt
    for message in reversed(prompt):
        if message.get("role") == "user":
            return str(message.get("content") or "")
    raise ValueError("the row's prompt has no user message")


def prompt_messages(prompt: Any, system_prompt: str | None) -> list[dict[str, Any]]:
    """A row's prompt as chat messages, the agent's system prompt first unless the row has one."""
    messages = (
        [{"role": "user", "content": prompt}]
        if isinstance(prompt, str)
        else [dict(message) for message in prompt]
    )
    if system_prompt and not any(message.get("role") == "system" for message in messages):
        messages.insert(0, {"role": "system", "content": system_prompt})
    return messages


async def run_spec_agent(
    spec: AgentSpec, row: dict[str, Any], llm: LLM, tools: ToolSet | None
) -> Answer:
    """The spec form's agent: ask the model, run the tools it calls, give it their results, up
    to ``max_turns`` turns; the last turn's text is the answer."""
    import aiohttp

    messages = prompt_messages(row["prompt"], spec.system_prompt)
    schemas = tools.schemas() if tools else None
    content = ""
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {llm.api_key}"}) as http:
        for turn in range(1, spec.max_turns + 1):
            body: dict[str, Any] = {"model": llm.model, "messages": messages}
            if schemas:
                body["tools"] = schemas
            async with http.post(f"{llm.base_url}/chat/completions", json=body) as response:
                answer = await response.json()
                if response.status != 200:
                    raise RuntimeError(answer.get("error", {}).get("message", str(response.status)))
            choice = answer["choices"][0]
            message = choice["message"]
            content = message.get("content") or ""
            calls = message.get("tool_calls") or []
            messages.append(message)
            if not calls or choice["finish_reason"] == "length" or turn == spec.max_turns:
                break  # no turn is left to read the results: the calls do not run
            for call in calls:
                function = call["function"]
                result = await _call_tool(tools, function["name"], function.get("arguments"))
                messages.append(
                    {
                        "role": "tool",
                        "name": function["name"],
                        "content": result,
                        "tool_call_id": call.get("id"),
                    }
                )
    return Answer(content)


#: Seconds one tool call of the spec form may take (an MCP server's own timeout when longer).
TOOL_TIMEOUT = 30.0


async def _call_tool(tools: ToolSet | None, name: str, arguments: Any) -> str:
    """One tool call's result text; a call that does not answer in time is told to the model
    as an error, as an unknown tool or bad arguments are."""
    if not tools:
        return f"Error: unknown tool '{name}'; the agent has no tools"
    from aworld_train.tools import MCPTool

    try:
        tool = tools.get(name)
        timeout = (
            max(TOOL_TIMEOUT, tool.server.timeout) if isinstance(tool, MCPTool) else TOOL_TIMEOUT
        )
    except Exception:  # noqa: BLE001 - an unknown name is answered by acall's own error text
        timeout = TOOL_TIMEOUT
    try:
        return await asyncio.wait_for(tools.acall(name, arguments), timeout)
    except asyncio.TimeoutError:
        return f"Error: tool '{name}' did not answer within {timeout:g} s"
