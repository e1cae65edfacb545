"""Tools: an agent's Python functions and MCP servers, resolved into one :class:`ToolSet`.

An agent names its tools in two places (see :class:`~aworld_train.agent.AgentSpec`):

- ``tools``: Python tools as ``package.module:function`` or ``path/to/file.py:function``
  references or callables; and, optionally, names of MCP tools (``multiply`` or AWorld's
  qualified ``calculator__multiply``). Naming MCP tools restricts their server to the named
  ones; a server none of whose tools is named offers all of them.
- ``mcp_config`` in AWorld's format, ``{"mcpServers": {name: server}}``, where a server is
  ``{"command": ..., "args": [...], "env": {...}, "cwd": ...}`` (stdio, the default),
  ``{"type": "streamable-http", "url": ..., "headers": {...}}`` (``http`` and ``streamable_http``
  are accepted too) or ``{"type": "sse", "url": ...}``;
  ``"timeout"`` (seconds) bounds starting or reaching it and each call, ``"disabled": true``
  skips it, and ``${VAR}`` in strings is replaced from the environment. ``mcp_servers`` lists the
  servers the agent uses; when it is empty, every server of ``mcp_config`` is used.

A stdio server whose ``command`` is ``python`` or ``python3`` runs with the interpreter that runs
aworld-train (so it sees the same packages; ``PYTHONPATH`` is passed on), and every stdio server
starts in ``base_dir`` (the job file's folder), or in ``cwd`` relative to it. Like the ``mcp``
client, a server gets only a minimal environment (``PATH``, ``HOME``, ...) plus its ``env``.

:func:`resolve_tools` imports the Python tools, builds an OpenAI-style function schema for each
from its signature, type hints and docstring, connects to every MCP server through the ``mcp``
library, lists its tools, and fails with a one-line :class:`~aworld_train.errors.AgentError`
naming the server or tool that is wrong (listing opens a session and closes it). A stdio
server's stderr goes to a temporary file, never to the terminal; a server that fails says so
with its exit status and its last stderr line, and one that writes to stdout what is not an MCP
message is refused (stdout carries the protocol). Every message is redacted
(:func:`aworld_train.redaction.redact_text`): a URL's credentials never reach the terminal.

Every tool is then called the same way, ``tool.call(**arguments) -> str``, from synchronous
code in any thread (``await tool.acall(...)`` from async code). MCP calls share one session per
server per process, opened on first use on a background event loop and closed at exit or by
:meth:`ToolSet.close`; a call that fails because its server died raises, and the next call opens
a new session. A tool set pickles, so another process (a Ray worker) can call the same tools.
``mcp`` is imported only when MCP servers are configured (``pip install aworld-train[mcp]``).

Argument names are passed as they stand: an MCP tool may take ``from`` or ``max-results``.
:meth:`Tool.as_function`, for libraries that call tools as Python functions (TRL), refuses such
a tool in one line rather than renaming its arguments, since a model trained on other names than
the server's would call the server wrongly once deployed.
"""

from __future__ import annotations

import abc
import asyncio
import atexit
import concurrent.futures
import dataclasses
import enum
import inspect
import json
import keyword
import logging
import os
import re
import sys
import tempfile
import threading
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import AgentError, did_you_mean
from aworld_train.redaction import redact, redact_text, remember_secrets

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


