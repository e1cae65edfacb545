"""The tools of one agent as one :class:`ToolSet`: :func:`resolve_tools` imports its Python
tools, lists its MCP servers' tools, and checks every tool it names exists, once."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import AgentError, did_you_mean
from aworld_train.tools._mcp_client import list_tools, mcp_field
from aworld_train.tools._mcp_config import QUALIFIER, MCPServer, mcp_servers
from aworld_train.tools._mcp_sessions import MCPTool, close_sessions
from aworld_train.tools._python_tools import PythonTool, python_tool_from_reference
from aworld_train.tools._tool import Tool

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec


@dataclass
class ToolSet:
    """The tools of one agent, in the order the agent named them.

    :ivar tools: the tools; Python tools first, then each MCP server's.
    :ivar servers: the MCP servers the agent uses.
    """

    tools: list[Tool] = field(default_factory=list)
    servers: list[MCPServer] = field(default_factory=list)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools)

    def __len__(self) -> int:
        return len(self.tools)

    @property
    def names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool's OpenAI-style schema: ``tokenizer.apply_chat_template(..., tools=...)``."""
        return [tool.schema for tool in self.tools]

    def as_functions(self) -> list[Callable[..., str]]:
        """Every tool as a plain Python function (:meth:`Tool.as_function`), for an engine that
        calls tools as functions: its check calls this so that a tool it cannot call fails there.

        :raises AgentError: for a tool with an argument a Python function cannot take by name.
        """
        return [tool.as_function() for tool in self.tools]

    def close(self) -> None:
        """Close the open sessions to this tool set's MCP servers (stopping stdio servers)."""
        if self.servers:
            close_sessions(self.servers)

    def get(self, name: str) -> Tool:
        """The tool called ``name`` (or AWorld's ``server__tool``).

        :raises AgentError: for an unknown name, with a suggestion.
        """
        for tool in self.tools:
            if name == tool.name or name == getattr(tool, "qualified_name", None):
                return tool
        raise AgentError(
            f"unknown tool '{name}'{did_you_mean(name, self.names)}; "
            f"the agent has: {', '.join(self.names) or 'no tools'}"
        )

    def call(self, name: str, arguments: dict[str, Any] | str | None = None) -> str:
        """Call a tool by name with arguments as a mapping or the JSON text a model wrote.

        Arguments that are not a JSON object and unknown names come back as ``"Error: ..."``
        text for the model, like any other tool error.
        """
        found = self._find(name, arguments)
        if isinstance(found, str):
            return found
        tool, mapping = found
        return tool.call(**mapping)

    async def acall(self, name: str, arguments: dict[str, Any] | str | None = None) -> str:
        """:meth:`call` for code that runs an event loop."""
        found = self._find(name, arguments)
        if isinstance(found, str):
            return found
        tool, mapping = found
        return await tool.acall(**mapping)

    def _find(
        self, name: str, arguments: dict[str, Any] | str | None
    ) -> tuple[Tool, dict[str, Any]] | str:
        """The tool and its arguments, or the error text the model is shown instead."""
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return f"Error: arguments of '{name}' are not valid JSON: {exc.msg}"
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return f"Error: arguments of '{name}' must be a JSON object"
        try:
            return self.get(name), arguments
        except AgentError as exc:
            return f"Error: {exc}"


def resolve_tools(spec: AgentSpec, base_dir: Path | None = None) -> ToolSet:
    """Resolve the agent's tools: import the Python ones, connect to each MCP server it uses
    and list its tools, and check every tool the agent names exists.

    :param spec: the agent.
    :param base_dir: the folder relative references and a stdio server's working directory are
        resolved from (the job file's folder); the current directory when ``None``.
    :raises AgentError: naming the reference, server or tool that is wrong, in one line.
    """
    python_tools: list[Tool] = []
    mcp_names: list[str] = []
    for entry in spec.tools:
        if callable(entry):
            python_tools.append(PythonTool(entry))
        elif isinstance(entry, str) and ":" in entry:
            python_tools.append(python_tool_from_reference(entry, base_dir=base_dir))
        elif isinstance(entry, str) and entry:
            mcp_names.append(entry)
        else:
            raise AgentError(
                f"agent tool {entry!r} is neither a callable, a module:function "
                "reference nor the name of an MCP tool"
            )

    servers = mcp_servers(spec, base_dir)
    if mcp_names and not servers:
        raise AgentError(
            f"agent tool '{mcp_names[0]}' is not a module:function reference, and "
            "the agent has no MCP servers that could expose it"
        )
    offered = {server.name: _server_tools(server) for server in servers}
    chosen = _choose(offered, mcp_names)
    tools = python_tools + [tool for server in servers for tool in chosen[server.name]]
    seen: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in seen:
            raise AgentError(
                f"two agent tools are called '{tool.name}': {_origin(seen[tool.name])} "
                f"and {_origin(tool)}; rename one or drop it from the agent"
            )
        seen[tool.name] = tool
    return ToolSet(tools=tools, servers=servers)


def _server_tools(server: MCPServer) -> list[MCPTool]:
    return [
        MCPTool(
            server,
            tool.name,
            tool.description or "",
            dict(mcp_field(tool, "input_schema") or {"type": "object", "properties": {}}),
        )
        for tool in list_tools(server)
    ]


def _choose(offered: dict[str, list[MCPTool]], names: list[str]) -> dict[str, list[MCPTool]]:
    """Each server's tools, restricted to the named ones where the agent names any."""
    every = {f"{tool.qualified_name}": tool for tools in offered.values() for tool in tools}
    plain = [tool.name for tools in offered.values() for tool in tools]
    named: dict[str, list[MCPTool]] = {}
    for name in names:
        if name in every:
            match = every[name]
        else:
            matches = [tool for tools in offered.values() for tool in tools if tool.name == name]
            if not matches:
                server, _, remote = name.partition(QUALIFIER)
                if remote and server in offered:
                    names_there = [tool.name for tool in offered[server]]
                    raise AgentError(
                        f"agent tool '{name}': MCP server '{server}' has no tool "
                        f"'{remote}'{did_you_mean(remote, names_there)} "
                        f"(it has: {', '.join(names_there) or 'none'})"
                    )
                raise AgentError(
                    f"agent tool '{name}' is neither a module:function reference nor "
                    f"a tool of the agent's MCP servers{did_you_mean(name, plain)} "
                    f"(they have: {', '.join(plain) or 'none'})"
                )
            if len(matches) > 1:
                raise AgentError(
                    f"agent tool '{name}' is exposed by several MCP servers; name it "
                    f"as {' or '.join(tool.qualified_name for tool in matches)}"
                )
            match = matches[0]
        named.setdefault(match.server.name, [])
        if match not in named[match.server.name]:
            named[match.server.name].append(match)
    return {server: named.get(server, tools) for server, tools in offered.items()}


def _origin(tool: Tool) -> str:
    if isinstance(tool, MCPTool):
        return f"a tool of MCP server '{tool.server.name}'"
    return f"the Python tool {getattr(tool, 'reference', None) or tool.name}"
