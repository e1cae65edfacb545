"""The view's web server (aiohttp): the page, its scripts and the answers of
:mod:`aworld_train.view._api`, read-only, to requests that carry the token when one is set."""

from __future__ import annotations

import asyncio
import hmac
import json
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

from aworld_train.view import _api as api
from aworld_train.view._page import OWN_FILES, PLOTLY, served_page, static_text
from aworld_train.view._runs import RunFolder

# Scripts do not change while the server runs: a reopened page takes them from its cache.
_CACHED = "public, max-age=3600"


def make_app(folder: RunFolder, token: str | None) -> Any:
    """The aiohttp application serving ``folder``."""
    from aiohttp import web

    # One reader thread: a run's files are read by one request at a time, and a large run does
    # not hold up the event loop.
    reader = ThreadPoolExecutor(max_workers=1)
    statics = {name: static_text(name) for name in (*OWN_FILES, PLOTLY)}
    query = f"?token={quote(token)}" if token else ""
    page = served_page(query)

    @web.middleware
    async def require_token(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if token is not None and not _carries(request, token):
            return web.Response(status=401, text="this view needs its token (?token=...)")
        return await handler(request)

    async def index(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    async def static(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in statics:
            raise web.HTTPNotFound()
        kind = "text/css" if name.endswith(".css") else "application/javascript"
        return web.Response(
            text=statics[name], content_type=kind, headers={"Cache-Control": _CACHED}
        )

    async def answer(request: web.Request) -> web.Response:
        question = api.ANSWERS.get(request.match_info["question"])
        result = None
        if question is not None:
            loop = asyncio.get_running_loop()
            result = await loop.run_in_executor(reader, question, folder, dict(request.query))
        if result is None:
            raise web.HTTPNotFound()
        return web.Response(text=json.dumps(result), content_type="application/json")

    app = web.Application(middlewares=[require_token])
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", static)
    app.router.add_get("/api/{question}", answer)
    return app


def _carries(request: Any, token: str) -> bool:
    """Whether ``request`` carries ``token`` (``?token=`` or ``Authorization: Bearer``);
    compared in constant time."""
    given = request.query.get("token", "")
    header = request.headers.get("Authorization", "")
    if header.startswith("Bearer "):
        given = header[len("Bearer ") :]
    return hmac.compare_digest(given.encode(), token.encode())
