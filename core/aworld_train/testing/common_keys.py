"""What a run of the common keys leaves on every engine, checked the same way on each: the
manifest's effective settings, the LoRA adapter and the merged model, the reward in
TensorBoard, and the rollout samples.

An engine's suite trains :data:`~aworld_train.testing.fixtures.COMMON_KEYS_JOB` (and the jobs
beside it) with its own section, then asserts with these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aworld_train.testing.fixtures import (
    COMMON_KEYS_EFFECTIVE,
    assert_loads_without_peft,
    compute_dtypes,
    manifest,
    read_jsonl,
    tensorboard_scalars,
)


def write_test_set(job: dict[str, Any], digits: list[int] | range) -> None:
    """Give the job a test set of "Repeat: <digit>" rows, one per digit."""
    rows = [json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) for d in digits]
    (job["base_dir"] / "test.jsonl").write_text("\n".join(rows) + "\n")
    job["test_dataset"] = "test.jsonl"


def assert_common_keys_run(run_dir: Path, base_model: Path) -> None:
    """The run of ``COMMON_KEYS_JOB`` reports its settings under their common names, in fp32,
    and leaves a rank-8 adapter and a merged model that loads without peft, in which only the
    adapted projections differ from ``base_model``."""
    kept = manifest(run_dir)
    assert {name: kept["settings"][name] for name in COMMON_KEYS_EFFECTIVE} == COMMON_KEYS_EFFECTIVE
    assert kept["precision"] == "fp32"
    adapter = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"], adapter["lora_dropout"]) == (8, 16, 0.0)
    assert_loads_without_peft(run_dir / "model")
    merged, base = _weights(run_dir / "model"), _weights(base_model)
    assert merged.keys() == base.keys()
    changed = [name for name in base if not (merged[name] == base[name]).all()]
    assert changed and all(name.endswith("proj.weight") for name in changed)


def assert_trains_in_bf16(job: dict[str, Any]) -> Path:
    """Train ``job``, whose config asks for bf16: the layers compute in bf16 and the manifest
    says so. Returns the run directory."""
    import torch

    from aworld_train.trainer import AgentTrainer

    trainer = AgentTrainer(**job)
    with compute_dtypes() as dtypes:
        trainer.train()
    run_dir = trainer.run_dir.path
    assert dtypes == {torch.bfloat16}
    assert manifest(run_dir)["precision"] == "bf16"
    return run_dir


def assert_tensorboard_holds_the_reward(run_dir: Path) -> list[tuple[int, float]]:
    """Each logged step's reward, which varies from step to step, is TensorBoard's
    ``train/reward`` at that step; returns the ``(step, reward)`` pairs."""
    logged = [
        (m["step"], m["reward"]) for m in read_jsonl(run_dir / "metrics.jsonl") if "reward" in m
    ]
    assert len({reward for _, reward in logged}) > 1, "a reward that varies step to step"
    scalars = tensorboard_scalars(run_dir / "tensorboard")
    assert [(step, pytest.approx(value)) for step, value in scalars["train/reward"]] == logged
    return logged


def assert_rollout_samples(run_dir: Path, steps: int, per_step: int) -> list[dict[str, Any]]:
    """``samples.jsonl`` holds ``per_step`` rollouts of each of ``steps`` steps, each scored by
    the ``score`` and ``length`` rewards, its reward their sum; returns the samples."""
    samples = read_jsonl(run_dir / "samples.jsonl")
    assert [s["step"] for s in samples] == [
        step for step in range(1, steps + 1) for _ in range(per_step)
    ]
    for sample in samples:
        assert "Repeat: " in sample["prompt"]
        assert set(sample["rewards"]) == {"score", "length"}
        assert sample["reward"] == pytest.approx(sum(sample["rewards"].values()))
    return samples


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))
