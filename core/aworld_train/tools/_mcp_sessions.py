"""Calling MCP tools: each process holds one open session per server, on a background event
loop that synchronous and asynchronous callers in any thread share; a session whose server
died is dropped, so that the next call opens a new one."""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from collections.abc import Callable
from typing import Any

from aworld_train.errors import AgentError
from aworld_train.tools._mcp_client import (
    ServerOutput,
    import_mcp,
    open_transport,
    result_text,
    server_error,
)
from aworld_train.tools._mcp_config import QUALIFIER, MCPServer
from aworld_train.tools._tool import Tool, awaited


class MCPTool(Tool):
    """A tool of an MCP server, called through this process's open session to the server.

    :ivar server: the server that exposes it.
    :ivar remote_name: its name on the server (also :attr:`name`, what the model calls it by,
        as AWorld 0.3 offers MCP tools).
    """

    def __init__(
        self, server: MCPServer, remote_name: str, description: str, parameters: dict[str, Any]
    ) -> None:
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
        return _SESSIONS.run(lambda: _SESSIONS.call(self.server, self.remote_name, arguments))

    async def acall(self, **arguments: Any) -> str:
        return await _SESSIONS.arun(
            lambda: _SESSIONS.call(self.server, self.remote_name, arguments)
        )


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
        mcp = import_mcp()
        import anyio

        with ServerOutput() as output:
            self.noise = output.noise
            try:
                async with open_transport(self.server, mcp, output.errlog) as streams:
                    async with mcp.ClientSession(
                        streams[0], streams[1], message_handler=output.on_message
                    ) as session:
                        with anyio.fail_after(self.server.timeout):
                            await session.initialize()
                        self.ready.set_result(session)
                        await self.closing.wait()
            except Exception as exc:
                if not self.ready.done():
                    self.ready.set_exception(
                        server_error(self.server, "", exc, output.stderr(), output.noise)
                    )
            finally:
                # Read once the server has stopped, so that its exit status is there too.
                self.log = output.stderr()
                if not self.ready.done():
                    self.ready.set_exception(
                        AgentError(f"MCP server '{self.server.name}' session was closed")
                    )

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
                threading.Thread(
                    target=loop.run_forever, name="aworld-train-mcp", daemon=True
                ).start()
                self._loop, self._pid, self._open = loop, os.getpid(), {}
            return self._loop

    def run(self, make: Callable[[], Any]) -> Any:
        loop = self._ensure_loop()
        return asyncio.run_coroutine_threadsafe(awaited(make), loop).result()

    async def arun(self, make: Callable[[], Any]) -> Any:
        loop = self._ensure_loop()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(awaited(make), loop))

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
            raise server_error(server, what, exc, noise=held.noise) from None
        except Exception as exc:
            # The session is broken (its server died, say): the next call opens a new one. The
            # call itself is not repeated, since it may have had effects.
            if self._open.get(server.key()) is held:
                del self._open[server.key()]
            await held.close()
            raise server_error(server, what, exc, held.log, held.noise) from None
        return result_text(result)

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


def close_sessions(servers: list[MCPServer] | None = None) -> None:
    """Close the MCP sessions this process holds open to ``servers``, or to every server
    (stopping stdio servers). Done at exit; call it sooner to stop the servers sooner. A later
    call opens new sessions."""
    _SESSIONS.close(servers)
