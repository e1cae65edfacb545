"""SFT's evaluation: a test set with ``eval_steps`` is scored with the job's reward, as GRPO's is,
beside swift's ``eval_loss``; a job without a reward keeps the loss only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.testing.sft_eval import (
    EVAL_LIMIT,
    TEST_DIGITS,
    SftEvalSuite,
    eval_entries,
    scored_ground_truths,
)


class TestSwiftSftEval(SftEvalSuite):
    engine_name = "swift"
    engine_section = {"template": "qwen"}
    # Two CPU processes under torchrun (see test_training's torchrun test).
    two_processes = {
        "batch_size": 2,
        "swift": {"template": "qwen", "use_cpu": True, "torch_dtype": "float32"},
    }

    def assert_ran_in_two_processes(self, final: dict[str, Any], run_dir: Path) -> None:
        assert json.loads((run_dir / "swift_job.json").read_text())["rewards"]


@pytest.mark.slow
def test_one_dpo_step_with_eval_steps_logs_the_reward(job: dict[str, Any], tmp_path: Path) -> None:
    def pairs(digits: list[int]) -> str:
        return "".join(
            json.dumps(
                {"prompt": f"Repeat: {d}", "ground_truth": str(d), "rejected": str((d + 1) % 10)}
            )
            + "\n"
            for d in digits
        )

    (tmp_path / "pairs.jsonl").write_text(pairs(list(range(8))))
    (tmp_path / "pairs_test.jsonl").write_text(pairs(TEST_DIGITS))
    job.update(train_dataset="pairs.jsonl", test_dataset="pairs_test.jsonl")
    job["config"] = dict(
        job["config"],
        algorithm="dpo",
        max_steps=1,
        eval_steps=1,
        save_steps=1,
        batch_size=2,
        eval_limit=EVAL_LIMIT,
        swift={"template": "qwen"},
    )
    job["config"].pop("num_generations")
    trainer = AgentTrainer(**job)
    (tmp_path / "calls.jsonl").unlink(missing_ok=True)  # the checks' calls
    trainer.train()

    assert {"eval_reward", "eval_score"} <= eval_entries(trainer.run_dir.path)[0].keys()
    scored_ground_truths(tmp_path)
