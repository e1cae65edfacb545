"""A failure inside an engine while it trains, which no check can see: a test class and helpers
for an engine's tests that ``aworld-train train`` then ends as ``check`` ends, in one ``error:``
line naming the exception, where it was raised and the log holding the traceback, exit 1, and a
run marked failed.

In an engine's own tests (its ``conftest.py`` gives the ``job`` fixture of
:func:`aworld_train.testing.fixtures.repeat_digit_job`)::

    from aworld_train.testing.train_failures import TrainFailureSuite

    class TestMyEngineTrainFailures(TrainFailureSuite):
        engine_name = "mine"
        raised_from = r"aworld_train_mine/training\\.py"   # the engine's file that called os
        traceback_holds = ("aworld_train_mine/training.py", "mine_library/")

:func:`write_job_file` and :func:`block_checkpoints` build an engine's own failure cases.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from aworld_train.run.directory import RunDirectory
from aworld_train.testing.fixtures import manifest, run_cli


def write_job_file(job: dict[str, Any], engine: str, config: dict[str, Any] | None = None) -> Path:
    """``job`` (``AgentTrainer`` keyword arguments) as ``job.yaml`` in its ``base_dir``, on
    ``engine``, with ``config`` in place of its config where given, runs under ``runs``."""
    path: Path = job["base_dir"] / "job.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "engine": engine,
                "agent": job["agent"],
                "train_dataset": job["train_dataset"],
                "reward": job["reward_func"],
                "config": job["config"] if config is None else config,
                "run_path": "runs",
            }
        )
    )
    return path


def block_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the checks have passed and the run directory has started, a file takes the place of
    its checkpoints folder (the checks' empty one removed): the engine fails to make its output
    folder, as on a full or read-only disk."""
    start = RunDirectory.start

    def start_then_block_checkpoints(self: RunDirectory, *args: Any, **kwargs: Any) -> None:
        start(self, *args, **kwargs)
        shutil.rmtree(self.path / "checkpoints", ignore_errors=True)
        (self.path / "checkpoints").write_text("not a folder")

    monkeypatch.setattr(RunDirectory, "start", start_then_block_checkpoints)


class TrainFailureSuite:
    """What every engine's ``train`` does with a failure inside it. Subclass it and set
    :attr:`engine_name`, :attr:`raised_from` and :attr:`traceback_holds`."""

    #: The engine's name, as the job's ``engine``.
    engine_name: ClassVar[str] = ""
    #: A regular expression for the engine's own file that called os when a checkpoint could
    #: not be written: the error line names it as ``(from FILE:LINE)``.
    raised_from: ClassVar[str] = ""
    #: Texts the traceback in the run's error.log holds (the engine's file, its library's).
    traceback_holds: ClassVar[tuple[str, ...]] = ()

    @pytest.mark.slow
    def test_a_checkpoint_the_engine_cannot_write_ends_the_run_in_one_line(
        self,
        job: dict[str, Any],
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Two steps, a checkpoint due at step 2 and the checkpoints folder blocked
        (:func:`block_checkpoints`): exit 1, one line on stderr naming the engine, the
        exception, where os raised it and the engine's file that called it, and the error.log
        holding the traceback; the run marked failed, its directory on stdout."""
        engine = self.engine_name
        job["config"] = dict(job["config"], max_steps=2, save_steps=2)
        job_file = write_job_file(job, engine)
        block_checkpoints(monkeypatch)
        code, out, err = run_cli(capsys, "train", job_file)

        assert code == 1, err
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        run_dir = next((job_file.parent / "runs").iterdir())
        log = run_dir / "error.log"
        assert re.fullmatch(
            rf"error: engine '{engine}' \(aworld-train-{engine} [\w.]+\) train raised "
            r"FileExistsError: \[Errno 17\] File exists: '.*/checkpoints' at os\.py:\d+ "
            rf"\(from {self.raised_from}:\d+\); "
            rf"the run failed, traceback in {re.escape(str(log))}",
            lines[0],
        ), lines[0]
        assert manifest(run_dir)["status"] == "failed"
        traceback = log.read_text()
        assert all(part in traceback for part in self.traceback_holds), traceback
        assert f"run directory: {run_dir}" in out