class Tool(abc.ABC):
    """One tool the agent may call.

    :ivar name: the name the model calls it by.
    :ivar description: what it does, for the model.
    :ivar parameters: the JSON schema of its arguments (``{"type": "object", ...}``).
    """

    name: str
    description: str
    parameters: dict[str, Any]

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI-style function schema that chat templates and TRL take."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    @abc.abstractmethod
    def call(self, **arguments: Any) -> str:
        """Run the tool. An error of the tool itself comes back as ``"Error: ..."`` text, as an
        MCP server reports it, so that the model sees it; a server that cannot be reached raises
        :class:`AgentError`."""

    async def acall(self, **arguments: Any) -> str:
        """:meth:`call` for code that runs an event loop; it does not block the loop."""
        return await asyncio.to_thread(lambda: self.call(**arguments))

    def as_function(self) -> Callable[..., str]:
        """A plain function with this tool's signature and a Google-style docstring, for
        libraries that build the schema themselves from a callable (TRL's ``tools=``)."""
        properties = self.parameters.get("properties") or {}
        required = set(self.parameters.get("required") or [])
        # An MCP description may carry its own Args section; one section, built here, is kept.
        summary, documented = _parse_docstring(self.description)
        params, notes = [], []
        for name, prop in properties.items():
            self._check_python_name(name)
            annotation = _annotation_for(prop)
            default = inspect.Parameter.empty if name in required else prop.get("default")
            if default is None and annotation is not typing.Any:
                annotation = typing.Optional[annotation]  # noqa: UP045 (a runtime type object)
            params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                            default=default, annotation=annotation))
            notes.append(f"    {name}: {prop.get('description') or documented.get(name) or name}")
        # Required arguments first, as Python demands.
        params.sort(key=lambda p: p.default is not inspect.Parameter.empty)
        tool = self

        def function(*args: Any, **kwargs: Any) -> str:
            bound = function.__signature__.bind(*args, **kwargs)  # type: ignore[attr-defined]
            return tool.call(**bound.arguments)

        function.__name__ = function.__qualname__ = self.name
        signature = inspect.Signature(params, return_annotation=str)
        function.__signature__ = signature  # type: ignore[attr-defined]
        function.__annotations__ = {p.name: p.annotation for p in params} | {"return": str}
        function.__doc__ = (summary or self.name) + (
            "\n\nArgs:\n" + "\n".join(notes) if notes else "")
        return function

    def _check_python_name(self, argument: str) -> None:
        """Refuse an argument that a Python function cannot take by its name.

        :raises AgentError: naming the tool (and its server), the argument and the fix.
        """
        if argument.isidentifier() and not keyword.iskeyword(argument):
            return
        why = "a Python keyword" if keyword.iskeyword(argument) else "not a Python name"
        raise AgentError(
            f"{self.origin()} takes an argument '{argument}', which is {why}, and this engine "
            "passes tool arguments as Python keyword arguments: leave the tool out by listing "
            "the tools the agent uses in its `tools`, or call it from a Python tool whose "
            "arguments are plain names")

    def origin(self) -> str:
        """``tool 'x'``, or ``tool 'x' of MCP server 'y'``, for messages."""
        return f"tool '{self.name}'"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


