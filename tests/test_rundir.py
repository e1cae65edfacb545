"""The run directory: unique names, job.yaml redacted, manifest status, metrics and plots."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import manifest, only_run_dir, read_jsonl

from aworld_train import AgentTrainer
from aworld_train.errors import AWorldTrainError, RewardError, RunDirectoryError
from aworld_train.rewards import exact_match
from aworld_train.rundir import REDACTED, RunDirectory, redact, resolve_resume

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class RewardThatStops:
    """``exact_match`` until its ``stop_after``-th call, which raises ``error``."""

    def __init__(self, stop_after: int, error: BaseException) -> None:
        self.calls = 0
        self.stop_after = stop_after
        self.error = error

    def __call__(self, data_source: str, solution_str: str, ground_truth: str,
                 extra_info: dict[str, Any] | None = None) -> float:
        self.calls += 1
        if self.calls >= self.stop_after:
            raise self.error
        return exact_match(data_source, solution_str, ground_truth, extra_info)


def test_run_directories_are_unique_and_named_after_the_engine(tmp_path: Path) -> None:
    made = [RunDirectory.create(tmp_path / "runs", "toy").path for _ in range(5)]
    assert len(set(made)) == 5
    assert all(re.fullmatch(r"\d{8}-\d{6}-toy-[0-9a-f]{6}", path.name) for path in made)
    assert all(path.parent == (tmp_path / "runs").resolve() for path in made)


def test_run_path_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("not a folder")
    with pytest.raises(RunDirectoryError, match=r"run path .*runs is a file, not a directory"):
        RunDirectory.create(tmp_path / "runs", "toy")


def test_run_path_inside_a_file(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("not a folder")
    with pytest.raises(RunDirectoryError, match=r"cannot create run path .*runs/inner"):
        RunDirectory.create(tmp_path / "runs" / "inner", "toy")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_run_path_that_cannot_be_created() -> None:
    # Nobody, not even root, can make a folder in /proc.
    with pytest.raises(RunDirectoryError, match="cannot create run path /proc/aworld-train-runs"):
        RunDirectory.create("/proc/aworld-train-runs", "toy")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_run_path_that_is_not_writable(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(RunDirectoryError, match="is not writable"):
        RunDirectory.create(locked, "toy")


def test_trainer_rejects_a_bad_run_path_before_writing_anything(
    toy_job: dict[str, Any], tmp_path: Path
) -> None:
    (tmp_path / "runs").write_text("not a folder")
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(RunDirectoryError):
        AgentTrainer(**toy_job)
    assert sorted(tmp_path.rglob("*")) == before
    assert (tmp_path / "runs").read_text() == "not a folder"


def test_redact_hides_secret_keys_and_api_key_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-live-123456")
    monkeypatch.setenv("SHORT_API_KEY", "ab")
    data = {
        "llm_api_key": "sk-anything",
        "hub_token": "hf_abc",
        "db": {"password": "hunter2", "user": "me"},
        "empty_token": None,
        "url": "https://host/?key=sk-live-123456",
        "items": ["sk-live-123456", 3, {"secret": "x"}],
        "note": "ab stays",
    }
    assert redact(data) == {
        "llm_api_key": REDACTED,
        "hub_token": REDACTED,
        "db": {"password": REDACTED, "user": "me"},
        "empty_token": None,
        "url": f"https://host/?key={REDACTED}",
        "items": [REDACTED, 3, {"secret": REDACTED}],
        "note": "ab stays",
    }
    assert data["llm_api_key"] == "sk-anything", "the input is left alone"


@pytest.mark.parametrize("key", [
    "api_key", "llm_api_key", "OPENAI_API_KEY", "apiKey", "X-Api-Key", "token", "hub_token",
    "HF_TOKEN", "accessToken", "password", "client_secret", "aws_secret_access_key",
    "private_key", "Authorization", "Cookie", "credentials",
])
def test_secret_keys_are_redacted(key: str) -> None:
    assert redact({key: "value"}) == {key: REDACTED}


@pytest.mark.parametrize("key", [
    "llm_max_tokens", "max_new_tokens", "num_tokens", "tokens_per_second", "tokenizer",
    "pad_token", "eos_token", "max_completion_length", "monkey", "keyword",
])
def test_keys_that_only_look_like_secrets_are_kept(key: str) -> None:
    assert redact({key: 512}) == {key: 512}


def test_job_yaml_is_the_resolved_job_with_secrets_redacted(
    toy_job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_API_KEY", "search-key-98765")
    toy_job["agent"] = {"name": "adder", "llm_api_key": "sk-agent-secret", "llm_max_tokens": 64,
                        "system_prompt": "Use search-key-98765 when asked."}
    trainer = AgentTrainer(**toy_job)
    text = (trainer.run_dir.path / "job.yaml").read_text()
    assert "sk-agent-secret" not in text and "search-key-98765" not in text
    job = yaml.safe_load(text)
    assert job["engine"] == "toy"
    assert job["agent"]["llm_api_key"] == REDACTED
    assert job["agent"]["system_prompt"] == f"Use {REDACTED} when asked."
    assert job["agent"]["llm_max_tokens"] == 64
    assert job["reward"] == "exact_match"
    assert job["train_dataset"] == toy_job["train_dataset"]
    assert job["config"]["max_steps"] == 6 and job["config"]["batch_size"] == 4


def test_completed_run_has_manifest_metrics_and_plots(toy_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**toy_job)
    run_dir = trainer.run_dir.path
    final = trainer.train()
    data = manifest(run_dir)
    assert data["status"] == "completed"
    assert data["engine"] == "toy"
    assert data["versions"]["aworld-train"] == "0.1.0"
    assert data["versions"]["aworld-train-toy"] == "0.1.0"
    assert data["started_at"] <= data["ended_at"]
    assert data["final_metrics"] == final
    assert data["plots"] == ["reward.png", "loss.png"]
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert all({"reward", "loss", "time"} <= set(r) for r in records)
    for name in ("reward.png", "loss.png"):
        assert (run_dir / name).read_bytes()[:8] == PNG_MAGIC
    assert not list(run_dir.glob("*.tmp")), "the manifest is replaced whole"


def test_a_run_that_raises_while_training_is_marked_failed(toy_job: dict[str, Any]) -> None:
    toy_job["reward_func"] = RewardThatStops(10, ZeroDivisionError("planted"))
    trainer = AgentTrainer(**toy_job)
    with pytest.raises(RewardError, match="planted"):
        trainer.train()
    data = manifest(trainer.run_dir.path)
    assert data["status"] == "failed"
    assert data["error"].startswith("RewardError:")
    assert data["final_metrics"]["step"] == 2, "the steps logged before the failure"


def test_keyboard_interrupt_marks_the_run_interrupted(toy_job: dict[str, Any]) -> None:
    toy_job["reward_func"] = RewardThatStops(10, KeyboardInterrupt())
    trainer = AgentTrainer(**toy_job)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert manifest(trainer.run_dir.path)["status"] == "interrupted"


SLOW_TRAINING = """
import sys, time
from aworld_train import AgentTrainer

