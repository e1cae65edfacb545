"""Connecting to one MCP server through the ``mcp`` library: its transport, listing its
tools, reading its answers, and saying in one line why it failed (how its process ended, its
last stderr line, what it wrote that is not an MCP message). ``mcp`` is imported only here,
inside functions, when a server is used.

Both majors of ``mcp`` work (1.10 and later 1.x, and 2.x). One code path serves both, save
where mcp 2 changed what the client sees: its types name their fields in snake_case
(``input_schema``, ``is_error``) where mcp 1 kept the wire's camelCase (:func:`mcp_field` reads
either), its streamable HTTP transport takes an ``httpx2`` client where mcp 1.24+ took an
``httpx`` one (:func:`_http_client`), and its protocol error is ``MCPError``, mcp 1's
``McpError``."""

from __future__ import annotations

import asyncio
import logging
import sys
import tempfile
from typing import Any

from aworld_train.errors import AgentError
from aworld_train.run.redaction import redact_text
from aworld_train.tools._mcp_config import MCPServer
from aworld_train.tools._tool import as_text, run_sync


def list_tools(server: MCPServer) -> list[Any]:
    """Connect, list the server's tools (``mcp.types.Tool``), disconnect.

    :raises AgentError: naming the server when it cannot be started or reached in time.
    """
    return run_sync(lambda: _list_tools(server))


def server_error(
    server: MCPServer,
    what: str,
    exc: BaseException,
    stderr: str = "",
    noise: list[str] | None = None,
) -> AgentError:
    """One line naming the server (and what was being done) and why it failed: it did not
    answer in time, or how its process ended, or the client's error; then its last stderr
    line and what it wrote to stdout that was not an MCP message. Secrets are redacted.

    :param what: a prefix naming what was being done (``tool 'x' of ``), or ``""``.
    :param stderr: the server's stderr, as :class:`ServerOutput` kept it.
    :param noise: what the server sent that was not an MCP message.
    """
    ended, last = _stderr_summary(stderr)
    reason = _failure(exc, server.timeout)
    if ended and not _timed_out(exc):
        reason = ended
    stdout = f"; {_noise(server, noise[0])}" if noise else ""
    return AgentError(f"{what}{server.named()} {redact_text(reason + last + stdout)}")


def noise_error(server: MCPServer, noise: str) -> AgentError:
    """The error for a server that sends what is not an MCP message, with the fix."""
    fix = (
        "a stdio server keeps stdout for MCP messages: make it log to stderr"
        if server.transport == "stdio"
        else "check the URL points at an MCP endpoint"
    )
    return AgentError(f"{server.named()} {redact_text(_noise(server, noise))}; {fix}")


def _noise(server: MCPServer, noise: str) -> str:
    where = "wrote to stdout" if server.transport == "stdio" else "sent"
    return f"{where} what is not an MCP message: {noise!r}"


async def _list_tools(server: MCPServer) -> list[Any]:
    mcp = import_mcp()
    import anyio

    with ServerOutput() as output:
        try:
            with anyio.fail_after(server.timeout):
                async with open_transport(server, mcp, output.errlog) as streams:
                    async with mcp.ClientSession(
                        streams[0], streams[1], message_handler=output.on_message
                    ) as session:
                        await session.initialize()
                        tools = await _list_all_tools(session)
        except Exception as exc:
            raise server_error(server, "", exc, output.stderr(), output.noise) from None
    if output.noise:  # listed despite it, but a call's answer may be the next line lost
        raise noise_error(server, output.noise[0])
    return tools


