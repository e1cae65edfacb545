"""Rollout samples: what the policy generated during training, a few per logged step.

Every engine appends to ``<run>/samples.jsonl`` through :func:`append_samples` (on rank 0 only),
one line per sample: ``{"step", "prompt", "completion", "reward", "rewards": {name: score}}``, and
``episode`` where the engine recorded the episode token by token (an agent run by the runtime
on TRL: :meth:`~aworld_train.runtime.EpisodeResult.record`); ``aworld-train show``, ``aworld-train
view`` and users read it back with :func:`read_samples`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from aworld_train.job.files import read_regular
from aworld_train.run.files import SAMPLES_FILE


def append_samples(run_dir: Path, step: int, rows: list[dict[str, Any]]) -> None:
    """Append ``rows`` as the samples of training step ``step``.

    :param rows: each with ``prompt`` (text, or the chat messages), ``completion`` (the text
        the reward saw), ``reward`` (the weighted total) and optionally ``rewards`` (each reward
        function's score by name) and ``episode`` (the episode token by token). A score that
        is not a finite number is written as ``null``.
    """
    lines = []
    for row in rows:
        rewards = {str(name): _score(score) for name, score in (row.get("rewards") or {}).items()}
        sample = {
            "step": int(step),
            "prompt": row["prompt"],
            "completion": row["completion"],
            "reward": _score(row["reward"]),
            "rewards": rewards,
        }
        if row.get("episode") is not None:
            sample["episode"] = row["episode"]
        # default=str: a value an agent put in a message that JSON has no form for stays text.
        lines.append(json.dumps(sample, ensure_ascii=False, default=str) + "\n")
    if lines:
        # One write per call keeps a step's lines together.
        with open(Path(run_dir) / SAMPLES_FILE, "a", encoding="utf-8") as file:
            file.write("".join(lines))


def read_samples(run_dir: Path) -> list[dict[str, Any]]:
    """Every sample of the run, in the order written; ``[]`` when it has none.

    A last line cut short (a run killed while it wrote) is left out.

    :raises RunDirectoryError: for any other line that is not a JSON object, naming the file
        and line.
    """
    from aworld_train.errors import RunDirectoryError

    path = Path(run_dir) / SAMPLES_FILE
    if not path.is_file():  # a FIFO or a device there is no samples file
        return []
    text = read_regular(path)
    lines = text.split("\n")
    samples = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            sample = json.loads(line)
        except ValueError as exc:
            if number == len(lines):  # no newline after it: the write was cut short
                break
            raise RunDirectoryError(f"{path}:{number}: not a JSON line ({exc})") from None
        if not isinstance(sample, dict):
            raise RunDirectoryError(f"{path}:{number}: not a JSON object")
        samples.append(sample)
    return samples


def _score(value: Any) -> float | None:
    if value is None:
        return None
    score = float(value)
    return score if math.isfinite(score) else None
