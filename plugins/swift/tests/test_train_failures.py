"""A failure inside ms-swift while it trains, which no check can see, ends ``aworld-train train`` as
``check`` ends: one ``error:`` line naming the exception, where it was raised and the log
holding the traceback, exit 1, and a run marked failed."""

from __future__ import annotations

import re
import shutil
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


def test_a_checkpoint_swift_cannot_write_ends_the_run_in_one_line(
    job: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    folder: Path = job["base_dir"]
    job["config"] = dict(job["config"], max_steps=2, save_steps=2)
    job_file = folder / "job.yaml"
    job_file.write_text(yaml.safe_dump({
        "engine": "swift", "agent": job["agent"], "train_dataset": job["train_dataset"],
        "reward": job["reward_func"], "config": job["config"], "run_path": "runs"}))

    # Once the checks have passed, a file takes the place of the checkpoints folder: ms-swift's
    # arguments fail to make their output folder, as on a full or read-only disk.
    start = RunDirectory.start

    def start_then_block_checkpoints(self: RunDirectory, *args: Any, **kwargs: Any) -> None:
        start(self, *args, **kwargs)
        shutil.rmtree(self.path / "checkpoints", ignore_errors=True)  # the checks' empty one
        (self.path / "checkpoints").write_text("not a folder")

    monkeypatch.setattr(RunDirectory, "start", start_then_block_checkpoints)
    code, out, err = run_cli(capsys, "train", job_file)

    assert code == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    run_dir = next((folder / "runs").iterdir())
    log = run_dir / "error.log"
    assert re.fullmatch(
        r"error: engine 'swift' \(aworld-train-swift [\w.]+\) train raised "
        r"FileExistsError: \[Errno 17\] File exists: '.*/checkpoints' at os\.py:\d+ "
        r"\(from aworld_train_swift/\w+\.py:\d+\); "
        rf"the run failed, traceback in {re.escape(str(log))}", lines[0]), lines[0]
    assert manifest(run_dir)["status"] == "failed"
    traceback = log.read_text()
    assert "aworld_train_swift/training.py" in traceback and "/swift/" in traceback
    assert f"run directory: {run_dir}" in out
