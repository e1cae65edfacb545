"""Build what the repeat-digit demo trains on: a tiny offline model and 2,000 prompts.

Run from the repository root: ``python examples/repeat_digit/prepare.py``. It writes
``examples/repeat_digit/build/model`` and ``examples/repeat_digit/build/train.jsonl``, and
leaves both alone when they already exist.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

from aworld_train.testing import build_tiny_model

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
ROWS = 2000


def write_dataset(path: Path, rows: int = ROWS, seed: int = 0) -> None:
    """One row per prompt ``Repeat: <digit>`` whose answer is the digit."""
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as handle:
        for index in range(rows):
            digit = str(rng.randrange(10))
            row = {"prompt": f"Repeat: {digit}", "ground_truth": digit, "data_source": "repeat_digit"}
            handle.write(json.dumps(row) + "\n")


def main() -> None:
    BUILD.mkdir(parents=True, exist_ok=True)
    model = BUILD / "model"
    if not (model / "config.json").is_file():
        # Hidden size 128 learns this task within the demo's 500 steps (64 learns too slowly);
        # a printable-ASCII vocabulary (~100 tokens) lets the random model find digits sooner.
        build_tiny_model(
            model, hidden_size=128, num_layers=2, num_heads=4, alphabet=string.printable, seed=0
        )
    data = BUILD / "train.jsonl"
    if not data.is_file():
        write_dataset(data)
    print(f"model: {model}\ndataset: {data}")


if __name__ == "__main__":
    main()
