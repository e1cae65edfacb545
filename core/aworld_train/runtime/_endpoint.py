"""An OpenAI-compatible endpoint on loopback, one per event loop.

Every agent calls its model through an OpenAI client (or plain HTTP). During an episode the
agent is pointed at ``http://127.0.0.1:PORT/episodes/<episode>/v1``, and the endpoint hands each
request to that episode's :class:`Answerer` (:class:`~aworld_train.runtime._episode.Episode`),
which answers it with one turn of the policy being trained. It serves what clients send:

- ``POST chat/completions``, plain or streamed (``"stream": true``: server-sent chunks);
- ``POST responses``, the Responses API (the OpenAI Agents SDK's default), plain or streamed,
  with ``previous_response_id`` within the episode;
- ``GET models``: the policy's name.

A client shared by every episode of a process (the Agents SDK's default client, set once with
``set_default_openai_client``) sends each episode's requests to whichever URL it was given last;
such a request still reaches its own episode through the model name it carries, which the
runtime makes unique per episode (``policy@<episode>``).

Both APIs are read into one :class:`~aworld_train.runtime._requests.TurnRequest`; the turn is
generated whole and then written in the API's form (:mod:`aworld_train.runtime._replies`). A
request the endpoint refuses (a field it cannot honour, a route it does not serve) is an
OpenAI-style error naming the field or route and the fix, and it ends the episode with that same
line as its failure, which is what ``check`` prints, whatever the agent's framework makes of it.

The server runs in the caller's event loop (aiohttp), so an answerer may await the engine's
generate function directly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import weakref
from collections.abc import Iterator, Sequence
from typing import Any, Protocol
from uuid import uuid4

from aworld_train.runtime._replies import (
    Turn,
    chat_chunks,
    chat_completion,
    response,
    response_events,
)
from aworld_train.runtime._requests import Refused, TurnRequest, chat_request, responses_request

logger = logging.getLogger(__name__)

#: The most a request body may be: long conversations with tool results are large.
MAX_REQUEST_BYTES = 64 * 1024 * 1024

#: What the endpoint serves, as its errors name it.
ROUTES = "POST chat/completions, POST responses and GET models"


class Answerer(Protocol):
    """What answers one episode's requests."""

    model: str

    async def chat(self, request: TurnRequest) -> Turn: ...

    def fail(self, reason: str) -> None: ...


class _Served:
    """One episode's answerer, its requests in flight and its Responses API history."""

    def __init__(self, answerer: Answerer) -> None:
        self.answerer = answerer
        self.in_flight: set[asyncio.Task[Any]] = set()
        self.responses: dict[str, list[dict[str, Any]]] = {}


