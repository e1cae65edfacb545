"""Agent: what the policy is and how it is prompted, normalised into one :class:`AgentSpec`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aworld_train.errors import AgentError


@dataclass
class AgentSpec:
    """One agent, whatever form the user gave it in.

    :ivar name: the agent's name.
    :ivar model: the policy to train: a local model folder or a hub id. The config's ``model``
        key, when set, takes precedence.
    :ivar system_prompt: prepended as a system message to every prompt.
    :ivar tools: Python tools, each a ``module:function`` reference or a callable.
    :ivar mcp_config: AWorld's MCP configuration (``{"mcpServers": {name: {...}}}``).
    :ivar mcp_servers: the names of the servers in ``mcp_config`` the agent uses.
    :ivar max_turns: the most model turns in one episode.
    :ivar llm_*: AWorld-style LLM settings; the sampling ones (temperature, top_p, max_tokens)
        become the engine's generation settings.
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
    source: Any = field(default=None, repr=False, compare=False)

    @property
    def uses_tools(self) -> bool:
        """Whether the agent calls tools (Python functions or MCP servers)."""
        return bool(self.tools or self.mcp_servers or self.mcp_config.get("mcpServers"))

    def to_dict(self) -> dict[str, Any]:
        """The spec as plain data (for ``job.yaml``); secrets are redacted by the run directory."""
        raise NotImplementedError


def load_agent(agent: Any, base_dir: Path | None = None) -> AgentSpec:
    """Normalise an agent given as an AWorld ``Agent``, a YAML/JSON path (relative to
    ``base_dir``), a dict, a ``package.module:factory`` reference, or an ``AgentSpec``.

    AWorld is imported only when an AWorld ``Agent`` is given.

    :raises AgentError: naming the file or key that is wrong.
    """
    raise NotImplementedError
