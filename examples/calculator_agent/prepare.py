"""Build what the calculator example needs offline: a tiny model whose chat template renders tools,
and (when missing) the multiplication datasets.

Run from the repository root: ``python examples/calculator_agent/prepare.py``. It writes
``examples/calculator_agent/build/model`` and leaves existing files alone. The tiny model is
random: it lets ``aworld-train check`` and smoke runs work without a model hub, not learn the task.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE / "build" / "model"

QUESTION = "What is {a} * {b}?"


def write_dataset(path: Path, rows: int, seed: int) -> None:
    """Products of a 3- or 4-digit and a 3-digit number: too long to guess, exact with the tool."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(rows):
            a, b = rng.randrange(100, 10000), rng.randrange(100, 1000)
            row = {
                "prompt": QUESTION.format(a=a, b=b),
                "ground_truth": str(a * b),
                "data_source": "calculator",
            }
            handle.write(json.dumps(row) + "\n")


def main() -> None:
    from aworld_train.testing import build_tiny_model

    if not (MODEL / "config.json").is_file():
        # 4096 positions: its byte-level tokens make a prompt with the three tools' schemas
        # ~1200 tokens, and an episode adds turns and tool results to it.
        build_tiny_model(
            MODEL, extra_tokens=("<answer>", "</answer>"), max_positions=4096, tools=True
        )
    for name, rows, seed in (("train", 256, 0), ("test", 32, 1)):
        path = HERE / "data" / f"{name}.jsonl"
        if not path.is_file():
            write_dataset(path, rows, seed)
    print(f"model: {MODEL}\ndata: {HERE / 'data'}")


if __name__ == "__main__":
    main()
