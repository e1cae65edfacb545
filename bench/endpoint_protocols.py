"""The agent endpoint's CPU per request for each protocol an agent may speak, against a plain
``chat/completions`` request (goal: streaming and the Responses API at most 1.2x).

The endpoint serves from its own event-loop thread, as in training; a client in the main thread
sends one-turn requests of the same conversation (a system prompt, a question, one tool) in
each protocol, one at a time. Each request is a fresh episode (the recording, the chat template
rendering from the prompt cache, the tool-call parsing) answered by a stand-in policy that
returns a fixed tool call, so what differs between the protocols is the endpoint's own work:
reading the request, writing the answer or its stream. The figure is the endpoint thread's CPU
time per request (``pthread_getcpuclockid``), the median of several rounds.

    .venvs/trl/bin/python bench/endpoint_protocols.py --requests 300 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SYSTEM = "Use the calculator."
TOOL = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two integers exactly.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}
QUESTION = "What is 6411 * 876?"

CHAT: dict[str, Any] = {
    "model": "tiny",
    "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
    "tools": [TOOL],
}
RESPONSES: dict[str, Any] = {
    "model": "tiny",
    "instructions": SYSTEM,
    "input": [{"role": "user", "content": QUESTION}],
    "tools": [{"type": "function", **TOOL["function"]}],
}
REQUESTS: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("chat/completions", CHAT),
    "chat streamed": (
        "chat/completions",
        {**CHAT, "stream": True, "stream_options": {"include_usage": True}},
    ),
    "responses": ("responses", RESPONSES),
    "responses streamed": ("responses", {**RESPONSES, "stream": True}),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    import aiohttp
    from aworld_train.runtime._endpoint import shared_endpoint
    from aworld_train.runtime._episode import Episode, Generated, Limits
    from aworld_train.runtime._trajectory import ChatRenderer
    from aworld_train.testing.tiny_model import build_tiny_model
    from transformers import AutoTokenizer

    folder = build_tiny_model(Path(tempfile.mkdtemp()) / "model", tools=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    renderer = ChatRenderer(tokenizer)
    call = '<tool_call>\n{"name": "multiply", "arguments": {"a": 6411, "b": 876}}\n</tool_call>'
    reply = list(tokenizer(call + tokenizer.eos_token, add_special_tokens=False)["input_ids"])

    async def standin(prompt_ids: list[int], max_tokens: int) -> Generated:
        return Generated(reply, [-0.1] * len(reply))

    class FreshEpisodes:
        """Each request a new episode, as each GRPO completion's first request is."""

        model = "tiny"

        async def chat(self, request: Any) -> Any:
            return await Episode(renderer, standin, Limits(4, 4096), self.model).chat(request)

        def fail(self, reason: str) -> None:
            raise RuntimeError(reason)

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    endpoint = asyncio.run_coroutine_threadsafe(shared_endpoint(), loop).result()
    served = endpoint.serve(FreshEpisodes())
    url = served.__enter__()
    server_thread = next(t for t in threading.enumerate() if t is not threading.main_thread())
    clock = time.pthread_getcpuclockid(server_thread.ident)  # type: ignore[arg-type]

    async def send(route: str, body: dict[str, Any], count: int) -> float:
        async with aiohttp.ClientSession() as http:
            before = time.clock_gettime(clock)
            for _ in range(count):
                async with http.post(f"{url}/{route}", json=body) as answer:
                    assert answer.status == 200, await answer.text()
                    await answer.read()
            return (time.clock_gettime(clock) - before) / count

    figures: dict[str, list[float]] = {name: [] for name in REQUESTS}
    asyncio.run(send(*REQUESTS["chat"], 50))  # warm-up: imports, the prompt cache
    for _ in range(args.rounds):
        for name, (route, body) in REQUESTS.items():
            figures[name].append(asyncio.run(send(route, body, args.requests)))
    served.__exit__(None, None, None)
    plain = statistics.median(figures["chat"])
    print(
        json.dumps(
            {
                name: {
                    "cpu_us_per_request": round(statistics.median(values) * 1e6),
                    "vs_plain_chat": round(statistics.median(values) / plain, 2),
                }
                for name, values in figures.items()
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