class ChatEndpoint:
    """Routes each episode's requests to its answerer; start it with :func:`shared_endpoint`."""

    def __init__(self) -> None:
        self._served: dict[str, _Served] = {}
        self._by_model: dict[str, str] = {}  # an episode's model name -> its id
        self._runner: Any = None
        self.port: int | None = None

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_post("/episodes/{episode}/v1/chat/completions", self._chat)
        app.router.add_post("/episodes/{episode}/v1/responses", self._responses)
        app.router.add_get("/episodes/{episode}/v1/models", self._models)
        app.router.add_route("*", "/episodes/{episode}/{route:.*}", self._unknown)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        # Binding port 0 ourselves gives a free port without a race between two workers.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    @contextlib.contextmanager
    def serve(self, answerer: Answerer) -> Iterator[str]:
        """Route one episode's requests to ``answerer`` while the block runs; yields the base
        URL for the episode's OpenAI client. When the block ends, requests still being answered
        are cancelled (their connections close) and later ones get HTTP 404."""
        episode = uuid4().hex
        self._served[episode] = _Served(answerer)
        self._by_model.setdefault(answerer.model, episode)
        try:
            yield f"http://127.0.0.1:{self.port}/episodes/{episode}/v1"
        finally:
            if self._by_model.get(answerer.model) == episode:
                del self._by_model[answerer.model]
            served = self._served.pop(episode, None)
            for task in served.in_flight if served is not None else ():
                task.cancel()

    async def _chat(self, request: Any) -> Any:
        return await self._turn(request, "chat/completions")

    async def _responses(self, request: Any) -> Any:
        return await self._turn(request, "responses")

    async def _models(self, request: Any) -> Any:
        served = self._served.get(request.match_info["episode"])
        if served is None:
            return _error(404, "this episode has ended")
        model = {"id": served.answerer.model, "object": "model", "created": 0, "owned_by": "policy"}
        return _json({"object": "list", "data": [model]})

    async def _unknown(self, request: Any) -> Any:
        served = self._served.get(request.match_info["episode"])
        if served is None:
            return _error(404, "this episode has ended")
        route = request.match_info["route"]
        message = (
            f"the training endpoint does not serve {request.method} /{route}: it serves {ROUTES} "
            "under the episode's base URL (which ends in /v1)"
        )
        served.answerer.fail(message)
        return _error(404, message)

    async def _turn(self, request: Any, route: str) -> Any:
        from aiohttp import web

        unread = None  # why the body could not be read: (HTTP status, message)
        try:
            body = await request.json()
        except (ValueError, RecursionError):  # RecursionError: JSON nested beyond Python's stack
            body, unread = None, (400, "the request body is not JSON")
        except web.HTTPRequestEntityTooLarge:
            body, unread = None, (413, f"the request body is over {MAX_REQUEST_BYTES >> 20} MiB")
        model = body.get("model") if isinstance(body, dict) else None
        episode = self._by_model.get(model) if isinstance(model, str) else None
        served = self._served.get(episode or request.match_info["episode"])
        if served is None:
            return _error(404, "this episode has ended")
        if unread is not None:
            served.answerer.fail(f"the training endpoint refused POST {route}: {unread[1]}")
            return _error(*unread)
        task = asyncio.current_task()
        assert task is not None  # aiohttp answers each request in a task of its own
        served.in_flight.add(task)
        try:
            return await self._answer(served, request, body, route)
        finally:
            served.in_flight.discard(task)

    async def _answer(self, served: _Served, request: Any, body: Any, route: str) -> Any:
        try:
            if route == "responses":
                asked = responses_request(body, served.responses)
            else:
                asked = chat_request(body)
        except Refused as refused:
            served.answerer.fail(f"the training endpoint refused POST {route}: {refused}")
            return _error(400, str(refused))
        try:
            turn = await served.answerer.chat(asked)
        except Exception as error:  # noqa: BLE001 - the episode records the failure; the agent sees a 500
            logger.warning("chat request failed: %s: %s", type(error).__name__, error)
            return _error(500, f"{type(error).__name__}: {error}")
        model = served.answerer.model
        stream = bool(body.get("stream"))
        if route == "chat/completions":
            if not stream:
                return _json(chat_completion(turn, model))
            chunks = chat_chunks(turn, model, usage=asked.include_usage)
            events = [(None, chunk) for chunk in chunks]
            return _stream(events, done=True)
        answer_id = f"resp_{uuid4().hex}"
        answered = response(turn, model, body, answer_id)
        served.responses[answer_id] = [*asked.messages, turn_message(turn)]
        if not stream:
            return _json(answered)
        return _stream([(e["type"], e) for e in response_events(answered)])


def turn_message(turn: Turn) -> dict[str, Any]:
    """The turn as the chat message a client sends back."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if turn.calls:
        message["tool_calls"] = turn.tool_calls()
    return message


def _stream(events: Sequence[tuple[str | None, Any]], done: bool = False) -> Any:
    """Server-sent events in one body: the turn is already whole, so the stream is written at
    once (with its length, as any response; clients read it as a stream all the same)."""
    from aiohttp import web

    lines = []
    for name, data in events:
        if name is not None:
            lines.append(f"event: {name}\n")
        lines.append(f"data: {json.dumps(data)}\n\n")
    if done:
        lines.append("data: [DONE]\n\n")
    return web.Response(body="".join(lines).encode(), headers={"Content-Type": "text/event-stream"})


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
