"""What an engine promises of a resumed run (the ``resume_support`` hook): ``train`` refuses
``--resume`` on an engine that cannot resume, the manifest keeps the promise, and ``show`` marks
a run an engine only continued as not bit-exact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aworld_train.testing.fixtures import one_error_line, run_cli
from helpers import lay_out_engine, manifest
from test_cli import write_job

# The toy engine, answering resume_support with {answer}.
RESUMING_TOY = """
from aworld_train import hookimpl
from aworld_train_toy.engine import check_config, check_dataset, check_reward, train


@hookimpl
def resume_support():
    return {answer!r}
"""


def _stopped_run(tmp_path: Path, engine: str) -> Path:
    """A run directory a stopped run of ``engine`` left, as far as ``--resume`` reads it."""
    run = tmp_path / "runs" / f"{engine}-stopped"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"status": "interrupted", "engine": engine}))
    return run


@pytest.fixture
def engine_answering(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Install an engine that answers ``resume_support`` with what it is given, named after
    the answer (a module imported by an earlier test stays imported)."""

    def install(answer: str | None) -> str:
        name = f"resumer{answer or ''}"
        site = tmp_path / "site"
        site.mkdir()
        lay_out_engine(site, name, RESUMING_TOY.format(answer=answer))
        monkeypatch.syspath_prepend(str(site))
        return name

    return install


def test_check_refuses_resume_on_an_engine_that_cannot_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engine_answering
) -> None:
    engine = engine_answering("none")
    job = write_job(tmp_path, engine=engine)
    run = _stopped_run(tmp_path, engine)
    code, _, err = run_cli(capsys, "train", job, "--resume", str(run))
    line = one_error_line(code, err)
    assert "engine resumernone cannot resume a run (its resume_support is 'none')" in line
    assert "without --resume" in line


def test_an_answer_outside_the_three_is_a_bug_in_the_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engine_answering
) -> None:
    engine = engine_answering("mostly")
    job = write_job(tmp_path, engine=engine)
    code, _, err = run_cli(capsys, "train", job, "--resume", str(_stopped_run(tmp_path, engine)))
    assert "resume_support returned 'mostly'" in one_error_line(code, err)


def test_a_run_of_another_engine_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, engine="toy")
    other = _stopped_run(tmp_path, "swift")
    before = (other / "manifest.json").read_text()
    code, _, err = run_cli(capsys, "train", job, "--resume", str(other))
    assert one_error_line(code, err) == (
        f"error: run {other} was trained on engine 'swift', and this job trains on 'toy': "
        "resume it with engine: swift, or train without --resume"
    )
    assert (other / "manifest.json").read_text() == before, "no continuation is linked"
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["swift-stopped"]


@pytest.mark.parametrize(("answer", "kept"), [("continued", "continued"), (None, "exact")])
def test_the_manifest_keeps_the_promise_and_show_marks_a_continued_run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    engine_answering,
    answer: str | None,
    kept: str,
) -> None:
    from aworld_train import AgentTrainer
    from aworld_train.job.spec import load_job

    engine = engine_answering(answer)
    job = write_job(tmp_path, engine=engine)
    stopped = _stopped_run(tmp_path, engine)
    trainer = AgentTrainer.from_job(load_job(job), resume=stopped)
    run = trainer.run_dir.path
    assert manifest(run)["resume_support"] == kept
    code, out, err = run_cli(capsys, "show", run)
    assert code == 0, err
    marked = " (continued, not bit-exact)" if kept == "continued" else ""
    assert f"resumed from: {stopped}{marked}" in out.splitlines()
