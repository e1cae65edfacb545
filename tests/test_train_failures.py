"""``train`` ends like ``check``: an exception inside the engine ends the run ``failed`` with one
``error:`` line (what raised, the exception's type and message, where, the log holding the
traceback), exit 1; ``--debug`` shows the traceback; Python users get the same line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from aworld_train import AgentTrainer
from aworld_train.errors import AWorldTrainError, RewardError, TrainingCrash
from helpers import (
    ARITHMETIC,
    ENV_VARS,
    RecordingProcessor,
    lay_out_engine,
    manifest,
    only_run_dir,
    run_cli,
    write_jsonl,
)

EXECUTABLE = Path(sys.executable).with_name("aworld-train")

# An engine whose train fails inside the standard library, called from its own code.
CRASHING_ENGINE = """import json

from aworld_train import hookimpl


@hookimpl
def train(ctx):
    ctx.metrics.log(1, {"loss": 1.0})
    return json.loads("{broken")
"""
CRASH_LINE = 9  # the engine's line above that calls json.loads


def write_job(folder: Path, engine: str) -> Path:
    """A job for ``engine`` in ``folder``: the arithmetic rows, no reward."""
    write_jsonl(folder / "train.jsonl", ARITHMETIC)
    job = {
        "engine": engine,
        "agent": {"name": "adder"},
        "train_dataset": "train.jsonl",
        "config": {"max_steps": 2, "batch_size": 4},
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def aworld_train(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXECUTABLE), *map(str, args)], capture_output=True, text=True, env=env, timeout=120
    )


def the_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.slow
def test_an_engine_crash_in_train_is_one_line_naming_the_exception_where_and_the_log(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    lay_out_engine(site, "crashy", CRASHING_ENGINE, version="1.0")
    env = {**{k: v for k, v in os.environ.items() if k not in ENV_VARS}, "PYTHONPATH": str(site)}
    job = write_job(tmp_path, "crashy")

    result = aworld_train("train", job, env=env)
    assert result.returncode == 1, (result.stdout, result.stderr)
    run_dir = only_run_dir(tmp_path / "runs")
    log = run_dir / "error.log"
    line = the_error_line(result.stderr)
    assert re.fullmatch(
        r"error: engine 'crashy' \(aworld-train-crashy 1\.0\) train raised JSONDecodeError: "
        r"Expecting property name enclosed in double quotes: line 1 column 2 \(char 1\) "
        rf"at json/decoder\.py:\d+ \(from aworld_train_crashy\.py:{CRASH_LINE}\); "
        rf"the run failed, traceback in {re.escape(str(log))}",
        line,
    ), line
    assert f"run directory: {run_dir}" in result.stdout

    data = manifest(run_dir)
    assert data["status"] == "failed" and data["error_log"] == "error.log"
    assert data["error"].startswith("JSONDecodeError: Expecting property name")
    traceback = log.read_text()
    assert traceback.startswith("Traceback (most recent call last):")
    assert f'aworld_train_crashy.py", line {CRASH_LINE}, in train' in traceback
    assert 'return json.loads("{broken")' in traceback
    assert (run_dir / "metrics.jsonl").is_file(), "what was logged before the crash is kept"

    debug = aworld_train("train", job, "--debug", env=env)
    assert debug.returncode == 1
    assert "Traceback (most recent call last):" in debug.stderr
    assert "The above exception was the direct cause" in debug.stderr, "the engine's own frames"
    assert 'json.loads("{broken")' in debug.stderr
    assert (
        debug.stderr.strip()
        .splitlines()[-1]
        .startswith("error: engine 'crashy' (aworld-train-crashy 1.0) train raised JSONDecodeError")
    )


class LeakyCrash(RecordingProcessor):
    """Fails inside its own train, with a secret from the environment in a two-line message."""

    def train(self) -> Any:
        self.context.metrics.log(1, {"loss": 1.0})
        raise RuntimeError("search refused key\n" + os.environ["SEARCH_API_KEY"])


def test_python_users_get_the_same_line_with_the_exception_chained_and_secrets_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_API_KEY", "sk-planted-crash-4242")
    AgentTrainer.register_processor("leaky", LeakyCrash)
    trainer = AgentTrainer(
        agent={"name": "a"},
        train_dataset=ARITHMETIC,
        run_path=tmp_path / "runs",
        train_engine_name="leaky",
    )
    with pytest.raises(TrainingCrash) as raised:
        trainer.train()
    run_dir = trainer.run_dir.path
    assert str(raised.value) == (
        "engine 'leaky' (registered in-process) train raised RuntimeError: search refused key "
        f"*** at test_train_failures.py:{LeakyCrash.train.__code__.co_firstlineno + 2}; "
        f"the run failed, traceback in {run_dir / 'error.log'}"
    )
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert isinstance(raised.value, AWorldTrainError), "the project's own error, as every error"
    assert manifest(run_dir)["status"] == "failed"
    log = (run_dir / "error.log").read_text()
    assert "RuntimeError: search refused key\n***" in log
    assert "sk-planted-crash-4242" not in log + (run_dir / "manifest.json").read_text()


class ExitsInTrain(RecordingProcessor):
    def train(self) -> Any:
        sys.exit(3)  # a library that ends the process instead of raising


def test_an_engine_that_exits_ends_the_run_failed_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    AgentTrainer.register_processor("quitter", ExitsInTrain)
    job = write_job(tmp_path, "quitter")
    code, out, err = run_cli(capsys, "train", job)
    assert code == 1, err
    run_dir = only_run_dir(tmp_path / "runs")
    assert the_error_line(err).startswith(
        "error: engine 'quitter' (registered in-process) train raised SystemExit: 3 at "
        "test_train_failures.py:"
    )
    assert manifest(run_dir)["status"] == "failed"
    assert "sys.exit(3)" in (run_dir / "error.log").read_text()


class RefusesInTrain(RecordingProcessor):
    def train(self) -> Any:
        raise RewardError("reward 'score' returned None on row 3")


def test_a_mistake_the_engine_names_in_train_keeps_its_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    AgentTrainer.register_processor("refuser", RefusesInTrain)
    job = write_job(tmp_path, "refuser")
    code, _out, err = run_cli(capsys, "train", job)
    assert code == 2
    assert the_error_line(err) == "error: reward 'score' returned None on row 3"
    run_dir = only_run_dir(tmp_path / "runs")
    assert manifest(run_dir)["status"] == "failed"
    assert "RewardError" in (run_dir / "error.log").read_text(), "the traceback is kept too"


class Interrupts(RecordingProcessor):
    def train(self) -> Any:
        raise KeyboardInterrupt


def test_an_interrupted_run_writes_no_error_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    AgentTrainer.register_processor("stopper", Interrupts)
    code, _out, err = run_cli(capsys, "train", write_job(tmp_path, "stopper"))
    assert code == 130, err
    run_dir = only_run_dir(tmp_path / "runs")
    assert manifest(run_dir)["status"] == "interrupted"
    assert not (run_dir / "error.log").exists()
