"""One training process under torchrun: ``python -m aworld_train_swift.worker JOB``.

It rebuilds the checked job that :mod:`aworld_train_swift.launch` wrote, registers the rewards
in this process's ``orms``, and trains; the main process prints each metrics event on one
marked line for the parent to forward.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aworld_train.errors import RewardError
from aworld_train.reward import RewardFunction, RewardSpec

from aworld_train_swift.config import SwiftConfig
from aworld_train_swift.launch import EVENT_MARKER
from aworld_train_swift.rewards import SwiftReward
from aworld_train_swift.training import train_in_process


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
    job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    config = SwiftConfig(**job["config"])
    reward = None
    if job["rewards"]:
        functions = [RewardFunction(r["name"], import_reward(r["ref"]), 1.0, r["ref"])
                     for r in job["rewards"]]
        reward = SwiftReward(
            RewardSpec(functions),
            [r["orm"] for r in job["rewards"]],
            list(config.arguments.get("reward_weights") or [1.0] * len(functions)),
        )
    final = train_in_process(
        config=config,
        reward=reward,
        on_start=lambda total, done: _emit("start", total=total, done=done),
        on_log=lambda step, metrics: _emit("log", step=step, metrics=metrics),
        checkpoint=Path(job["checkpoint"]) if job["checkpoint"] else None,
    )
    if int(os.environ.get("RANK", "0")) == 0:
        _emit("done", metrics={k: v for k, v in final.items() if isinstance(v, (int, float))})


if __name__ == "__main__":
    main(sys.argv[1])
