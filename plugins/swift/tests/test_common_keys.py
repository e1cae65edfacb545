"""The common settings trained for real on ms-swift with the tiny model: the "Done when" job with
LoRA (interrupted and resumed), bf16 on a CPU with TensorBoard, evaluation during training and
rollout samples, and the last evaluation scoring what ``aworld-train eval`` scores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.testing import common_keys
from aworld_train.testing.eval_reference import varied_model
from aworld_train.testing.fixtures import (
    COMMON_KEYS_JOB,
    assert_interrupted_run_resumes,
    manifest,
    read_jsonl,
    record_sampling,
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


@pytest.mark.slow
def test_the_common_keys_job_trains_resumes_and_leaves_a_merged_model(
    job: dict[str, Any], tiny_model: Path
) -> None:
    job["config"] = dict(job["config"], **COMMON_KEYS_JOB, swift={"template": "qwen"})
    job["reward_func"] = REWARDS
    run_dir = assert_interrupted_run_resumes(job)

    common_keys.assert_common_keys_run(run_dir, tiny_model)
    args = json.loads((run_dir / "checkpoints" / "args.json").read_text())
    assert (args["beta"], args["lr_scheduler_type"], args["torch_dtype"]) == (
        0.0,
        "constant",
        "float32",
    )
    assert (args["tuner_type"], args["lora_rank"], args["lora_alpha"], args["lora_dropout"]) == (
        "lora",
        8,
        16.0,
        0.0,
    )
    assert not (run_dir / "adapter" / "optimizer.pt").exists()


@pytest.mark.slow
def test_bf16_on_a_cpu_with_tensorboard_evaluation_and_rollout_samples(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    common_keys.write_test_set(job, range(6))
    job["reward_func"] = REWARDS
    job["config"] = dict(
        job["config"],
        precision="bf16",
        report_to=["tensorboard"],
        eval_steps=2,
        eval_limit=4,
        log_samples=3,
        swift=dict(job["config"]["swift"], use_cpu=True),
    )
    sampled = record_sampling(monkeypatch)
    # bf16 on the CPU: the layers compute in bf16.
    run_dir = common_keys.assert_trains_in_bf16(job)

    logged = common_keys.assert_tensorboard_holds_the_reward(run_dir)
    assert [step for step, _ in logged] == [1, 2, 3, 4]
    metrics = read_jsonl(run_dir / "metrics.jsonl")

    # Evaluation every 2 steps (the last one included), greedy, under the common names.
    evaluations = [m for m in metrics if "eval_reward" in m]
    assert [m["step"] for m in evaluations] == [2, 4]
    for m in evaluations:
        assert m["eval_reward"] == pytest.approx(m["eval_score"] + m["eval_length"])
        assert not [key for key in m if key.startswith("eval_rewards/") and key.endswith("/mean")]
    assert False in sampled and True in sampled  # greedy evaluation, sampled rollouts
    final = manifest(run_dir)["final_metrics"]
    assert (final["eval_reward"], final["eval_length"]) == pytest.approx(
        (evaluations[-1]["eval_reward"], evaluations[-1]["eval_length"])
    )

    # log_samples: 3 rollout samples per logged step, their reward the sum of both rewards.
    samples = common_keys.assert_rollout_samples(run_dir, steps=4, per_step=3)
    assert any(sample["rewards"]["length"] for sample in samples)


@pytest.mark.slow
def test_the_last_evaluation_scores_what_aworld_train_eval_scores(
    job: dict[str, Any], tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aworld_train.cli import main

    # Noise on the weights, so that the model answers each prompt differently.
    model = varied_model(tiny_model, job["base_dir"] / "varied")
    common_keys.write_test_set(job, range(10))
    (job["base_dir"] / "text.py").write_text(TEXT_REWARD)
    job.update(reward_func=["rewards.py:score", {"name": "text.py:checksum", "weight": 0.5}])
    # fp32 on any device: eval loads the final model in its saved dtype.
    job["config"] = dict(
        job["config"], model=str(model), eval_limit=8, max_steps=2, precision="fp32"
    )
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
        (scored["rewards"]["score"], scored["rewards"]["checksum"])
    )
    # The rows score differently, so the agreement is not one of constants.
    records = read_jsonl(run_dir / "eval" / "final-test-first8.samples.jsonl")
    assert len({r["rewards"]["checksum"] for r in records}) > 1
