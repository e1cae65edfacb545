"""GRPO and SFT end to end on the tiny model through AgentTrainer, resume, and two processes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.testing.fixtures import assert_interrupted_run_resumes, manifest, read_jsonl


def _assert_model_reloads(model_dir: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    assert model.config.vocab_size == len(tokenizer)
    assert tokenizer.decode(tokenizer("Repeat: 7")["input_ids"]) == "Repeat: 7"


# A hub token planted in the job's trl section: the training processes get it as HF_TOKEN, and
# no file of the run holds it (TRL pickles its arguments into every training_args.bin).
PLANTED_TOKEN = "hf_PlantedTokenThatMustNotReachDisk"


def _plant_hub_token(job: dict[str, Any]) -> None:
    job["config"]["trl"] = dict(job["config"]["trl"], hub_token=PLANTED_TOKEN)


def _assert_token_kept_off_disk(run_dir: Path, calls: list[dict[str, Any]]) -> None:
    files = [path for path in run_dir.rglob("*") if path.is_file()]
    assert any(path.name == "training_args.bin" for path in files)
    holding = [str(path) for path in files if PLANTED_TOKEN.encode() in path.read_bytes()]
    assert holding == []
    assert {call["hf_token"] for call in calls} == {PLANTED_TOKEN}
    assert os.environ.get("HF_TOKEN") != PLANTED_TOKEN


@pytest.mark.slow
def test_grpo_trains_reports_checkpoints_and_saves(job: dict[str, Any], tmp_path: Path) -> None:
    _plant_hub_token(job)
    trainer = AgentTrainer(**job)
    (tmp_path / "calls.jsonl").unlink()  # drop the calls made by the checks
    final = trainer.train()
    run_dir = trainer.run_dir.path

    metrics = read_jsonl(run_dir / "metrics.jsonl")
    train_steps = [m for m in metrics if "reward" in m]
    assert [m["step"] for m in train_steps] == [1, 2, 3, 4]
    for entry in train_steps:
        assert {"loss", "reward", "reward_std", "rewards/score/mean"} <= entry.keys()
        assert {"completions/mean_length"} <= entry.keys()
    assert final["step"] == 4
    assert manifest(run_dir)["status"] == "completed"
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("checkpoint-*")) == [
        "checkpoint-2",
        "checkpoint-4",
    ]
    _assert_model_reloads(run_dir / "model")

    calls = read_jsonl(tmp_path / "calls.jsonl")
    assert len(calls) == 4 * 4  # 4 steps x batch_size 4 completions
    for call in calls:
        assert call["ground_truth"] == call["extra_info"]["digit"]
        assert isinstance(call["extra_info"]["index"], int)
    # Each prompt's group of num_generations completions is scored against that prompt's answer.
    indices = [call["extra_info"]["index"] for call in calls]
    assert indices[0::2] == indices[1::2]
    _assert_token_kept_off_disk(run_dir, calls)


@pytest.mark.slow
def test_sft_trains_on_prompt_and_ground_truth(job: dict[str, Any]) -> None:
    job["config"] = dict(job["config"], algorithm="sft", learning_rate=5e-3)
    job["config"].pop("num_generations")
    job["config"]["trl"] = {}
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path

    losses = [m["loss"] for m in read_jsonl(run_dir / "metrics.jsonl") if "loss" in m]
    assert len(losses) == 4
    assert losses[-1] < losses[0]
    assert (run_dir / "checkpoints" / "checkpoint-4" / "trainer_state.json").is_file()
    assert manifest(run_dir)["status"] == "completed"
    _assert_model_reloads(run_dir / "model")


@pytest.mark.slow
def test_interrupted_run_resumes_from_its_last_checkpoint(job: dict[str, Any]) -> None:
    assert_interrupted_run_resumes(job)


@pytest.mark.slow
def test_two_cpu_processes_train_one_job(
    job: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CPU processes on any machine: the workers see no GPU (on a one-GPU machine both would
    # otherwise take cuda:0 and cuda:1), and the job asks for the CPU itself, since this process
    # may have seen a GPU already and then resolves the job for one.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    job["config"] = dict(job["config"], max_steps=2, resources={"gpus_per_node": 2})
    job["config"]["trl"] = dict(job["config"]["trl"], use_cpu=True, bf16=False)
    _plant_hub_token(job)
    trainer = AgentTrainer(**job)
    (tmp_path / "calls.jsonl").unlink()  # drop the call made by the checks
    final = trainer.train()
    run_dir = trainer.run_dir.path

    assert final["num_processes"] == 2
    metrics = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in metrics] == [1, 2]
    # Each process generates 4 completions (2 prompts) per step: 2 steps x 2 processes x 2
    # prompts is half of the 16 rows, twice what one process covers.
    assert metrics[-1]["epoch"] == pytest.approx(0.5)
    assert manifest(run_dir)["status"] == "completed"
    _assert_model_reloads(run_dir / "model")
    assert (run_dir / "trl_job.json").is_file()
    _assert_token_kept_off_disk(run_dir, read_jsonl(tmp_path / "calls.jsonl"))
