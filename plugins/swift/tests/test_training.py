"""GRPO and SFT end to end on the tiny model through AgentTrainer, and resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.testing.fixtures import (
    DIGITS,
    assert_interrupted_run_resumes,
    assert_loads_without_peft,
    manifest,
    read_jsonl,
)


@pytest.mark.slow
def test_grpo_trains_reports_checkpoints_and_saves(job: dict[str, Any], tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    trainer = AgentTrainer(**job)
    (tmp_path / "calls.jsonl").unlink()  # drop the calls made by the checks
    final = trainer.train()
    run_dir = trainer.run_dir.path

    assert manifest(run_dir)["status"] == "completed"
    steps = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in steps] == [1, 2, 3, 4]
    assert all({"loss", "rewards/score/mean", "completions/mean_length"} <= m.keys() for m in steps)
    assert final["step"] == 4
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").glob("checkpoint-*"))
    assert checkpoints == ["checkpoint-2", "checkpoint-4"]

    # 4 steps x 4 completions, each scored against the ground truth of its own row.
    calls = read_jsonl(tmp_path / "calls.jsonl")
    assert len(calls) == 16
    for call in calls:
        index = call["extra_info"]["index"]
        assert call["ground_truth"] == str(DIGITS[index]) == call["extra_info"]["digit"]
    assert {len(call["solution"]) for call in calls} <= {0, 1, 2, 3, 4}

    model = AutoModelForCausalLM.from_pretrained(run_dir / "model")
    tokenizer = AutoTokenizer.from_pretrained(run_dir / "model")
    assert model.config.vocab_size == len(tokenizer)
    assert not (run_dir / "model" / "optimizer.pt").exists()


def test_the_hub_token_reaches_swift_only_through_the_environment_and_output_stays_in_the_log(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """swift logs in to ModelScope with the token it finds; here that login records the token
    instead of contacting the hub. The token must never be written: swift saves its arguments
    to args.json and pickles them into every training_args.bin."""
    import os

    from swift.hub.hub import MSHub

    token = "ms-planted-token-2b7e151628aed2a6"
    logins: list[str | None] = []

    def try_login(cls: type, token: str | None = None) -> bool:
        logins.append(token or os.environ.get("MODELSCOPE_API_TOKEN"))
        return False

    monkeypatch.setattr(MSHub, "try_login", classmethod(try_login))
    monkeypatch.delenv("MODELSCOPE_API_TOKEN", raising=False)
    job["config"] = dict(job["config"], max_steps=2, swift={"template": "qwen", "hub_token": token})
    trainer = AgentTrainer(**job)
    assert token not in logins  # the check built swift's arguments without it
    trainer.train()
    run_dir = trainer.run_dir.path

    assert token in logins
    assert (run_dir / "checkpoints" / "checkpoint-2" / "training_args.bin").is_file()
    written = [path for path in run_dir.rglob("*") if path.is_file()]
    assert [path for path in written if token.encode() in path.read_bytes()] == []
    # The terminal gets no swift log lines, per-step dicts or library progress bars ...
    out, err = capfd.readouterr()
    for noise in ("[INFO:swift]", "'loss':", "Loading weights", "Map", "Writing model shards"):
        assert noise not in out + err
    # ... which the run's swift.log keeps.
    log = (run_dir / "swift.log").read_text()
    assert "[INFO:swift]" in log and "'loss':" in log


@pytest.mark.slow
def test_sft_with_lora_keeps_the_adapter_merges_it_and_evaluates_at_the_end(
    job: dict[str, Any], tmp_path: Path
) -> None:
    """LoRA through the section's own keys; evaluation once, after the last step (swift's
    default would evaluate at every save_steps: here step 2 too)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    job["config"] = dict(
        job["config"],
        algorithm="sft",
        max_steps=3,
        save_steps=2,
        swift={"template": "qwen", "tuner_type": "lora", "lora_rank": 4, "lora_alpha": 8},
    )
    test_rows = [{"prompt": f"Repeat: {d}", "ground_truth": str(d)} for d in (0, 7)]
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in test_rows))
    job["test_dataset"] = "test.jsonl"
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path

    assert manifest(run_dir)["status"] == "completed"
    assert manifest(run_dir)["settings"]["lora"] == {
        "rank": 4,
        "alpha": 8.0,
        "dropout": 0.05,
        "target_modules": "all-linear",
    }
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    losses = [m["loss"] for m in metrics if "loss" in m]
    assert len(losses) == 3 and all(loss > 0 for loss in losses)
    assert [m["step"] for m in metrics if "eval_loss" in m] == [3]
    first = json.loads((run_dir / "data" / "train.jsonl").read_text().splitlines()[0])
    assert first["messages"][-1] == {"role": "assistant", "content": "3"}
    adapter = run_dir / "adapter"
    base = AutoModelForCausalLM.from_pretrained(job["config"]["model"])
    tuned = PeftModel.from_pretrained(base, adapter)
    assert tuned.peft_config["default"].r == 4
    assert_loads_without_peft(run_dir / "model")


