"""The common settings trained for real on the tiny model: LoRA with the "Done when" job, bf16 on
CPU with tensorboard, resume with LoRA, evaluation during training and rollout samples."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aworld_train import AgentTrainer
from aworld_train.testing.fixtures import (
    COMMON_KEYS_EFFECTIVE,
    COMMON_KEYS_JOB,
    assert_interrupted_run_resumes,
    assert_loads_without_peft,
    compute_dtypes,
    manifest,
    read_jsonl,
    record_sampling,
    tensorboard_scalars,
)


def _on_cpu(job: dict[str, Any]) -> None:
    """Train on the CPU on any machine, as the bf16-on-CPU test needs."""
    job["config"]["trl"] = dict(job["config"]["trl"], use_cpu=True)


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_common_keys_job_trains_a_lora_adapter_and_a_merged_model(
    job: dict[str, Any], tiny_model: Path
) -> None:
    job["config"] = dict(job["config"], **COMMON_KEYS_JOB)
    # A reward that varies between completions, so the adapter learns something to merge.
    job["reward_func"] = "rewards.py:length"
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path

    kept = manifest(run_dir)
    assert {name: kept["settings"][name] for name in COMMON_KEYS_EFFECTIVE} == COMMON_KEYS_EFFECTIVE
    assert kept["precision"] == "fp32"
    adapter = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"], adapter["lora_dropout"]) == (8, 16, 0.0)
    assert_loads_without_peft(run_dir / "model")
    merged, base = _weights(run_dir / "model"), _weights(tiny_model)
    assert merged.keys() == base.keys()
    changed = [name for name in base if not (merged[name] == base[name]).all()]
    assert changed and all(name.endswith("proj.weight") for name in changed)


def test_bf16_on_cpu_computes_in_bf16_and_tensorboard_holds_the_reward(
    job: dict[str, Any]
) -> None:
    import torch

    _on_cpu(job)
    job["config"] = dict(job["config"], precision="bf16", report_to=["tensorboard"])
    job["reward_func"] = "rewards.py:length"
    trainer = AgentTrainer(**job)
    with compute_dtypes() as dtypes:
        trainer.train()
    run_dir = trainer.run_dir.path

    assert dtypes == {torch.bfloat16}
    assert manifest(run_dir)["precision"] == "bf16"
    logged = [(m["step"], m["reward"]) for m in read_jsonl(run_dir / "metrics.jsonl")
              if "reward" in m]
    assert len({reward for _, reward in logged}) > 1, "a reward that varies step to step"
    scalars = tensorboard_scalars(run_dir / "tensorboard")
    assert [(step, pytest.approx(value)) for step, value in scalars["train/reward"]] == logged


def test_a_lora_run_resumes_from_its_adapter_checkpoint(job: dict[str, Any]) -> None:
    job["config"] = dict(job["config"], lora={"rank": 4})
    run_dir = assert_interrupted_run_resumes(job)
    assert (run_dir / "checkpoints" / "checkpoint-6" / "adapter_model.safetensors").is_file()
    assert (run_dir / "adapter" / "adapter_config.json").is_file()
    assert_loads_without_peft(run_dir / "model")


def _with_test_set(job: dict[str, Any], digits: list[int]) -> None:
    rows = [json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) for d in digits]
    (job["base_dir"] / "test.jsonl").write_text("\n".join(rows) + "\n")
    job["test_dataset"] = "test.jsonl"


def test_eval_steps_score_the_test_set_greedily_and_samples_are_kept(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _with_test_set(job, [0, 1, 2, 3, 4, 5])
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

    samples = read_jsonl(run_dir / "samples.jsonl")
    assert [s["step"] for s in samples] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    for sample in samples:
        assert set(sample) == {"step", "prompt", "completion", "reward", "rewards"}
        assert sample["prompt"].startswith("Repeat: ")
        assert isinstance(sample["completion"], str)
        assert set(sample["rewards"]) == {"score", "length"}
        assert sample["reward"] == pytest.approx(sum(sample["rewards"].values()))
        assert sample["rewards"]["length"] == min(len(sample["completion"]), 4) / 4


def test_a_test_set_without_eval_steps_is_scored_once_at_the_end(job: dict[str, Any]) -> None:
    _with_test_set(job, [7, 8])
    job["config"] = dict(job["config"], max_steps=2, log_samples=0)
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path

    evals = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "eval_reward" in m]
    assert [m["step"] for m in evals] == [2]
    assert "eval_score" in evals[0]
    assert not (run_dir / "samples.jsonl").exists()
