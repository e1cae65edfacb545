"""The common settings trained for real on ms-swift with the tiny model: the "Done when" job with
LoRA (interrupted and resumed), bf16 on a CPU with TensorBoard, evaluation during training and
rollout samples, and the last evaluation scoring what ``aworld-train eval`` scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aworld_train import AgentTrainer
from aworld_train.testing.eval_reference import varied_model
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

# Two rewards: score (1 for the digit) and length (a share of 4 characters), which varies
# between completions, so that the policy's gradient is not zero.
REWARDS = ["rewards.py:score", "rewards.py:length"]

# A reward that any change to a completion's text changes, so that equal means say the two
# evaluations generated the same completions.
TEXT_REWARD = """
def checksum(data_source, solution_str, ground_truth, extra_info=None):
    return sum(map(ord, solution_str)) % 97 / 97
"""


def _weights(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def test_the_common_keys_job_trains_resumes_and_leaves_a_merged_model(
    job: dict[str, Any], tiny_model: Path
) -> None:
    job["config"] = dict(job["config"], **COMMON_KEYS_JOB, swift={"template": "qwen"})
    job["reward_func"] = REWARDS
    run_dir = assert_interrupted_run_resumes(job)

    kept = manifest(run_dir)
    assert {name: kept["settings"][name] for name in COMMON_KEYS_EFFECTIVE} == COMMON_KEYS_EFFECTIVE
    assert kept["precision"] == "fp32"
    args = json.loads((run_dir / "checkpoints" / "args.json").read_text())
    assert (args["beta"], args["lr_scheduler_type"], args["torch_dtype"]) == (
        0.0, "constant", "float32")
    assert (args["tuner_type"], args["lora_rank"], args["lora_alpha"], args["lora_dropout"]) == (
        "lora", 8, 16.0, 0.0)
    adapter = json.loads((run_dir / "adapter" / "adapter_config.json").read_text())
    assert (adapter["r"], adapter["lora_alpha"], adapter["lora_dropout"]) == (8, 16, 0.0)
    assert not (run_dir / "adapter" / "optimizer.pt").exists()

    assert_loads_without_peft(run_dir / "model")
    merged, base = _weights(run_dir / "model"), _weights(tiny_model)
    assert merged.keys() == base.keys()
    changed = [name for name in base if not (merged[name] == base[name]).all()]
    assert changed and all(name.endswith("proj.weight") for name in changed)


def test_bf16_on_a_cpu_with_tensorboard_evaluation_and_rollout_samples(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    rows = [json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) for d in range(6)]
    (job["base_dir"] / "test.jsonl").write_text("\n".join(rows) + "\n")
    job["test_dataset"] = "test.jsonl"
    job["reward_func"] = REWARDS
    job["config"] = dict(job["config"], precision="bf16", report_to=["tensorboard"],
                         eval_steps=2, eval_limit=4, log_samples=3,
                         swift=dict(job["config"]["swift"], use_cpu=True))
    sampled = record_sampling(monkeypatch)
    trainer = AgentTrainer(**job)
    with compute_dtypes() as dtypes:
        trainer.train()
    run_dir = trainer.run_dir.path

    # bf16 on the CPU: the layers compute in bf16.
    assert dtypes == {torch.bfloat16}
    assert manifest(run_dir)["precision"] == "bf16"

    metrics = read_jsonl(run_dir / "metrics.jsonl")
    logged = [(m["step"], m["reward"]) for m in metrics if "reward" in m]
    assert [step for step, _ in logged] == [1, 2, 3, 4]
    assert len({reward for _, reward in logged}) > 1, "a reward that varies step to step"
    scalars = tensorboard_scalars(run_dir / "tensorboard")
    assert [(step, pytest.approx(value)) for step, value in scalars["train/reward"]] == logged

    # Evaluation every 2 steps (the last one included), greedy, under the common names.
    evaluations = [m for m in metrics if "eval_reward" in m]
    assert [m["step"] for m in evaluations] == [2, 4]
    for m in evaluations:
        assert m["eval_reward"] == pytest.approx(m["eval_score"] + m["eval_length"])
        assert not [key for key in m if key.startswith("eval_rewards/") and key.endswith("/mean")]
    assert False in sampled and True in sampled  # greedy evaluation, sampled rollouts
    final = manifest(run_dir)["final_metrics"]
    assert (final["eval_reward"], final["eval_length"]) == pytest.approx(
        (evaluations[-1]["eval_reward"], evaluations[-1]["eval_length"]))

    # log_samples: 3 rollout samples per logged step, their reward the sum of both rewards.
    samples = read_jsonl(run_dir / "samples.jsonl")
    assert [s["step"] for s in samples] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    for sample in samples:
        assert "Repeat: " in sample["prompt"]
        assert set(sample["rewards"]) == {"score", "length"}
        assert sample["reward"] == pytest.approx(sum(sample["rewards"].values()))
    assert any(sample["rewards"]["length"] for sample in samples)


def test_the_last_evaluation_scores_what_aworld_train_eval_scores(
    job: dict[str, Any], tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aworld_train.cli import main

    # Noise on the weights, so that the model answers each prompt differently.
    model = varied_model(tiny_model, job["base_dir"] / "varied")
    rows = [json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) for d in range(10)]
    (job["base_dir"] / "test.jsonl").write_text("\n".join(rows) + "\n")
    (job["base_dir"] / "text.py").write_text(TEXT_REWARD)
    job.update(test_dataset="test.jsonl",
               reward_func=["rewards.py:score", {"name": "text.py:checksum", "weight": 0.5}])
    # fp32 on any device: eval loads the final model in its saved dtype.
    job["config"] = dict(job["config"], model=str(model), eval_limit=8, max_steps=2,
                         precision="fp32")
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path
    assert manifest(run_dir)["settings"]["eval_steps"] == "end"  # the last step only

    evaluations = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "eval_reward" in m]
    assert [m["step"] for m in evaluations] == [2]
    capsys.readouterr()
    main(["eval", str(run_dir), "--limit", "8", "--json"])
    scored = json.loads(capsys.readouterr().out)
    assert scored["rows"] == 8
    last = evaluations[0]
    assert last["eval_reward"] == pytest.approx(scored["mean_reward"])
    assert (last["eval_score"], last["eval_checksum"]) == pytest.approx(
        (scored["rewards"]["score"], scored["rewards"]["checksum"]))
    # The rows score differently, so the agreement is not one of constants.
    records = read_jsonl(run_dir / "eval" / "final-test-first8.samples.jsonl")
    assert len({r["rewards"]["checksum"] for r in records}) > 1