class PythonTool(Tool):
    """A Python function as a tool; its schema comes from its signature and docstring.

    :ivar function: the callable.
    :ivar reference: the ``module:function`` or ``/abs/path/file.py:function`` it was imported
        from, or ``None``; a tool with a reference is pickled as that reference, so that another
        process (a Ray worker) imports it afresh.
    """

    def __init__(self, function: Callable[..., Any], reference: str | None = None,
                 name: str | None = None) -> None:
        self.function = function
        self.reference = reference
        self.name = name or getattr(function, "__name__", None) or type(function).__name__
        self.description, self.parameters = function_schema(function, self.name)

    def call(self, **arguments: Any) -> str:
        try:
            result = self.function(**arguments)
            if inspect.isawaitable(result):
                result = _run_sync(lambda: result)
        except Exception as exc:  # reported to the model, as an MCP server would
            return f"Error: {type(exc).__name__}: {exc}"
        return _as_text(result)

    async def acall(self, **arguments: Any) -> str:
        if not inspect.iscoroutinefunction(self.function):
            return await super().acall(**arguments)
        try:
            result = await self.function(**arguments)
        except Exception as exc:  # reported to the model, as an MCP server would
            return f"Error: {type(exc).__name__}: {exc}"
        return _as_text(result)

    def __reduce__(self) -> tuple[Any, ...]:
        if self.reference is None:
            return (PythonTool, (self.function, None, self.name))
        return (_python_tool_from_reference, (self.reference, self.name))


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

    def list_tools(self) -> list[Any]:
        """Connect, list the server's tools (``mcp.types.Tool``), disconnect.

        :raises AgentError: naming the server when it cannot be started or reached in time.
        """
        return _run_sync(self._list_tools)

    def call_tool(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call one tool and return its result as text, through this process's open session
        to the server (opened on first use; see :func:`close_sessions`).

        :raises AgentError: naming the server and tool when the server cannot be reached or the
            call does not finish in time.
        """
        return _SESSIONS.run(lambda: _SESSIONS.call(self, tool, arguments))

    async def acall_tool(self, tool: str, arguments: dict[str, Any]) -> str:
        """:meth:`call_tool` for code that already runs an event loop."""
        return await _SESSIONS.arun(lambda: _SESSIONS.call(self, tool, arguments))

    def key(self) -> str:
        """What identifies the server: equal configurations share one session."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    def error(self, what: str, exc: BaseException, stderr: str = "",
              noise: list[str] | None = None) -> AgentError:
        """One line naming the server (and what was being done) and why it failed: it did not
        answer in time, or how its process ended, or the client's error; then its last stderr
        line and what it wrote to stdout that was not an MCP message. Secrets are redacted.

        :param what: a prefix naming what was being done (``tool 'x' of ``), or ``""``.
        :param stderr: the server's stderr, as :class:`_ServerOutput` kept it.
        :param noise: what the server sent that was not an MCP message.
        """
        ended, last = _stderr_summary(stderr)
        reason = _failure(exc, self.timeout)
        if ended and not _timed_out(exc):
            reason = ended
        stdout = f"; {self._noise(noise[0])}" if noise else ""
        return AgentError(f"{what}{self._named()} {redact_text(reason + last + stdout)}")

    def noise_error(self, noise: str) -> AgentError:
        """The error for a server that sends what is not an MCP message, with the fix."""
        fix = ("a stdio server keeps stdout for MCP messages: make it log to stderr"
               if self.transport == "stdio" else "check the URL points at an MCP endpoint")
        return AgentError(f"{self._named()} {redact_text(self._noise(noise))}; {fix}")

    def _named(self) -> str:
        # describe() redacts the URL and arguments itself: redacting the whole line again
        # would read its closing parenthesis as part of a redacted query value.
        return f"MCP server '{self.name}' ({self.describe()})"

    def _noise(self, noise: str) -> str:
        where = "wrote to stdout" if self.transport == "stdio" else "sent"
        return f"{where} what is not an MCP message: {noise!r}"

    async def _list_tools(self) -> list[Any]:
        mcp = _import_mcp()
        import anyio

        with _ServerOutput() as output:
            try:
                with anyio.fail_after(self.timeout):
                    async with self._transport(mcp, output.errlog) as streams:
                        async with mcp.ClientSession(streams[0], streams[1],
                                                     message_handler=output.on_message) as session:
                            await session.initialize()
                            tools = await _list_all_tools(session)
            except Exception as exc:
                raise self.error("", exc, output.stderr(), output.noise) from None
        if output.noise:  # listed despite it, but a call's answer may be the next line lost
            raise self.noise_error(output.noise[0])
        return tools

    def _transport(self, mcp: Any, errlog: Any) -> Any:
        if self.transport == "stdio":
            from mcp.client.stdio import stdio_client

            params = mcp.StdioServerParameters(
                command=sys.executable,
                args=["-I", "-c", _REPORT_EXIT, _EXIT_MARK, self.command or "", *self.args],
                env=dict(self.env) or None, cwd=self.cwd)
            return stdio_client(params, errlog=errlog)
        if self.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(self.url, headers=self.headers or None, timeout=self.timeout)
        from mcp.client import streamable_http

        if hasattr(streamable_http, "streamable_http_client"):  # mcp >= 1.24
            import httpx

            client = httpx.AsyncClient(headers=self.headers or None,
                                       timeout=httpx.Timeout(self.timeout), follow_redirects=True)
            return _owning(client, streamable_http.streamable_http_client(self.url, http_client=client))
        return streamable_http.streamablehttp_client(
            self.url, headers=self.headers or None, timeout=self.timeout)


