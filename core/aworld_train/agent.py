"""Agent: what the policy is and how it is prompted, normalised into one :class:`AgentSpec`."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aworld_train.errors import AgentError, did_you_mean


@dataclass
class AgentSpec:
    """One agent, whatever form the user gave it in.

    :ivar name: the agent's name.
    :ivar model: the policy to train: a local model folder or a hub id. The config's ``model``
        key and the engine's own model key, when set, must name the same model (an AWorld
        agent's ``llm_model_name``, the name it calls its server by, gives way to them).
    :ivar system_prompt: prepended as a system message to every prompt.
    :ivar tools: Python tools, each a ``module:function`` reference or a callable.
    :ivar mcp_config: AWorld's MCP configuration (``{"mcpServers": {name: {...}}}``).
    :ivar mcp_servers: the names of the servers in ``mcp_config`` the agent uses.
    :ivar max_turns: the most model turns in one episode.
    :ivar llm_*: AWorld-style LLM settings; the sampling ones (temperature, top_p, max_tokens)
        become the engine's generation settings.
    :ivar run: a Python agent, ``run(row, llm)``, or a ``file.py:run`` reference to one
        (resolved by :func:`load_agent`); ``None`` for the other forms.
    :ivar source: the object the user passed (an AWorld ``Agent``), or ``None``.
    """

    name: str = "agent"
    model: str | None = None
    system_prompt: str | None = None
    tools: list[Any] = field(default_factory=list)
    mcp_config: dict[str, Any] = field(default_factory=dict)
    mcp_servers: list[str] = field(default_factory=list)
    max_turns: int = 1
    llm_provider: str | None = None
    llm_model_name: str | None = None
    llm_base_url: str | None = None
    llm_api_key: str | None = None
    llm_temperature: float | None = None
    llm_top_p: float | None = None
    llm_max_tokens: int | None = None
    run: Any = None
    source: Any = field(default=None, repr=False, compare=False)

    @property
    def form(self) -> str:
        """How the agent runs: ``python`` (the user's ``run``), ``aworld`` (an AWorld
        ``Agent``) or ``spec`` (the core's own chat loop over its prompt and tools)."""
        if self.run is not None:
            return "python"
        return "aworld" if self.source is not None else "spec"

    @property
    def runs_itself(self) -> bool:
        """Whether the agent is the user's own code (an AWorld agent or a Python agent), which
        only an episode run shows."""
        return self.form != "spec"

    @property
    def uses_tools(self) -> bool:
        """Whether the agent calls tools (Python functions or MCP servers)."""
        return bool(self.tools or self.mcp_servers or self.mcp_config.get("mcpServers"))

    def check_turns(self, engine: str, *, calls_tools: bool, runs_episodes: bool) -> None:
        """Refuse turns the engine cannot give: a tool call needs a turn to call the tool and
        another to read its result, and an engine that does not run episodes (``runs_episodes``
        false: it trains a prompt and its completion) gives one turn only.

        :raises AgentError: naming the agent, its ``max_turns`` and the value to set.
        """
        if calls_tools and self.max_turns < 2:
            raise AgentError(
                f"agent '{self.name}' uses tools but has max_turns {self.max_turns}: the model "
                "needs one turn to call a tool and another to read its result: set max_turns >= 2"
            )
        if not runs_episodes and self.max_turns > 1:
            raise AgentError(
                f"agent '{self.name}' has max_turns {self.max_turns} but no tools; the {engine} "
                "engine runs several turns only to answer tool calls: set max_turns to 1"
            )

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data (for ``job.yaml``); secrets are redacted by the run directory."""
        data = {}
        for key in _FIELDS:
            value = getattr(self, key)
            if key == "tools":
                value = [tool if isinstance(tool, str) else _callable_name(tool) for tool in value]
            if key == "run" and value is not None:
                value = getattr(value, "reference", None) or _callable_name(value)
            if value not in (None, [], {}):
                data[key] = value
        return data


_FIELDS = tuple(name for name in AgentSpec.__dataclass_fields__ if name != "source")

#: The turns a Python agent may take when its job does not say: it runs until it answers.
PYTHON_AGENT_TURNS = 10

# AWorld agents keep their LLM settings in ``conf.llm_config`` (a dict); sampling settings
# without a field of their own sit in its ``ext_config`` or ``params``.
_AWORLD_LLM_KEYS = {
    "llm_provider": ("llm_provider",),
    "llm_model_name": ("llm_model_name",),
    "llm_base_url": ("llm_base_url",),
    "llm_api_key": ("llm_api_key",),
    "llm_temperature": ("llm_temperature", "temperature"),
    "llm_top_p": ("llm_top_p", "top_p"),
    "llm_max_tokens": ("llm_max_tokens", "max_tokens"),
}


def load_agent(agent: Any, base_dir: Path | None = None) -> AgentSpec:
    """Normalise an agent given as an AWorld ``Agent``, a YAML/JSON path (relative to
    ``base_dir``), a dict, a ``package.module:factory`` or ``path/to/file.py:factory`` reference
    (the file relative to ``base_dir``), or an ``AgentSpec``.

    AWorld is imported only when an AWorld ``Agent`` is given.

    :raises AgentError: naming the file or key that is wrong.
    """
    if agent is None:
        return AgentSpec()
    if isinstance(agent, AgentSpec):
        return agent
    if isinstance(agent, dict):
        return _resolve_run(from_mapping(agent, "agent"), base_dir)
    if isinstance(agent, (str, Path)):
        text = str(agent)
        path = Path(text) if base_dir is None else base_dir / text
        if path.suffix in (".yaml", ".yml", ".json"):
            from aworld_train.job.files import read_mapping

            return _resolve_run(
                from_mapping(read_mapping(path, AgentError, "agent file"), str(path)), path.parent
            )
        if ":" in text and not path.exists():
            return _from_reference(text, base_dir)
        raise AgentError(
            f"agent '{text}' is neither a .yaml/.json agent file, a file.py:run agent nor a "
            "package.module:factory"
        )
    if _is_aworld_agent(agent):
        return from_aworld(agent)
    if callable(agent):
        if takes_row(agent):
            return python_agent(agent, getattr(agent, "__name__", "agent"))
    raise AgentError(
        f"unsupported agent of type {type(agent).__name__}: give an AWorld Agent, a Python "
        "agent run(row, llm), an agent file, a mapping or a package.module:factory"
    )


def python_agent(run: Any, name: str, **values: Any) -> AgentSpec:
    """A spec for the Python agent ``run(row, llm)``; ``values`` are the other agent keys."""
    values.setdefault("max_turns", PYTHON_AGENT_TURNS)
    spec = AgentSpec(name=name, run=run, **values)
    _validate(spec, f"agent '{name}'")
    return spec


def _from_reference(reference: str, base_dir: Path | None) -> AgentSpec:
    """``file.py:name`` or ``package.module:name``: a Python agent when the function takes the
    row and the llm, else a factory whose result is the agent."""
    from aworld_train.job.references import import_object

    function = import_object(reference, AgentError, "agent", base_dir)
    if not callable(function):
        raise AgentError(f"agent '{reference}' is not callable")
    if takes_row(function):
        return python_agent(_Reference(function, reference), reference.rsplit(":", 1)[-1])
    made = _call_factory(function, reference)
    agent_file = isinstance(made, (str, Path)) and Path(made).suffix in (".yaml", ".yml", ".json")
    if not (isinstance(made, (AgentSpec, dict)) or agent_file or callable(made)) and not (
        _is_aworld_agent(made)
    ):
        raise AgentError(
            f"the agent factory '{reference}' returned a {type(made).__name__}: a factory "
            "returns an AWorld Agent, an agent mapping, an agent file's path or a Python agent "
            "run(row, llm)"
        )
    return load_agent(made, base_dir)


def _resolve_run(spec: AgentSpec, base_dir: Path | None) -> AgentSpec:
    """An agent mapping's ``run: file.py:run`` imported (relative to ``base_dir``)."""
    if not isinstance(spec.run, str):
        return spec
    from aworld_train.job.references import import_object

    function = import_object(spec.run, AgentError, "agent", base_dir)
    if not callable(function) or not takes_row(function):
        raise AgentError(
            f"agent '{spec.name}': run '{spec.run}' must be a function that takes "
            "the row and the llm: def run(row, llm)"
        )
    spec.run = _Reference(function, spec.run)
    return spec


class _Reference:
    """A Python agent that remembers the reference it was loaded from (for ``job.yaml``)."""

    def __init__(self, function: Any, reference: str) -> None:
        self.function = function
        self.reference = reference
        self.__name__ = getattr(function, "__name__", "agent")

    def __call__(self, row: dict[str, Any], llm: Any) -> Any:
        return self.function(row, llm)


def from_mapping(data: dict[str, Any], where: str) -> AgentSpec:
    """Build a spec from a mapping, rejecting unknown keys with a suggestion."""
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in _FIELDS:
            raise AgentError(f"{where}: unknown agent key '{key}'{did_you_mean(key, _FIELDS)}")
        values[key] = value
    if "mcp_servers" in values and isinstance(values["mcp_servers"], str):
        values["mcp_servers"] = [values["mcp_servers"]]
    spec = AgentSpec(**values)
    _validate(spec, where)
    return spec


def from_aworld(agent: Any) -> AgentSpec:
    """Map an AWorld ``Agent`` (aworld 0.3) onto a spec: system prompt, LLM settings, MCP
    servers, tool names and its step limit (``max_loop_steps``) as ``max_turns``. Its model is
    the policy unless the config names another."""
    llm = dict(getattr(getattr(agent, "conf", None), "llm_config", None) or {})
    places = [llm, dict(llm.get("ext_config") or {}), dict(llm.get("params") or {})]
    settings = {
        ours: next(
            (place[key] for place in places for key in theirs if place.get(key) is not None), None
        )
        for ours, theirs in _AWORLD_LLM_KEYS.items()
    }
    name = getattr(agent, "name", "agent")
    spec = AgentSpec(
        name=str(name() if callable(name) else name),  # a method in aworld 0.3
        model=settings["llm_model_name"],
        system_prompt=getattr(agent, "system_prompt", None),
        tools=list(getattr(agent, "tool_names", None) or []),
        mcp_config=dict(getattr(agent, "mcp_config", None) or {}),
        mcp_servers=list(getattr(agent, "mcp_servers", None) or []),
        max_turns=getattr(agent, "max_loop_steps", None) or 1,
        source=agent,
        **settings,
    )
    _validate(spec, f"AWorld agent '{spec.name}'")
    return spec


def _validate(spec: AgentSpec, where: str) -> None:
    # key -> (whether the value is valid, what a valid value is)
    checks = {
        "name": (isinstance(spec.name, str) and bool(spec.name), "a non-empty string"),
        "model": (spec.model is None or isinstance(spec.model, str), "a folder or a hub id"),
        "system_prompt": (
            spec.system_prompt is None or isinstance(spec.system_prompt, str),
            "a string",
        ),
        "tools": (isinstance(spec.tools, list), "a list"),
        "mcp_config": (isinstance(spec.mcp_config, dict), "a mapping"),
        "mcp_servers": (isinstance(spec.mcp_servers, list), "a list of server names"),
        "max_turns": (_whole_number(spec.max_turns), "an integer >= 1"),
        # Sampling settings become every engine's generation settings: check their range once.
        "llm_temperature": (
            spec.llm_temperature is None or _number_within(spec.llm_temperature, 0, 100),
            "a number from 0 to 100",
        ),
        "llm_top_p": (
            spec.llm_top_p is None or _number_within(spec.llm_top_p, 0, 1),
            "a number from 0 to 1",
        ),
        "llm_max_tokens": (
            spec.llm_max_tokens is None or _whole_number(spec.llm_max_tokens),
            "an integer >= 1",
        ),
    }
    for key, (ok, expected) in checks.items():
        if not ok:
            raise AgentError(
                f"{where}: agent key '{key}' must be {expected}, got {getattr(spec, key)!r}"
            )


def _whole_number(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _number_within(value: Any, low: float, high: float) -> bool:
    # NaN compares false both ways, so it is refused too.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high


def _is_aworld_agent(obj: Any) -> bool:
    # Checked by module name so that aworld is imported only when the object comes from it
    # (or from a subclass of one of its classes, as agents often are).
    if not any(cls.__module__.startswith("aworld.") for cls in type(obj).__mro__):
        return False
    from aworld.core.agent.base import BaseAgent

    return isinstance(obj, BaseAgent)


def _call_factory(factory: Any, reference: str) -> Any:
    try:
        return factory()
    except Exception as exc:  # the user's code: report it as their error, in one line
        raise AgentError(f"agent factory '{reference}' raised {type(exc).__name__}: {exc}") from exc


def _callable_name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', repr(obj))}"


def takes_row(function: Any) -> bool:
    """Whether ``function`` is a Python agent (it takes the row and the llm) rather than a
    factory (called with nothing, it returns an agent)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    required = [
        p
        for p in parameters
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return len(required) >= 1
