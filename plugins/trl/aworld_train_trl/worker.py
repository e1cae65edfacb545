"""One training process under ``accelerate launch``: ``python -m aworld_train_trl.worker JOB``.

It rebuilds the checked job that :mod:`aworld_train_trl.launch` wrote and trains; the main
process prints each metrics event on one marked line for the parent to forward.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aworld_train.errors import RewardError
from aworld_train.reward import RewardFunction, RewardSpec

from aworld_train_trl.agent import TrlAgent
from aworld_train_trl.config import TrlConfig
from aworld_train_trl.data import TrlDatasets
from aworld_train_trl.launch import EVENT_MARKER
from aworld_train_trl.rewards import TrlReward
from aworld_train_trl.training import train_in_process


def import_reward(ref: str) -> Callable[..., Any]:
    """Import ``/path/to/file.py:function`` or ``package.module:function``."""
    target, _, name = ref.rpartition(":")
    if target.endswith(".py"):
        spec = importlib.util.spec_from_file_location(Path(target).stem, target)
        if spec is None or spec.loader is None:
            raise RewardError(f"reward {ref}: cannot load {target}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, name)


def _emit(event: str, **fields: Any) -> None:
    print(EVENT_MARKER + json.dumps({"event": event, **fields}, default=float), flush=True)


def main(job_file: str) -> None:
    from datasets import load_from_disk

    job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    spec = RewardSpec(
        [
            RewardFunction(r["name"], import_reward(r["ref"]), r["weight"], r["ref"])
            for r in job["rewards"]
        ]
    )
    final = train_in_process(
        agent=TrlAgent(**job["agent"]),
        data=TrlDatasets(
            train=load_from_disk(job["train"]),
            test=load_from_disk(job["test"]) if job["test"] else None,
        ),
        reward=TrlReward(spec),
        config=TrlConfig(**job["config"]),
        run_dir=Path(job["run_dir"]),
        on_start=lambda total, done: _emit("start", total=total, done=done),
        on_log=lambda step, metrics: _emit("log", step=step, metrics=metrics),
        checkpoint=Path(job["checkpoint"]) if job["checkpoint"] else None,
    )
    from accelerate import PartialState

    if PartialState().is_main_process:
        _emit("done", metrics=final)


if __name__ == "__main__":
    main(sys.argv[1])