def slow_match(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(0.005)
    return float(solution_str == ground_truth)

rows = [{"prompt": f"q{i}", "ground_truth": str(i)} for i in range(4)]
trainer = AgentTrainer(train_dataset=rows, reward_func=slow_match, run_path=sys.argv[1],
                       train_engine_name="toy", config={"max_steps": 100000, "batch_size": 1})
trainer.train()
"""


def test_sigterm_to_a_training_process_marks_the_run_interrupted(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    process = subprocess.Popen([sys.executable, "-c", SLOW_TRAINING, str(runs)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        metrics = None
        while time.monotonic() < deadline and process.poll() is None:
            found = list(runs.glob("*/metrics.jsonl"))
            if found and found[0].stat().st_size > 0:
                metrics = found[0]
                break
            time.sleep(0.1)
        assert metrics is not None, process.stderr.read() if process.poll() is not None else ""
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode != 0
    assert "interrupted by SIGTERM" in stderr
    data = manifest(metrics.parent)
    assert data["status"] == "interrupted"
    assert data["error"] == "Interrupted: training interrupted by SIGTERM"
    assert data["final_metrics"]["step"] >= 1


def test_resume_continues_from_the_last_checkpoint(toy_job: dict[str, Any]) -> None:
    toy_job["config"] = {"max_steps": 20, "batch_size": 4, "save_steps": 5}
    # The sample-row check makes one call, each step four: call 51 is in step 13.
    interrupted = dict(toy_job, reward_func=RewardThatStops(51, KeyboardInterrupt()))
    first = AgentTrainer(**interrupted)
    with pytest.raises(KeyboardInterrupt):
        first.train()
    first_dir = first.run_dir.path
    assert manifest(first_dir)["status"] == "interrupted"
    assert sorted(p.name for p in first_dir.glob("checkpoint-*")) == ["checkpoint-10",
                                                                     "checkpoint-5"]

    resumed = AgentTrainer(**toy_job, resume=first_dir.name)
    resumed.train()
    resumed_dir = resumed.run_dir.path
    assert resumed_dir != first_dir, "a run directory is never reused"
    assert [r["step"] for r in read_jsonl(resumed_dir / "metrics.jsonl")] == list(range(11, 21))
    data = manifest(resumed_dir)
    assert data["status"] == "completed"
    assert data["resumed_from"] == str(first_dir)

    straight = AgentTrainer(**toy_job)
    straight.train()
    policy = json.loads((resumed_dir / "model" / "policy.json").read_text())
    expected = json.loads((straight.run_dir.path / "model" / "policy.json").read_text())
    assert policy["logits"] == expected["logits"], "resuming is the same as never stopping"


def test_resume_of_a_missing_or_completed_run(toy_job: dict[str, Any]) -> None:
    with pytest.raises(RunDirectoryError, match="no run to resume at nowhere"):
        AgentTrainer(**toy_job, resume="nowhere")
    trainer = AgentTrainer(**toy_job)
    trainer.train()
    with pytest.raises(RunDirectoryError, match="already completed; nothing to resume"):
        resolve_resume(trainer.run_dir.path, toy_job["run_path"])


def test_nothing_is_written_outside_the_run_directory(
    toy_job: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    trainer = AgentTrainer(**toy_job)
    trainer.train()
    toy_job["reward_func"] = "no_such_reward"
    with pytest.raises(AWorldTrainError):
        AgentTrainer(**toy_job)
    outside = [p for p in tmp_path.rglob("*") if toy_job["run_path"] not in (p, *p.parents)]
    assert outside == [work]
    statuses = sorted(manifest(run)["status"] for run in toy_job["run_path"].iterdir())
    assert statuses == ["completed", "failed"]


def test_one_run_directory_per_trainer(toy_job: dict[str, Any]) -> None:
    AgentTrainer(**toy_job).train()
    assert only_run_dir(toy_job["run_path"]).name.split("-")[2] == "toy"
