"""A failure inside TRL while it trains, which no check can see, ends ``aworld-train train`` as
``check`` ends: one ``error:`` line naming the exception, where it was raised and the log
holding the traceback, exit 1, and a run marked failed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from aworld_train.rundir import RunDirectory
from aworld_train.testing.fixtures import manifest


def run_cli(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """``aworld-train ARGS`` in this process: its exit code, stdout and stderr."""
    from aworld_train.cli import main

    capsys.readouterr()
    try:
        main([str(arg) for arg in args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_checkpoint_trl_cannot_write_ends_the_run_in_one_line(
    job: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder: Path = job["base_dir"]
    job["config"] = dict(job["config"], max_steps=2, save_steps=2)
    job_file = folder / "job.yaml"
    job_file.write_text(yaml.safe_dump({
        "engine": "trl", "agent": job["agent"], "train_dataset": job["train_dataset"],
        "reward": job["reward_func"], "config": job["config"], "run_path": "runs"}))

    # Once the checks have passed, a file takes the place of the checkpoints folder: TRL's
    # trainer fails to make its output folder, as on a full or read-only disk.
    start = RunDirectory.start

    def start_then_block_checkpoints(self: RunDirectory, *args: Any, **kwargs: Any) -> None:
        start(self, *args, **kwargs)
        (self.path / "checkpoints").write_text("not a folder")

    monkeypatch.setattr(RunDirectory, "start", start_then_block_checkpoints)
    code, out, err = run_cli(capsys, "train", job_file)

    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    run_dir = next((folder / "runs").iterdir())
    log = run_dir / "error.log"
    assert re.fullmatch(
        r"error: engine 'trl' \(aworld-train-trl [\w.]+\) train raised "
        r"FileExistsError: \[Errno 17\] File exists: '.*/checkpoints' at os\.py:\d+ "
        r"\(from aworld_train_trl/training\.py:\d+\); "
        rf"the run failed, traceback in {re.escape(str(log))}", lines[0]), lines[0]
    assert manifest(run_dir)["status"] == "failed"
    traceback = log.read_text()
    assert "aworld_train_trl/training.py" in traceback and "trl/trainer/" in traceback
    assert f"run directory: {run_dir}" in out


def test_a_crash_in_a_worker_process_ends_the_run_in_one_line(
    job: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two CPU processes under accelerate (see test_training's two-process test).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    folder: Path = job["base_dir"]
    config = dict(job["config"], max_steps=2, resources={"gpus_per_node": 2})
    config["trl"] = dict(config["trl"], use_cpu=True, bf16=False)
    job_file = folder / "job.yaml"
    job_file.write_text(yaml.safe_dump({
        "engine": "trl", "agent": job["agent"], "train_dataset": job["train_dataset"],
        "reward": job["reward_func"], "config": config, "run_path": "runs"}))
    start = RunDirectory.start

    def start_then_block_checkpoints(self: RunDirectory, *args: Any, **kwargs: Any) -> None:
        start(self, *args, **kwargs)
        (self.path / "checkpoints").write_text("not a folder")

    monkeypatch.setattr(RunDirectory, "start", start_then_block_checkpoints)
    code, out, err = run_cli(capsys, "train", job_file)

    assert code == 1, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    run_dir = next((folder / "runs").iterdir())
    log = run_dir / "trl_workers.log"
    # The first process's failure, not the other's lost connection or the launcher's summary.
    assert re.fullmatch(
        r"error: accelerate launch of 2 trl processes exited with status 1: \[rank\d\]: "
        r"FileExistsError: \[Errno 17\] File exists: '.*/checkpoints' at os\.py:\d+ "
        rf"\(full output in {re.escape(str(log))}\)", lines[0]), lines[0]
    assert manifest(run_dir)["status"] == "failed"
    assert "aworld_train_trl/worker.py" in log.read_text()
