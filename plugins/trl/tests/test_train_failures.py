"""A failure inside TRL while it trains, which no check can see, ends ``aworld-train train`` in
one ``error:`` line, exit 1, and a run marked failed: in TRL's trainer, and in one of the worker
processes accelerate launches."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aworld_train.testing.fixtures import manifest, run_cli
from aworld_train.testing.train_failures import (
    TrainFailureSuite,
    block_checkpoints,
    write_job_file,
)


class TestTrlTrainFailures(TrainFailureSuite):
    engine_name = "trl"
    # TRL's trainer fails to make its output folder.
    raised_from = r"aworld_train_trl/training\.py"
    traceback_holds = ("aworld_train_trl/training.py", "trl/trainer/")


@pytest.mark.slow
def test_a_crash_in_a_worker_process_ends_the_run_in_one_line(
    job: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two CPU processes under accelerate (see test_training's two-process test).
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    config = dict(job["config"], max_steps=2, resources={"gpus_per_node": 2})
    config["trl"] = dict(config["trl"], use_cpu=True, bf16=False)
    job_file = write_job_file(job, "trl", config)
    block_checkpoints(monkeypatch)
    code, out, err = run_cli(capsys, "train", job_file)

    assert code == 1, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    run_dir = next((job_file.parent / "runs").iterdir())
    log = run_dir / "trl_workers.log"
    # The first process's failure, not the other's lost connection or the launcher's summary.
    assert re.fullmatch(
        r"error: accelerate launch of 2 trl processes exited with status 1: \[rank\d\]: "
        r"FileExistsError: \[Errno 17\] File exists: '.*/checkpoints' at os\.py:\d+ "
        rf"\(full output in {re.escape(str(log))}\)",
        lines[0],
    ), lines[0]
    assert manifest(run_dir)["status"] == "failed"
    assert "aworld_train_trl/worker.py" in log.read_text()
