"""Build what the repeat-digit demo trains on: a tiny offline model, 2,000 training prompts and
a test set of the ten digits.

Run from the repository root: ``python examples/repeat_digit/prepare.py``. It writes
``examples/repeat_digit/build/model``, ``build/train.jsonl`` and ``build/test.jsonl``, and
leaves them alone when they already exist (the model is rebuilt when it was built with other
arguments than :data:`MODEL_ARGS`).
"""

from __future__ import annotations

import json
import random
import shutil
import string
from pathlib import Path

from aworld_train.testing import build_tiny_model

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
ROWS = 2000
# Only the characters the prompts and the chat template's role names need: with 23 characters
# and 3 special tokens a random model samples the right digit, and the end of its turn, about
# one time in 26 each, so every seed finds both early (printable ASCII, ~100 tokens, left some
# seeds and some numerics never learning to stop).
ALPHABET = "".join(sorted(set("Repeat: " + string.digits + "user" + "assistant" + "\n")))
# Hidden size 128 learns this task well within the demo's steps (64 learns too slowly).
MODEL_ARGS = {"hidden_size": 128, "num_layers": 2, "num_heads": 4, "alphabet": ALPHABET, "seed": 0}
MODEL_ARGS_FILE = "demo_model_args.json"


def write_dataset(path: Path, digits: list[int]) -> None:
    """One row per digit: the prompt ``Repeat: <digit>`` whose answer is the digit."""
    with path.open("w", encoding="utf-8") as handle:
        for digit in digits:
            row = {
                "prompt": f"Repeat: {digit}",
                "ground_truth": str(digit),
                "data_source": "repeat_digit",
            }
            handle.write(json.dumps(row) + "\n")


def main() -> None:
    BUILD.mkdir(parents=True, exist_ok=True)
    model = BUILD / "model"
    stamp = model / MODEL_ARGS_FILE
    if not stamp.is_file() or json.loads(stamp.read_text()) != MODEL_ARGS:
        shutil.rmtree(model, ignore_errors=True)
        build_tiny_model(model, **MODEL_ARGS)
        stamp.write_text(json.dumps(MODEL_ARGS))
    train, test = BUILD / "train.jsonl", BUILD / "test.jsonl"
    if not train.is_file():
        rng = random.Random(0)
        write_dataset(train, [rng.randrange(10) for _ in range(ROWS)])
    if not test.is_file():
        write_dataset(test, list(range(10)))
    print(f"model: {model}\ntrain: {train}\ntest: {test}")


if __name__ == "__main__":
    main()
