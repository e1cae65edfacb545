"""The agent runtime's loopback endpoint: each episode's requests reach its answerer, and end
with it; a request or route it cannot serve is an OpenAI-style error that also ends the episode
with the same line."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aworld_train.runtime._endpoint import shared_endpoint
from aworld_train.runtime._replies import Turn
from aworld_train.runtime._requests import TurnRequest

QUESTION = {"messages": [{"role": "user", "content": "What is 6 * 7?"}]}


class Answerer:
    """Answers with ``reply(request)``; keeps the failure the endpoint reports."""

    def __init__(self, reply: Callable[[TurnRequest], Awaitable[Turn]]) -> None:
        self.reply = reply
        self.model = "tiny"
        self.failure: str | None = None

    async def chat(self, request: TurnRequest) -> Turn:
        return await self.reply(request)

    def fail(self, reason: str) -> None:
        self.failure = self.failure or reason


async def post(url: str, body: Any, route: str = "chat/completions") -> tuple[int, Any]:
    import aiohttp

    async with aiohttp.ClientSession() as http:
        async with http.post(f"{url}/{route}", json=body) as response:
            return response.status, await response.json()


def test_requests_reach_their_episodes_handler_until_the_episode_ends() -> None:
    async def main() -> None:
        endpoint = await shared_endpoint()
        assert await shared_endpoint() is endpoint, "one endpoint per event loop"

        async def first(request: TurnRequest) -> Turn:
            return Turn(f"episode 1 read {request.messages[-1]['content']}")

        async def second(request: TurnRequest) -> Turn:
            raise RuntimeError("the policy is gone")

        answerer_1, answerer_2 = Answerer(first), Answerer(second)
        with endpoint.serve(answerer_1) as url_1, endpoint.serve(answerer_2) as url_2:
            assert url_1 != url_2 and url_1.startswith(
                f"http://127.0.0.1:{endpoint.port}/episodes/"
            )
            status, body = await post(url_1, QUESTION)
            assert status == 200
            assert body["choices"][0]["message"]["content"] == "episode 1 read What is 6 * 7?"
            status, body = await post(url_2, QUESTION)
            assert status == 500 and body["error"]["message"] == "RuntimeError: the policy is gone"
            status, body = await post(url_1, {"prompt": "completions API"}, "completions")
            assert status == 404
            assert body["error"]["message"] == (
                "the training endpoint does not serve POST /v1/completions: it serves POST "
                "chat/completions, POST responses and GET models under the episode's base URL "
                "(which ends in /v1)"
            )
            assert answerer_1.failure == body["error"]["message"]
        status, body = await post(url_1, QUESTION)
        assert status == 404 and body["error"]["message"] == "this episode has ended"

    asyncio.run(main())


def test_a_request_still_being_answered_is_cancelled_when_its_episode_ends() -> None:
    import aiohttp

    async def main() -> None:
        endpoint = await shared_endpoint()
        started, cancelled = asyncio.Event(), asyncio.Event()

        async def slow(request: TurnRequest) -> Turn:
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return Turn("")

        with endpoint.serve(Answerer(slow)) as url:
            request = asyncio.ensure_future(post(url, QUESTION))
            await asyncio.wait_for(started.wait(), 10)
        await asyncio.wait_for(cancelled.wait(), 10)
        with pytest.raises(aiohttp.ClientError):
            await asyncio.wait_for(request, 10)

    asyncio.run(main())


@pytest.mark.parametrize(
    ("route", "body", "message"),
    [
        ("chat/completions", {"prompt": "x"}, "a chat-completions request needs a 'messages' list"),
        ("chat/completions", {**QUESTION, "n": 2}, "n=2 is not supported by the training endpoint"),
        (
            "chat/completions",
            {**QUESTION, "response_format": {"type": "json_schema"}},
            "response_format 'json_schema' is not supported",
        ),
        (
            "chat/completions",
            {**QUESTION, "tools": [{"type": "web_search"}]},
            "tool type 'web_search' is not supported",
        ),
        ("responses", {"input": "x", "background": True}, "'background' is not supported"),
        (
            "responses",
            {"input": "x", "previous_response_id": "resp_1"},
            "previous_response_id 'resp_1' is not a response of this episode",
        ),
        (
            "responses",
            {"input": [{"role": "user", "content": [{"type": "input_image"}]}]},
            "content part 'input_image' is not supported",
        ),
    ],
)
def test_a_field_the_endpoint_cannot_honour_is_a_400_naming_it_and_the_episodes_failure(
    route: str, body: dict[str, Any], message: str
) -> None:
    async def main() -> None:
        endpoint = await shared_endpoint()

        async def never(request: TurnRequest) -> Turn:
            raise AssertionError("a refused request never reaches the policy")

        answerer = Answerer(never)
        with endpoint.serve(answerer) as url:
            status, answer = await post(url, body, route)
        assert status == 400 and message in answer["error"]["message"], answer
        assert answerer.failure == f"the training endpoint refused POST {route}: " + str(
            answer["error"]["message"]
        )

    asyncio.run(main())


MALFORMED = [
    ("chat/completions", {"messages": ["hi"]}, "'messages' must be a list of message objects"),
    ("chat/completions", {**QUESTION, "top_logprobs": "3"}, "'top_logprobs' must be a whole"),
    (
        "chat/completions",
        {**QUESTION, "stream": True, "stream_options": "usage"},
        "'stream_options' must be an object, not str",
    ),
    (
        "chat/completions",
        {**QUESTION, "tools": [{"type": "function"}]},
        "each function tool needs a 'function' object with a 'name'",
    ),
    (
        "chat/completions",
        {**QUESTION, "tool_choice": {"type": "function", "function": "add"}},
        "'tool_choice.function' must be an object",
    ),
    ("chat/completions", {**QUESTION, "response_format": "json"}, "'response_format' must be"),
    ("responses", {"input": "x", "previous_response_id": [1]}, "'previous_response_id' must be"),
    ("responses", {"input": "x", "text": "plain"}, "'text' must be an object, not str"),
    ("responses", {"input": "x", "include": "all"}, "'include' must be a list of strings"),
    ("responses", {"input": "x", "tools": [{"type": "function"}]}, "needs a 'name'"),
    ("responses", {"input": [{"type": "function_call"}]}, "function_call input item needs"),
    (
        "responses",
        {"input": [{"type": "function_call_output", "call_id": "c", "output": 7}]},
        "must be a string or a list of content parts",
    ),
    ("chat/completions", {**QUESTION, "stream": "false"}, "'stream' must be true or false"),
    ("chat/completions", {**QUESTION, "logprobs": "yes"}, "'logprobs' must be true or false"),
    ("chat/completions", {**QUESTION, "max_tokens": "5"}, "'max_tokens' must be a whole number"),
    ("responses", {"input": "x", "stream": 1}, "'stream' must be true or false, not int"),
    ("responses", {"input": "x", "max_output_tokens": 0}, "'max_output_tokens' must be a whole"),
]


@pytest.mark.parametrize(("route", "body", "message"), MALFORMED)
def test_a_field_of_the_wrong_type_is_a_400_naming_it_not_a_server_error(
    route: str, body: dict[str, Any], message: str
) -> None:
    test_a_field_the_endpoint_cannot_honour_is_a_400_naming_it_and_the_episodes_failure(
        route, body, message
    )


def test_a_body_not_json_or_too_large_is_refused_and_ends_the_episode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import aiohttp
    from aworld_train.runtime import _endpoint as module

    monkeypatch.setattr(module, "MAX_REQUEST_BYTES", 1 << 20)

    async def main() -> None:
        endpoint = await shared_endpoint()

        async def never(request: TurnRequest) -> Turn:
            raise AssertionError("a refused request never reaches the policy")

        for body, status, message in [
            (b"{not json", 400, "the request body is not JSON"),
            (b"[" * 100_000 + b"]" * 100_000, 400, "the request body is not JSON"),
            (b'{"messages": "' + b"x" * (2 << 20) + b'"}', 413, "the request body is over 1 MiB"),
        ]:
            answerer = Answerer(never)
            with endpoint.serve(answerer) as url:
                async with aiohttp.ClientSession() as http:
                    headers = {"Content-Type": "application/json"}
                    async with http.post(
                        f"{url}/chat/completions", data=body, headers=headers
                    ) as r:
                        assert (r.status, (await r.json())["error"]["message"]) == (status, message)
            assert (
                answerer.failure
                == f"the training endpoint refused POST chat/completions: {message}"
            )

    asyncio.run(main())


def test_sampling_fields_the_training_governs_are_warned_about_once_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from aworld_train.runtime import _requests as requests

    requests._warned.clear()
    asked = []

    async def record(request: TurnRequest) -> Turn:
        asked.append(request)
        return Turn("ok")

    async def main() -> None:
        endpoint = await shared_endpoint()
        with endpoint.serve(Answerer(record)) as url:
            for _ in range(3):
                body = {**QUESTION, "temperature": 0.2, "metadata": {"a": 1}, "user": "u"}
                assert (await post(url, {**body, "max_tokens": 5, "stop": "\\n"}))[0] == 200

    with caplog.at_level("WARNING", logger="aworld_train.runtime._requests"):
        asyncio.run(main())
    assert [record.getMessage() for record in caplog.records] == [
        "agents send temperature=0.2; the training's own generation settings apply (the job's "
        "temperature, top_p, ...), so the request's is ignored"
    ]
    assert [(r.max_tokens, r.stop) for r in asked] == [(5, ["\\n"])] * 3
