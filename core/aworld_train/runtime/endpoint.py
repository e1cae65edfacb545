"""An OpenAI-compatible chat-completions endpoint on loopback, one per event loop.

Every agent calls its model through an OpenAI client (or plain HTTP). During an episode the
agent is pointed at ``http://127.0.0.1:PORT/episodes/<episode>/v1``, and the endpoint hands every
``POST .../chat/completions`` request to that episode's handler
(:class:`~aworld_train.runtime.episode.Episode`), which answers it with the policy being
trained. A streaming request (``"stream": true``) is refused with one line: the policy answers a
whole turn at once, and AWorld agents call their model that way unless ``llm_stream_call`` is
set.

The server runs in the caller's event loop (aiohttp), so a handler may await the engine's
generate function directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any
from uuid import uuid4

logger = logging.getLogger(__name__)

#: Answers one chat-completions request body with a chat-completion response body.
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

#: The most a request body may be: long conversations with tool results are large.
MAX_REQUEST_BYTES = 64 * 1024 * 1024


class ChatEndpoint:
    """Routes each episode's chat requests to its handler; start it with :func:`shared_endpoint`."""

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        self._in_flight: dict[str, set[asyncio.Task[Any]]] = {}
        self._runner: Any = None
        self.port: int | None = None

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_post("/episodes/{episode}/v1/chat/completions", self._complete)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        # Binding port 0 ourselves gives a free port without a race between two workers.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    @contextlib.contextmanager
    def serve(self, handler: Handler) -> Iterator[str]:
        """Route one episode's requests to ``handler`` while the block runs; yields the base
        URL for the episode's OpenAI client. When the block ends, requests still being answered
        are cancelled (their connections close) and later ones get HTTP 404."""
        episode = uuid4().hex
        self._handlers[episode] = handler
        self._in_flight[episode] = set()
        try:
            yield f"http://127.0.0.1:{self.port}/episodes/{episode}/v1"
        finally:
            self._handlers.pop(episode, None)
            for task in self._in_flight.pop(episode, set()):
                task.cancel()

    async def _complete(self, request: Any) -> Any:
        episode = request.match_info["episode"]
        handler = self._handlers.get(episode)
        if handler is None:
            return _error(404, "this episode has ended")
        task = asyncio.current_task()
        assert task is not None  # aiohttp answers each request in a task of its own
        self._in_flight[episode].add(task)
        try:
            return await self._answer(handler, request)
        finally:
            self._in_flight.get(episode, set()).discard(task)

    async def _answer(self, handler: Handler, request: Any) -> Any:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "a chat-completions request needs a 'messages' list")
        if body.get("stream"):
            return _error(
                400,
                "streaming is not supported by the training endpoint: call the model "
                "without stream=True (AWorld: unset llm_stream_call)",
            )
        try:
            return _json(await handler(body))
        except Exception as error:  # noqa: BLE001 - the episode records the failure; the agent sees a 500
            logger.warning("chat request failed: %s: %s", type(error).__name__, error)
            return _error(500, f"{type(error).__name__}: {error}")


def _json(body: dict[str, Any], status: int = 200) -> Any:
    from aiohttp import web

    return web.json_response(body, status=status)


def _error(status: int, message: str) -> Any:
    return _json(
        {"error": {"message": message, "type": "invalid_request_error", "code": status}}, status
    )


# One endpoint per event loop: an engine runs a worker's episodes in one loop, tests run several.
_ENDPOINTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task[ChatEndpoint]] = (
    weakref.WeakKeyDictionary()
)


async def shared_endpoint() -> ChatEndpoint:
    """This event loop's endpoint, started by the first episode that asks for it."""
    loop = asyncio.get_running_loop()
    if loop not in _ENDPOINTS:
        # A task, not the endpoint: episodes that ask while it starts wait for the same one.
        _ENDPOINTS[loop] = loop.create_task(_started(ChatEndpoint()))
    return await asyncio.shield(_ENDPOINTS[loop])


async def _started(endpoint: ChatEndpoint) -> ChatEndpoint:
    await endpoint.start()
    return endpoint