class MCPTool(Tool):
    """A tool of an MCP server, called through this process's open session to the server.

    :ivar server: the server that exposes it.
    :ivar remote_name: its name on the server (also :attr:`name`, what the model calls it by,
        as AWorld 0.3 offers MCP tools).
    """

    def __init__(self, server: MCPServer, remote_name: str, description: str,
                 parameters: dict[str, Any]) -> None:
        self.server = server
        self.remote_name = remote_name
        self.name = remote_name
        self.description = description
        self.parameters = parameters

    @property
    def qualified_name(self) -> str:
        """AWorld's ``server__tool`` form."""
        return f"{self.server.name}{QUALIFIER}{self.remote_name}"

    def origin(self) -> str:
        return f"tool '{self.name}' of MCP server '{self.server.name}'"

    def call(self, **arguments: Any) -> str:
        return self.server.call_tool(self.remote_name, arguments)

    async def acall(self, **arguments: Any) -> str:
        return await self.server.acall_tool(self.remote_name, arguments)


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
            _SESSIONS.close(self.servers)

    def get(self, name: str) -> Tool:
        """The tool called ``name`` (or AWorld's ``server__tool``).

        :raises AgentError: for an unknown name, with a suggestion.
        """
        for tool in self.tools:
            if name == tool.name or name == getattr(tool, "qualified_name", None):
                return tool
        raise AgentError(f"unknown tool '{name}'{did_you_mean(name, self.names)}; "
                         f"the agent has: {', '.join(self.names) or 'no tools'}")

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

    def _find(self, name: str, arguments: dict[str, Any] | str | None
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
            python_tools.append(_python_tool_from_reference(entry, base_dir=base_dir))
        elif isinstance(entry, str) and entry:
            mcp_names.append(entry)
        else:
            raise AgentError(f"agent tool {entry!r} is neither a callable, a module:function "
                             "reference nor the name of an MCP tool")

    servers = mcp_servers(spec, base_dir)
    if mcp_names and not servers:
        raise AgentError(f"agent tool '{mcp_names[0]}' is not a module:function reference, and "
                         "the agent has no MCP servers that could expose it")
    offered = {server.name: _server_tools(server) for server in servers}
    chosen = _choose(offered, mcp_names)
    tools = python_tools + [tool for server in servers for tool in chosen[server.name]]
    seen: dict[str, Tool] = {}
    for tool in tools:
        if tool.name in seen:
            raise AgentError(f"two agent tools are called '{tool.name}': {_origin(seen[tool.name])} "
                             f"and {_origin(tool)}; rename one or drop it from the agent")
        seen[tool.name] = tool
    return ToolSet(tools=tools, servers=servers)


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
            raise AgentError(f"agent uses MCP server '{name}', which mcp_config does not define"
                             f"{did_you_mean(name, defined)} (defined: {known})")
        entry = defined[name]
        if not isinstance(entry, dict):
            raise AgentError(f"agent mcp_config: MCP server '{name}' must be a mapping")
        if entry.get("disabled", False):
            continue
        servers.append(_parse_server(name, _expand(entry), base_dir))
    return servers


def function_schema(function: Callable[..., Any], name: str = "") -> tuple[str, dict[str, Any]]:
    """The description and JSON schema of a function's arguments, from its signature, type hints
    and docstring (Google ``Args:`` or Sphinx ``:param x:`` entries describe the arguments).

    :raises AgentError: for a function whose arguments cannot be passed by name.
    """
    name = name or getattr(function, "__name__", "tool")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError) as exc:
        raise AgentError(f"tool '{name}': cannot read its signature: {exc}") from None
    try:
        hints = typing.get_type_hints(function)
    except Exception as exc:  # annotations are the user's code
        raise AgentError(f"tool '{name}': cannot resolve its type hints: {exc}") from None
    summary, arg_docs = _parse_docstring(inspect.getdoc(function) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        if param.kind is param.POSITIONAL_ONLY:
            raise AgentError(f"tool '{name}': argument '{param.name}' is positional-only; a model "
                             "passes arguments by name")
        prop = _json_type(hints.get(param.name, typing.Any))
        if param.name in arg_docs:
            prop["description"] = arg_docs[param.name]
        if param.default is param.empty:
            required.append(param.name)
        elif _is_json_value(param.default):
            prop["default"] = param.default
        properties[param.name] = prop
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return summary, parameters


# --- Python tools -------------------------------------------------------------------------


def _python_tool_from_reference(reference: str, name: str | None = None,
                                base_dir: Path | None = None) -> PythonTool:
    from aworld_train.references import import_object, resolve_path, split_reference

    target, attribute = split_reference(reference)
    function = import_object(reference, AgentError, "agent tool", base_dir)
    if not callable(function):
        raise AgentError(f"agent tool '{reference}' is not callable")
    if target.endswith(".py"):  # importable again from any process on this machine
        reference = f"{resolve_path(target, base_dir)}:{attribute}"
    return PythonTool(function, reference, name)


_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?)"
                      r":$")
