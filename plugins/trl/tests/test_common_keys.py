"""The common settings trained for real on the tiny model: LoRA with the "Done when" job, bf16 on
CPU with tensorboard, resume with LoRA, evaluation during training and rollout samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.testing import common_keys
from aworld_train.testing.fixtures import (
    COMMON_KEYS_JOB,
    assert_interrupted_run_resumes,
    assert_loads_without_peft,
    manifest,
    read_jsonl,
    record_sampling,
)


def _on_cpu(job: dict[str, Any]) -> None:
    """Train on the CPU on any machine, as the bf16-on-CPU test needs."""
    job["config"]["trl"] = dict(job["config"]["trl"], use_cpu=True)


@pytest.mark.slow
def test_common_keys_job_trains_a_lora_adapter_and_a_merged_model(
    job: dict[str, Any], tiny_model: Path
) -> None:
    job["config"] = dict(job["config"], **COMMON_KEYS_JOB)
    # A reward that varies between completions, so the adapter learns something to merge.
    job["reward_func"] = "rewards.py:length"
    trainer = AgentTrainer(**job)
    trainer.train()
    common_keys.assert_common_keys_run(trainer.run_dir.path, tiny_model)


@pytest.mark.slow
def test_bf16_on_cpu_computes_in_bf16_and_tensorboard_holds_the_reward(job: dict[str, Any]) -> None:
    _on_cpu(job)
    job["config"] = dict(job["config"], precision="bf16", report_to=["tensorboard"])
    job["reward_func"] = "rewards.py:length"
    common_keys.assert_tensorboard_holds_the_reward(common_keys.assert_trains_in_bf16(job))


@pytest.mark.slow
def test_a_lora_run_resumes_from_its_adapter_checkpoint(job: dict[str, Any]) -> None:
    job["config"] = dict(job["config"], lora={"rank": 4})
    run_dir = assert_interrupted_run_resumes(job)
    assert (run_dir / "checkpoints" / "checkpoint-6" / "adapter_model.safetensors").is_file()
    assert (run_dir / "adapter" / "adapter_config.json").is_file()
    assert_loads_without_peft(run_dir / "model")


@pytest.mark.slow
def test_eval_steps_score_the_test_set_greedily_and_samples_are_kept(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    common_keys.write_test_set(job, range(6))
    job["reward_func"] = ["rewards.py:score", "rewards.py:length"]
    job["config"] = dict(job["config"], eval_steps=3, eval_limit=4, log_samples=3)
    sampling = record_sampling(monkeypatch)
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path

    evals = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "eval_reward" in m]
    # Every eval_steps and after the last step.
    assert [m["step"] for m in evals] == [3, 4]
    for entry in evals:
        assert entry["eval_reward"] == pytest.approx(entry["eval_score"] + entry["eval_length"])
    assert {"eval_reward", "eval_score", "eval_length"} <= manifest(run_dir)["final_metrics"].keys()
    # Training samples (4 steps); each evaluation generates the 4 test rows in one greedy batch.
    assert sampling == [True] * 3 + [False] + [True] + [False]
    assert (run_dir / "reward.png").is_file()

    for sample in common_keys.assert_rollout_samples(run_dir, steps=4, per_step=3):
        assert set(sample) == {"step", "prompt", "completion", "reward", "rewards"}
        assert sample["prompt"].startswith("Repeat: ")
        assert sample["rewards"]["length"] == min(len(sample["completion"]), 4) / 4


@pytest.mark.slow
def test_a_test_set_without_eval_steps_is_scored_once_at_the_end(job: dict[str, Any]) -> None:
    common_keys.write_test_set(job, [7, 8])
    job["config"] = dict(job["config"], max_steps=2, log_samples=0)
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path

    evals = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "eval_reward" in m]
    assert [m["step"] for m in evals] == [2]
    assert "eval_score" in evals[0]
    assert not (run_dir / "samples.jsonl").exists()