def open_transport(server: MCPServer, mcp: Any, errlog: Any) -> Any:
    """The ``mcp`` client transport to the server (an async context manager of its streams);
    a stdio server's stderr goes to ``errlog``."""
    if server.transport == "stdio":
        from mcp.client.stdio import stdio_client

        params = mcp.StdioServerParameters(
            command=sys.executable,
            args=["-I", "-c", _REPORT_EXIT, _EXIT_MARK, server.command or "", *server.args],
            env=dict(server.env) or None,
            cwd=server.cwd,
        )
        return stdio_client(params, errlog=errlog)
    url = server.url or ""  # an HTTP server's entry has a url: the config's parser saw to it
    if server.transport == "sse":
        from mcp.client.sse import sse_client

        return sse_client(url, headers=server.headers or None, timeout=server.timeout)
    from mcp.client import streamable_http

    if hasattr(streamable_http, "streamable_http_client"):  # mcp >= 1.24, and mcp 2
        client = _http_client(streamable_http, server)
        return _owning(client, streamable_http.streamable_http_client(url, http_client=client))
    # mcp 1 before 1.24; mcp 2 has no such name, which the type checker sees there.
    return streamable_http.streamablehttp_client(  # type: ignore[attr-defined,unused-ignore]
        url, headers=server.headers or None, timeout=server.timeout
    )


def _http_client(streamable_http: Any, server: MCPServer) -> Any:
    """An HTTP client carrying the server's headers and timeout, of the library the ``mcp``
    transport module itself imported: ``httpx2`` under mcp 2, ``httpx`` under mcp 1 (both may
    be installed, and each transport accepts only its own library's client)."""
    httpx = getattr(streamable_http, "httpx2", None) or streamable_http.httpx
    return httpx.AsyncClient(
        headers=server.headers or None, timeout=httpx.Timeout(server.timeout), follow_redirects=True
    )


_MISSING = object()


def mcp_field(model: Any, name: str, default: Any = None) -> Any:
    """A field of an ``mcp`` type by its snake_case name (``input_schema``): mcp 2 names the
    attribute so, mcp 1 by the wire's camelCase (``inputSchema``).

    :param default: what a model that has the field under neither name gives.
    """
    value = getattr(model, name, _MISSING)
    if value is _MISSING:
        head, *rest = name.split("_")
        value = getattr(model, head + "".join(part.title() for part in rest), default)
    return value


def import_mcp() -> Any:
    """The ``mcp`` package.

    :raises AgentError: saying how to install it when it is missing or fails to import.
    """
    _quiet_parse_tracebacks()
    try:
        import mcp
    except ImportError as exc:
        if exc.name == "mcp":
            raise AgentError(
                "the agent uses MCP servers, which need the 'mcp' package: "
                "pip install 'aworld-train[mcp]'"
            ) from None
        raise AgentError(
            f"the agent uses MCP servers, but the 'mcp' package fails to import: {exc}"
        ) from None
    return mcp


async def _list_all_tools(session: Any) -> list[Any]:
    tools, cursor = [], None
    for _ in range(1000):  # a server that pages forever is cut off
        page = await (session.list_tools(cursor=cursor) if cursor else session.list_tools())
        tools.extend(page.tools)
        cursor = mcp_field(page, "next_cursor")
        if not cursor:
            break
    return tools


def result_text(result: Any) -> str:
    """An MCP ``CallToolResult`` as the text the model sees."""
    parts = []
    for item in getattr(result, "content", None) or []:
        if getattr(item, "type", None) == "text":
            parts.append(item.text)
        elif getattr(item, "type", None) == "resource" and hasattr(item.resource, "text"):
            parts.append(item.resource.text)
        else:
            parts.append(
                f"[{getattr(item, 'type', 'content')}: {mcp_field(item, 'mime_type') or 'binary'}]"
            )
    structured = mcp_field(result, "structured_content")
    if not parts and structured is not None:
        parts.append(as_text(structured))
    text = "\n".join(parts)
    return f"Error: {text}" if mcp_field(result, "is_error", False) else text


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
    if type(leaf).__name__ in ("McpError", "MCPError"):  # mcp 1's name, mcp 2's
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
            ended = line[len(_EXIT_MARK) :]
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


class ServerOutput:
    """What a server says outside the protocol: its stderr, kept in a temporary file so that a
    failure can quote it and a healthy server does not print on the user's terminal, and what
    it sent that was not an MCP message (the ``mcp`` client hands that to the session's message
    handler)."""

    def __init__(self) -> None:
        self.errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        self.noise: list[str] = []

    def __enter__(self) -> ServerOutput:
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
