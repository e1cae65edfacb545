"""The agent runtime answers a step's requests in one generate call while they keep coming,
however far apart the first ones arrive, up to its longest wait."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from aworld_train.runtime import BatchedGenerate, Generated


def batches_of(arrivals: list[float], window: float, max_wait: float) -> list[int]:
    """The batch sizes the generate calls got for requests sent at ``arrivals`` (seconds),
    with more episodes running than ever ask."""
    sizes: list[int] = []

    def generate_batch(prompts: list[list[int]], _: int) -> list[Generated]:
        sizes.append(len(prompts))
        return [Generated([1], [0.0]) for _ in prompts]

    generate = BatchedGenerate(generate_batch, window=window, max_wait=max_wait)
    generate.runtime = SimpleNamespace(running=len(arrivals) + 1)  # one episode never asks

    async def ask(delay: float) -> Generated:
        await asyncio.sleep(delay)
        return await generate([0], 1)

    async def everyone() -> None:
        await asyncio.gather(*(ask(delay) for delay in arrivals))

    asyncio.run(everyone())
    return sizes


def test_requests_closer_than_the_window_are_one_batch_even_after_the_first_window() -> None:
    # The last request comes 0.36 s after the first, past a window of 0.3 s from it.
    assert batches_of([0.0, 0.12, 0.24, 0.36], window=0.3, max_wait=2.0) == [4]


def test_a_batch_waits_no_longer_than_max_wait() -> None:
    sizes = batches_of([0.1 * i for i in range(8)], window=0.3, max_wait=0.45)
    assert sum(sizes) == 8 and len(sizes) >= 2 and sizes[0] < 8