_ARG_SECTIONS = ("Args", "Arguments", "Parameters")
_GOOGLE_ARG = re.compile(r"^\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^:param\s+(?:[^:]*\s)?(\w+):\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary (the text before the first section or ``:field:``) and each argument's text,
    from Google ``Args:`` entries (continued on more-indented lines) or Sphinx ``:param x:``."""
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent = 0
    for line in inspect.cleandoc(doc).splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        heading = _SECTION.match(stripped)
        sphinx = _SPHINX_ARG.match(stripped)
        google = _GOOGLE_ARG.match(stripped)
        if heading:
            section, current = heading.group(1), None
        elif sphinx:
            section, current = "sphinx", sphinx.group(1)
            args[current] = sphinx.group(2).strip()
        elif stripped.startswith(":"):  # :returns:, :raises: and the like
            section, current = "sphinx", None
        elif section is None:
            summary.append(stripped)
        elif section in _ARG_SECTIONS and google and (current is None or indent <= arg_indent):
            current, arg_indent = google.group(1), indent
            args[current] = google.group(2).strip()
        elif current and stripped and section in (*_ARG_SECTIONS, "sphinx"):
            args[current] = f"{args[current]} {stripped}"
    return " ".join(" ".join(summary).split()), args


_SIMPLE_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean",
                 type(None): "null"}


def _json_type(hint: Any) -> dict[str, Any]:
    """The JSON schema of one type hint; ``{}`` (anything) for ``Any`` or a missing hint."""
    if hint in _SIMPLE_TYPES:
        return {"type": _SIMPLE_TYPES[hint]}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        return _json_type(args[0])
    if origin is typing.Literal:
        schema: dict[str, Any] = {"enum": list(args)}
        kinds = {_SIMPLE_TYPES.get(type(value)) for value in args}
        if len(kinds) == 1 and None not in kinds:
            schema["type"] = kinds.pop()
        return schema
    if origin is typing.Union or origin is types.UnionType:
        options = [_json_type(arg) for arg in args]
        if all(set(option) == {"type"} and isinstance(option["type"], str) for option in options):
            return {"type": [option["type"] for option in options]}
        return {"anyOf": options}
    if hint in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset):
        schema = {"type": "array"}
        if origin is tuple and args and args[-1] is not Ellipsis:
            schema["prefixItems"] = [_json_type(arg) for arg in args]
        elif args:
            schema["items"] = _json_type(args[0])
        return schema
    if hint is dict or origin is dict:
        schema = {"type": "object"}
        if len(args) == 2:
            schema["additionalProperties"] = _json_type(args[1])
        return schema
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _json_type(typing.Literal[tuple(member.value for member in hint)])  # type: ignore[misc]
    return {}


def _is_json_value(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_ANNOTATIONS = {"string": str, "integer": int, "number": float, "boolean": bool,
                "array": list, "object": dict}


def _annotation_for(prop: dict[str, Any]) -> Any:
    options = [option for option in prop.get("anyOf") or [] if option.get("type") != "null"]
    if options:
        kinds = tuple(_annotation_for(option) for option in options)
        return typing.Union[kinds] if len(kinds) > 1 else kinds[0]  # type: ignore[misc]
    values = prop.get("enum") or []
    if values and all(isinstance(value, (str, int, float, bool)) for value in values):
        return typing.Literal[tuple(values)]  # type: ignore[misc]
    kind = prop.get("type")
    if isinstance(kind, list):
        options = [_ANNOTATIONS[k] for k in kind if k in _ANNOTATIONS]
        return typing.Union[tuple(options)] if options else typing.Any  # type: ignore[misc]
    items = prop.get("items")
    if kind == "array" and isinstance(items, dict) and items.get("type") in _ANNOTATIONS:
        return list[_ANNOTATIONS[items["type"]]]  # type: ignore[index]
    return _ANNOTATIONS.get(kind, typing.Any)


def _as_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    if result is None:
        return ""
    if dataclasses.is_dataclass(result) and not isinstance(result, type):
        result = dataclasses.asdict(result)
    try:
        return json.dumps(result, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(result)


# --- MCP servers --------------------------------------------------------------------------


def _import_mcp() -> Any:
    _quiet_parse_tracebacks()
    try:
        import mcp
    except ImportError as exc:
        if exc.name == "mcp":
            raise AgentError("the agent uses MCP servers, which need the 'mcp' package: "
                             "pip install 'aworld-train[mcp]'") from None
        raise AgentError(f"the agent uses MCP servers, but the 'mcp' package fails to import: "
                         f"{exc}") from None
    return mcp


def _parse_server(name: str, entry: dict[str, Any], base_dir: Path | None) -> MCPServer:
    where = f"agent mcp_config: MCP server '{name}'"
    # Its URL, headers, env and --key arguments may hold secrets that its errors must not show.
    remember_secrets(entry)
    transport = entry.get("type") or ("stdio" if "command" in entry else None)
    transport = _TRANSPORT_ALIASES.get(transport, transport)
    if transport is None:
        raise AgentError(f"{where} needs a 'command' (stdio) or a 'type' and 'url'")
    if transport not in _TRANSPORTS:
        raise AgentError(f"{where}: unsupported type '{transport}'{did_you_mean(transport, _TRANSPORTS)}"
                         f"; use one of {', '.join(_TRANSPORTS)}")
    timeout = entry.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise AgentError(f"{where}: 'timeout' must be a positive number of seconds, not {timeout!r}")
    for key in ("env", "headers"):
        value = entry.get(key) or {}
        if not isinstance(value, dict):
            raise AgentError(f"{where}: '{key}' must be a mapping")
    if transport != "stdio":
        url = entry.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise AgentError(f"{where}: type '{transport}' needs an http(s) 'url', not {url!r}")
        headers = {str(k): str(v) for k, v in (entry.get("headers") or {}).items()}
        return MCPServer(name, transport, url=url, headers=headers, timeout=float(timeout))
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
        name, "stdio", command=command, args=tuple(str(arg) for arg in args),
        env=env, cwd=str(working_dir.resolve()), timeout=float(timeout),
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


async def _list_all_tools(session: Any) -> list[Any]:
    tools, cursor = [], None
    for _ in range(1000):  # a server that pages forever is cut off
        page = await (session.list_tools(cursor=cursor) if cursor else session.list_tools())
        tools.extend(page.tools)
        cursor = getattr(page, "nextCursor", None)
        if not cursor:
            break
    return tools


def _server_tools(server: MCPServer) -> list[MCPTool]:
    return [
        MCPTool(server, tool.name, tool.description or "",
                dict(tool.inputSchema or {"type": "object", "properties": {}}))
        for tool in server.list_tools()
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
                    raise AgentError(f"agent tool '{name}': MCP server '{server}' has no tool "
                                     f"'{remote}'{did_you_mean(remote, names_there)} "
                                     f"(it has: {', '.join(names_there) or 'none'})")
                raise AgentError(f"agent tool '{name}' is neither a module:function reference nor "
                                 f"a tool of the agent's MCP servers{did_you_mean(name, plain)} "
                                 f"(they have: {', '.join(plain) or 'none'})")
            if len(matches) > 1:
                raise AgentError(f"agent tool '{name}' is exposed by several MCP servers; name it "
                                 f"as {' or '.join(tool.qualified_name for tool in matches)}")
            match = matches[0]
        named.setdefault(match.server.name, [])
        if match not in named[match.server.name]:
            named[match.server.name].append(match)
    return {server: named.get(server, tools) for server, tools in offered.items()}


def _origin(tool: Tool) -> str:
    if isinstance(tool, MCPTool):
        return f"a tool of MCP server '{tool.server.name}'"
    return f"the Python tool {getattr(tool, 'reference', None) or tool.name}"


def _result_text(result: Any) -> str:
    """An MCP ``CallToolResult`` as the text the model sees."""
    parts = []
    for item in getattr(result, "content", None) or []:
        if getattr(item, "type", None) == "text":
            parts.append(item.text)
        elif getattr(item, "type", None) == "resource" and hasattr(item.resource, "text"):
            parts.append(item.resource.text)
        else:
            parts.append(f"[{getattr(item, 'type', 'content')}: "
                         f"{getattr(item, 'mimeType', None) or 'binary'}]")
    structured = getattr(result, "structuredContent", None)
    if not parts and structured is not None:
        parts.append(_as_text(structured))
    text = "\n".join(parts)
    return f"Error: {text}" if getattr(result, "isError", False) else text


def _owning(client: Any, transport: Any) -> Any:
    """Enter ``transport`` inside ``client``'s context, closing both on exit."""
    import contextlib

    @contextlib.asynccontextmanager
    async def both() -> Any:
        async with client:
            async with transport as streams:
                yield streams

    return both()


def _failure(exc: BaseException, timeout: float) -> str:
    """Why a connection failed, in words, from the innermost real error of a task group."""
    leaf = _leaf(exc)
    if _timed_out(exc):
        return f"did not answer within {timeout:g} s"
    if isinstance(leaf, FileNotFoundError):
        return f"could not be started: {leaf.strerror}: {leaf.filename}"
    message = " ".join(str(leaf).split()) or type(leaf).__name__
    if type(leaf).__name__ in ("ConnectError", "ConnectTimeout"):
        return f"is unreachable: {message}"
    if type(leaf).__name__ == "McpError":
        return f"failed: {message}"
    return f"failed: {type(leaf).__name__}: {message}"


def _leaf(exc: BaseException) -> BaseException:
    inner = getattr(exc, "exceptions", None)
    if inner:
        real = [e for e in inner if not isinstance(e, asyncio.CancelledError)]
        return _leaf((real or inner)[0])
    return exc


def _timed_out(exc: BaseException) -> bool:
    return isinstance(_leaf(exc), (TimeoutError, asyncio.CancelledError))


def _stderr_summary(stderr: str) -> tuple[str, str]:
    """How the server's process ended (the exit reporter's line: ``exited with status 3``, or
    ``""`` while it runs) and ``"; its last stderr line: ..."`` (or ``""``)."""
    ended, lines = "", []
    for line in stderr.splitlines():
        if line.startswith(_EXIT_MARK):
            ended = line[len(_EXIT_MARK):]
        elif line.strip():
            lines.append(line.strip())
    return ended, f"; its last stderr line: {lines[-1][:300]}" if lines else ""


# A stdio server runs under this small Python program, which adds one marked line to the
# server's stderr saying how it ended: the mcp client keeps the process to itself, and a closed
# connection alone does not say why. The server inherits the pipes, so the protocol passes
# straight through; stopping the process group stops both.
_EXIT_MARK = "[aworld-train] the MCP server "
_REPORT_EXIT = """\
import signal, subprocess, sys
mark, command = sys.argv[1], sys.argv[2:]
try:
    status = subprocess.call(command)
except OSError as exc:
    print(f"{mark}could not be started: {exc.strerror}: {command[0]}", file=sys.stderr)
    sys.exit(127)
if status >= 0:
    print(f"{mark}exited with status {status}", file=sys.stderr)
    sys.exit(status)
try:
    name = signal.Signals(-status).name
except ValueError:
    name = str(-status)
print(f"{mark}was killed by signal {name}", file=sys.stderr)
sys.exit(128 - status)
"""


class _ServerOutput:
    """What a server says outside the protocol: its stderr, kept in a temporary file so that a
    failure can quote it and a healthy server does not print on the user's terminal, and what
    it sent that was not an MCP message (the ``mcp`` client hands that to the session's message
    handler)."""

    def __init__(self) -> None:
        self.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self.noise: list[str] = []

    def __enter__(self) -> _ServerOutput:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.errlog.close()

    def stderr(self) -> str:
        """Everything the server wrote to stderr so far (read once it has stopped)."""
        self.errlog.seek(0)
        return self.errlog.read()

    async def on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self.noise.append(_unparsed_text(message))


def _unparsed_text(exc: Exception) -> str:
    """The text a server sent that the client could not read as a message, cut short."""
    try:
        text = exc.errors()[0]["input"]  # type: ignore[attr-defined]  # pydantic keeps the line
    except Exception:  # an error of another kind
        text = None
    if not isinstance(text, str):
        text = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
    return text[:200]


class _QuietParseErrors(logging.Filter):
    """Drops the ``mcp`` client's traceback for a line that is not an MCP message: the
    session's message handler receives the same error and reports it in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to parse JSONRPC message")


def _quiet_parse_tracebacks() -> None:
    logger = logging.getLogger("mcp.client.stdio")
    if not any(isinstance(f, _QuietParseErrors) for f in logger.filters):
        logger.addFilter(_QuietParseErrors())


class _OpenSession:
    """One server's session, held open by a task of the sessions' event loop until closed."""

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.closing = asyncio.Event()
        self.log = ""
        self.noise: list[str] = []
        self.task = asyncio.get_running_loop().create_task(self._hold())

    async def _hold(self) -> None:
        mcp = _import_mcp()
        import anyio

        with _ServerOutput() as output:
            self.noise = output.noise
            try:
                async with self.server._transport(mcp, output.errlog) as streams:
                    async with mcp.ClientSession(streams[0], streams[1],
                                                 message_handler=output.on_message) as session:
                        with anyio.fail_after(self.server.timeout):
                            await session.initialize()
                        self.ready.set_result(session)
                        await self.closing.wait()
            except Exception as exc:
                if not self.ready.done():
                    self.ready.set_exception(
                        self.server.error("", exc, output.stderr(), output.noise))
            finally:
                # Read once the server has stopped, so that its exit status is there too.
                self.log = output.stderr()
                if not self.ready.done():
                    self.ready.set_exception(AgentError(
                        f"MCP server '{self.server.name}' session was closed"))

    async def close(self) -> None:
        self.closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), 10)
        except Exception:  # a server that does not stop in time is left to its own exit
            self.task.cancel()


class _Sessions:
    """The open MCP sessions of this process, one per server, kept on a background event loop
    so that synchronous and asynchronous callers in any thread share them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open: dict[str, _OpenSession] = {}

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():  # a forked child starts afresh
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="aworld-train-mcp",
                                 daemon=True).start()
                self._loop, self._pid, self._open = loop, os.getpid(), {}
            return self._loop

    def run(self, make: Callable[[], Any]) -> Any:
        loop = self._ensure_loop()
        return asyncio.run_coroutine_threadsafe(_awaited(make), loop).result()

    async def arun(self, make: Callable[[], Any]) -> Any:
        loop = self._ensure_loop()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_awaited(make), loop))

    async def call(self, server: MCPServer, tool: str, arguments: dict[str, Any]) -> str:
        what = f"tool '{tool}' of "
        held = self._open.get(server.key())
        if held is None or held.task.done():
            held = self._open[server.key()] = _OpenSession(server)
        try:
            session = await held.ready
        except AgentError as exc:
            self._open.pop(server.key(), None)
            raise AgentError(f"{what}{exc}") from None
        try:
            result = await asyncio.wait_for(session.call_tool(tool, arguments), server.timeout)
        except asyncio.TimeoutError as exc:
            raise server.error(what, exc, noise=held.noise) from None
        except Exception as exc:
            # The session is broken (its server died, say): the next call opens a new one. The
            # call itself is not repeated, since it may have had effects.
            if self._open.get(server.key()) is held:
                del self._open[server.key()]
            await held.close()
            raise server.error(what, exc, held.log, held.noise) from None
        return _result_text(result)

    def close(self, servers: list[MCPServer] | None = None) -> None:
        with self._lock:
            loop = self._loop if self._pid == os.getpid() else None
        if loop is None:
            return
        keys = None if servers is None else {server.key() for server in servers}

        async def close_them() -> None:
            chosen = [key for key in self._open if keys is None or key in keys]
            await asyncio.gather(*(self._open.pop(key).close() for key in chosen))

        asyncio.run_coroutine_threadsafe(close_them(), loop).result()
        if servers is None:
            with self._lock:
                loop.call_soon_threadsafe(loop.stop)
                self._loop = None


_SESSIONS = _Sessions()
atexit.register(_SESSIONS.close)


def close_sessions() -> None:
    """Close every MCP session this process holds open (stopping stdio servers). Done at exit;
    call it sooner to stop the servers sooner. A later call opens new sessions."""
    _SESSIONS.close()


def _run_sync(make: Callable[[], Any]) -> Any:
    """Run the coroutine ``make()`` to completion from synchronous code, in a worker thread
    when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_awaited(make))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(_awaited(make))).result()


async def _awaited(make: Callable[[], Any]) -> Any:
    return await make()
