"""The agent runtime's loopback chat endpoint: each episode's requests reach its handler, and
end with it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aworld_train.runtime.endpoint import shared_endpoint

QUESTION = {"messages": [{"role": "user", "content": "What is 6 * 7?"}]}


async def post(url: str, body: Any) -> tuple[int, Any]:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/chat/completions", json=body) as response:
            return response.status, await response.json()


def test_requests_reach_their_episodes_handler_until_the_episode_ends() -> None:
    async def main() -> None:
        endpoint = await shared_endpoint()
        assert await shared_endpoint() is endpoint, "one endpoint per event loop"

        async def first(body: dict[str, Any]) -> dict[str, Any]:
            return {"episode": 1, "asked": body["messages"][-1]["content"]}

        async def second(body: dict[str, Any]) -> dict[str, Any]:
            raise RuntimeError("the policy is gone")

        with endpoint.serve(first) as url_1, endpoint.serve(second) as url_2:
            assert url_1 != url_2 and url_1.startswith(
                f"http://127.0.0.1:{endpoint.port}/episodes/"
            )
            assert await post(url_1, QUESTION) == (200, {"episode": 1, "asked": "What is 6 * 7?"})
            status, body = await post(url_2, QUESTION)
            assert status == 500 and body["error"]["message"] == "RuntimeError: the policy is gone"
            status, body = await post(url_1, {**QUESTION, "stream": True})
            assert status == 400 and "streaming is not supported" in body["error"]["message"]
            status, body = await post(url_1, {"prompt": "completions API"})
            assert status == 400 and "'messages' list" in body["error"]["message"]
        status, body = await post(url_1, QUESTION)
        assert status == 404 and body["error"]["message"] == "this episode has ended"

    asyncio.run(main())


def test_a_request_still_being_answered_is_cancelled_when_its_episode_ends() -> None:
    import aiohttp

    async def main() -> None:
        endpoint = await shared_endpoint()
        started, cancelled = asyncio.Event(), asyncio.Event()

        async def slow(body: dict[str, Any]) -> dict[str, Any]:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return {}

        with endpoint.serve(slow) as url:
            request = asyncio.ensure_future(post(url, QUESTION))
            await asyncio.wait_for(started.wait(), 10)
        await asyncio.wait_for(cancelled.wait(), 10)
        with pytest.raises(aiohttp.ClientError):
            await asyncio.wait_for(request, 10)

    asyncio.run(main())
