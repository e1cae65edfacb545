"""SFT's evaluation: a test set with ``eval_steps`` is scored with the job's reward, as GRPO's is,
beside TRL's ``eval_loss``; a job without a reward keeps the loss only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aworld_train import AgentTrainer
from aworld_train.testing.fixtures import manifest, read_jsonl

# The test rows: digits the reward's calls can be told apart by; eval_limit keeps the first 3.
TEST_DIGITS = [0, 7, 8, 2, 4]
EVAL_LIMIT = 3


def _one_step_sft_with_test_set(job: dict[str, Any]) -> None:
    """One SFT step, evaluated after it, on a test set of :data:`TEST_DIGITS`."""
    rows = [json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) for d in TEST_DIGITS]
    (job["base_dir"] / "test.jsonl").write_text("\n".join(rows) + "\n")
    job["test_dataset"] = "test.jsonl"
    job["config"] = dict(job["config"], algorithm="sft", max_steps=1, eval_steps=1, save_steps=1,
                         eval_limit=EVAL_LIMIT, trl={})
    job["config"].pop("num_generations")


def test_one_sft_step_with_eval_steps_logs_the_reward_beside_the_loss(
    job: dict[str, Any], tmp_path: Path
) -> None:
    _one_step_sft_with_test_set(job)
    job["reward_func"] = ["rewards.py:score", "rewards.py:length"]
    trainer = AgentTrainer(**job)
    (tmp_path / "calls.jsonl").unlink(missing_ok=True)  # the checks' calls
    final = trainer.train()
    run_dir = trainer.run_dir.path

    evals = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "eval_loss" in m]
    assert [m["step"] for m in evals] == [1]
    entry = evals[0]
    assert {"eval_reward", "eval_score", "eval_length"} <= entry.keys()
    assert entry["eval_reward"] == pytest.approx(entry["eval_score"] + entry["eval_length"])
    assert {"eval_reward", "eval_score", "eval_loss"} <= final.keys()
    assert {"eval_reward", "eval_score"} <= manifest(run_dir)["final_metrics"].keys()
    # The reward scored the first eval_limit test rows, once each.
    calls = read_jsonl(tmp_path / "calls.jsonl")
    assert [call["ground_truth"] for call in calls] == [str(d) for d in TEST_DIGITS[:EVAL_LIMIT]]
    assert entry["eval_score"] == pytest.approx(
        sum(call["solution"].strip() == call["ground_truth"] for call in calls) / EVAL_LIMIT)


def test_sft_without_a_reward_logs_the_loss_only(job: dict[str, Any]) -> None:
    _one_step_sft_with_test_set(job)
    del job["reward_func"]
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path

    evals = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "eval_loss" in m]
    assert [m["step"] for m in evals] == [1]
    assert not [key for key in evals[0] if key.startswith("eval_") and "reward" in key]
    assert "eval_score" not in evals[0]


def test_two_cpu_processes_score_the_test_set_on_rank_0(
    job: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CPU processes on any machine (see test_training's two-process test).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    _one_step_sft_with_test_set(job)
    job["config"] = dict(job["config"], resources={"gpus_per_node": 2},
                         trl={"use_cpu": True, "bf16": False})
    trainer = AgentTrainer(**job)
    (tmp_path / "calls.jsonl").unlink(missing_ok=True)  # the checks' calls
    final = trainer.train()
    run_dir = trainer.run_dir.path

    assert final["num_processes"] == 2
    evals = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "eval_loss" in m]
    assert [m["step"] for m in evals] == [1]
    assert {"eval_reward", "eval_score"} <= evals[0].keys()
    # Rank 0 alone scored the rows: each once.
    calls = read_jsonl(tmp_path / "calls.jsonl")
    assert [call["ground_truth"] for call in calls] == [str(d) for d in TEST_DIGITS[:EVAL_LIMIT]]
