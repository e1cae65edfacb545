"""The agent's MCP servers, read from its ``mcp_config`` in AWorld's format: which servers it
uses, how each is reached (:class:`MCPServer`), checked before any connection is made."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import AgentError, did_you_mean
from aworld_train.run.redaction import redact, redact_text, remember_secrets

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec

#: Seconds to start or reach an MCP server and list its tools, or to make one call, unless the
#: server's own ``timeout`` says otherwise.
DEFAULT_TIMEOUT = 30.0

#: The separator of AWorld's qualified MCP tool names, ``server__tool``.
QUALIFIER = "__"

_TRANSPORTS = ("stdio", "streamable-http", "sse")
# Other clients' spellings of streamable HTTP.
_TRANSPORT_ALIASES = {"streamable_http": "streamable-http", "http": "streamable-http"}
_PYTHON_COMMANDS = ("python", "python3")


@dataclass(frozen=True)
class MCPServer:
    """One MCP server of the agent's ``mcp_config``, ready to connect to.

    :ivar name: its key under ``mcpServers``.
    :ivar transport: ``stdio``, ``streamable-http`` or ``sse``.
    :ivar timeout: seconds to start or reach it and list its tools, or to make one call.
    """

    name: str
    transport: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT

    def describe(self) -> str:
        """``stdio: python server.py`` or ``streamable-http: http://...``, for messages, with
        secrets (``--api-key`` values, URL credentials) redacted."""
        if self.transport == "stdio":
            return f"stdio: {' '.join(redact([Path(self.command or '').name, *self.args]))}"
        return f"{self.transport}: {redact_text(self.url or '')}"

    def named(self) -> str:
        """``MCP server 'x' (stdio: ...)``, for messages. :meth:`describe` redacts the URL and
        arguments itself: redacting the whole line again would read its closing parenthesis as
        part of a redacted query value."""
        return f"MCP server '{self.name}' ({self.describe()})"

    def key(self) -> str:
        """What identifies the server: equal configurations share one session."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)


def mcp_servers(spec: AgentSpec, base_dir: Path | None = None) -> list[MCPServer]:
    """The MCP servers the agent uses, parsed from its ``mcp_config`` (no connection made).

    :raises AgentError: for a server ``mcp_servers`` names that ``mcp_config`` lacks, or a
        server entry that is malformed.
    """
    config = spec.mcp_config or {}
    defined = config.get("mcpServers", {})
    if not isinstance(defined, dict):
        raise AgentError("agent mcp_config: 'mcpServers' must map server names to servers")
    names = list(spec.mcp_servers) or list(defined)
    servers = []
    for name in names:
        if name not in defined:
            known = ", ".join(defined) or "none"
            raise AgentError(
                f"agent uses MCP server '{name}', which mcp_config does not define"
                f"{did_you_mean(name, defined)} (defined: {known})"
            )
        entry = defined[name]
        if not isinstance(entry, dict):
            raise AgentError(f"agent mcp_config: MCP server '{name}' must be a mapping")
        if entry.get("disabled", False):
            continue
        servers.append(_parse_server(name, _expand(entry), base_dir))
    return servers


def _parse_server(name: str, entry: dict[str, Any], base_dir: Path | None) -> MCPServer:
    where = f"agent mcp_config: MCP server '{name}'"
    # Its URL, headers, env and --key arguments may hold secrets that its errors must not show.
    remember_secrets(entry)
    given = entry.get("type") or ("stdio" if "command" in entry else None)
    transport = _TRANSPORT_ALIASES.get(given, given) if isinstance(given, str) else given
    if transport is None:
        raise AgentError(f"{where} needs a 'command' (stdio) or a 'type' and 'url'")
    if transport not in _TRANSPORTS:
        raise AgentError(
            f"{where}: unsupported type '{transport}'{did_you_mean(transport, _TRANSPORTS)}"
            f"; use one of {', '.join(_TRANSPORTS)}"
        )
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise AgentError(
            f"{where}: 'timeout' must be a positive number of seconds, not {timeout!r}"
        )
    for key in ("env", "headers"):
        value = entry.get(key) or {}
        if not isinstance(value, dict):
            raise AgentError(f"{where}: '{key}' must be a mapping")
    if transport != "stdio":
        return _remote_server(name, transport, entry, float(timeout), where)
    return _stdio_server(name, entry, base_dir, float(timeout), where)


def _remote_server(
    name: str, transport: str, entry: dict[str, Any], timeout: float, where: str
) -> MCPServer:
    """A server reached over HTTP at its ``url``, with its ``headers``."""
    url = entry.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise AgentError(f"{where}: type '{transport}' needs an http(s) 'url', not {url!r}")
    headers = {str(k): str(v) for k, v in (entry.get("headers") or {}).items()}
    return MCPServer(name, transport, url=url, headers=headers, timeout=timeout)


def _stdio_server(
    name: str, entry: dict[str, Any], base_dir: Path | None, timeout: float, where: str
) -> MCPServer:
    """A server started as ``command`` with ``args`` and ``env`` in ``cwd`` (relative to the
    job's folder); ``python`` is this interpreter."""
    command = entry.get("command")
    args = entry.get("args") or []
    if not isinstance(command, str) or not command:
        raise AgentError(f"{where}: a stdio server needs a 'command'")
    if not isinstance(args, list):
        raise AgentError(f"{where}: 'args' must be a list")
    env = {str(k): str(v) for k, v in (entry.get("env") or {}).items()}
    if command in _PYTHON_COMMANDS:
        # The server sees this interpreter's packages (the mcp library above all); the mcp client
        # passes only a minimal environment, so an import path set here is passed on too.
        command = sys.executable
        if "PYTHONPATH" in os.environ:
            env.setdefault("PYTHONPATH", os.environ["PYTHONPATH"])
    working_dir = base_dir or Path.cwd()
    if entry.get("cwd"):
        working_dir = working_dir / Path(str(entry["cwd"])).expanduser()
    return MCPServer(
        name,
        "stdio",
        command=command,
        args=tuple(str(arg) for arg in args),
        env=env,
        cwd=str(working_dir.resolve()),
        timeout=timeout,
    )


def _expand(value: Any) -> Any:
    """Replace ``${VAR}`` in every string from the environment, as AWorld does."""
    if isinstance(value, str):
        return os.path.expandvars(value)
    if isinstance(value, list):
        return [_expand(item) for item in value]
    if isinstance(value, dict):
        return {key: _expand(item) for key, item in value.items()}
    return value