@pytest.mark.slow
def test_interrupted_run_resumes_from_its_last_checkpoint(job: dict[str, Any]) -> None:
    assert_interrupted_run_resumes(job)


@pytest.mark.slow
def test_two_cpu_processes_train_one_job_through_torchrun(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # CPU processes on any machine: the workers see no GPU (on a one-GPU machine rank 1 would
    # otherwise ask for cuda:1), and the job asks for the CPU itself, since this process may
    # have seen a GPU already and then resolves the job for one.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    job["config"] = dict(job["config"], max_steps=2, batch_size=2, resources={"gpus_per_node": 2})
    job["config"]["swift"] = dict(job["config"]["swift"], use_cpu=True, torch_dtype="float32")
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path

    job_file = json.loads((run_dir / "swift_job.json").read_text())
    assert job_file["config"]["nproc_per_node"] == 2
    metrics = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in metrics] == [1, 2]
    # Each process takes one prompt (2 completions) per step: 2 steps x 2 processes cover 4 of
    # the 16 rows, twice what one process covers.
    assert metrics[-1]["epoch"] == pytest.approx(0.25)
    assert manifest(run_dir)["status"] == "completed"
    assert (run_dir / "model" / "config.json").is_file()
    # The rollout samples come from the main process alone: 4 of each step's 4 completions.
    assert [s["step"] for s in read_jsonl(run_dir / "samples.jsonl")] == [1] * 4 + [2] * 4


@pytest.mark.slow
def test_grpo_survives_completions_that_end_before_their_first_token(tmp_path: Path) -> None:
    """A random model over a ~100-token vocabulary ends some completions at once; ms-swift 4.6
    alone then stops at step 2 with 'Size does not match at dimension 1' (see patches.py)."""
    import random
    import string

    from aworld_train.engine.testing import build_tiny_model

    model = build_tiny_model(tmp_path / "model", hidden_size=128, alphabet=string.printable)
    rng = random.Random(0)
    rows = [
        {"prompt": f"Repeat: {d}", "ground_truth": d}
        for d in (str(rng.randrange(10)) for _ in range(2000))
    ]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    trainer = AgentTrainer(
        # The prompt as ms-swift's qwen template writes it by default: with the seed below it
        # samples completions that end at their first token.
        agent={
            "name": "tiny",
            "llm_temperature": 1.0,
            "system_prompt": "You are a helpful assistant.",
        },
        config={
            "algorithm": "grpo",
            "model": str(model),
            "max_steps": 3,
            "batch_size": 64,
            "num_generations": 8,
            "max_completion_length": 8,
            "learning_rate": 1e-3,
            "logging_steps": 1,
            "save_steps": 3,
            "seed": 0,
            "swift": {"template": "qwen"},
        },
        reward_func="exact_match",
        train_dataset="train.jsonl",
        run_path=tmp_path / "runs",
        train_engine_name="swift",
        base_dir=tmp_path,
    )
    trainer.train()
    run_dir = trainer.run_dir.path

    assert manifest(run_dir)["status"] == "completed"
    steps = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in steps] == [1, 2, 3]
    assert min(m["completions/min_length"] for m in steps) == 0.0


@pytest.mark.slow
def test_dpo_prefers_the_ground_truth_over_the_rejected_reply(
    job: dict[str, Any], tmp_path: Path
) -> None:
    rows = [
        {"prompt": f"Repeat: {d}", "ground_truth": str(d), "rejected": str((d + 1) % 10)}
        for d in DIGITS
    ]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    job["config"] = dict(job["config"], algorithm="dpo", max_steps=2, save_steps=2)
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path

    assert manifest(run_dir)["status"] == "completed"
    first = json.loads((run_dir / "data" / "train.jsonl").read_text().splitlines()[0])
    assert first["messages"][-1] == {"role": "assistant", "content": "3"}
    assert first["rejected_response"] == "4"
    steps = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "rewards/margins" in m]
    assert [m["step"] for m in steps] == [1, 2]
    assert (run_dir / "model" / "model.safetensors").is_file()
