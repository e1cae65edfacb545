"""SFT's evaluation: a test set with ``eval_steps`` is scored with the job's reward, as GRPO's is,
beside TRL's ``eval_loss``; a job without a reward keeps the loss only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aworld_train.testing.sft_eval import SftEvalSuite


class TestTrlSftEval(SftEvalSuite):
    engine_name = "trl"
    # Two CPU processes under accelerate (see test_training's two-process test).
    two_processes = {"trl": {"use_cpu": True, "bf16": False}}

    def assert_ran_in_two_processes(self, final: dict[str, Any], run_dir: Path) -> None:
        assert final["num_processes"] == 2
