"""The metrics reporter engines call, and the curves drawn from ``metrics.jsonl``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from aworld_train.run.metrics import MetricsReporter
from aworld_train.run.plots import plot_run
from helpers import read_jsonl


def test_log_writes_one_json_line_per_step_and_tells_the_listener(tmp_path: Path) -> None:
    heard: list[tuple[int, dict[str, float]]] = []
    reporter = MetricsReporter(
        tmp_path / "metrics.jsonl", on_log=lambda s, m: heard.append((s, m)), show_progress=False
    )
    reporter.start(2)
    reporter.log(
        1,
        {
            "reward": 0.5,
            "loss": 2,
            "done": True,
            "bad": float("nan"),
            "inf": float("inf"),
            "name": "x",
        },
    )
    reporter.log(2, {"reward": 0.75})
    reporter.stop()
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [{k: v for k, v in r.items() if k != "time"} for r in records] == [
        {"step": 1, "reward": 0.5, "loss": 2.0},
        {"step": 2, "reward": 0.75},
    ]
    assert heard == [(1, {"reward": 0.5, "loss": 2.0}), (2, {"reward": 0.75})]
    assert reporter.last() == {"step": 2, "reward": 0.75, "loss": 2.0}


def test_numpy_scalars_are_logged() -> None:
    import numpy

    reporter = MetricsReporter(None, show_progress=False)
    reporter.log(
        1, {"reward": numpy.float32(0.5), "tokens": numpy.int64(7), "nan": numpy.float32("nan")}
    )
    assert reporter.last() == {"step": 1, "reward": 0.5, "tokens": 7.0}


def test_reporter_without_a_file_keeps_the_history_in_memory() -> None:
    reporter = MetricsReporter(None, show_progress=False)
    reporter.log(3, {"reward": 1.0})
    assert reporter.last() == {"step": 3, "reward": 1.0}


def test_curves_are_drawn_for_the_metrics_that_were_logged(tmp_path: Path) -> None:
    assert plot_run(tmp_path) == [], "no metrics.jsonl, no curves"
    lines = [json.dumps({"step": step, "time": 0.0, "reward": step / 10}) for step in range(1, 30)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert [path.name for path in plot_run(tmp_path)] == ["reward.png"]
    assert (tmp_path / "reward.png").read_bytes()[:4] == b"\x89PNG"
    assert not (tmp_path / "loss.png").exists()


PROGRESS_LINE = re.compile(
    r"training  step (\d+)/(\d+) \((\d+)%\)  reward [\d.]+  loss [\d.]+  "
    r"elapsed \d+:\d\d:\d\d  ETA \d+:\d\d:\d\d"
)


def test_without_a_terminal_progress_is_a_line_every_five_percent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reporter = MetricsReporter(None, show_progress=True)
    reporter.start(None)  # the core, before the engine knows the total
    reporter.start(200)
    for step in range(1, 201):
        reporter.log(step, {"reward": step / 200, "loss": 1.0, "lr": 1e-6})
    reporter.stop()
    lines = capsys.readouterr().out.splitlines()
    assert all(PROGRESS_LINE.fullmatch(line) for line in lines), lines
    steps = [int(PROGRESS_LINE.fullmatch(line)[1]) for line in lines]
    assert steps == [1, *range(10, 201, 10)], "the first step, then every 5% of 200"
    assert lines[-1].startswith("training  step 200/200 (100%)  reward 1  loss 1  ")


def test_progress_lines_while_the_total_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    reporter = MetricsReporter(None, show_progress=True)
    reporter.start(None)
    for step in range(1, 46):
        reporter.log(step, {"reward": 0.5})
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("  ")[1] for line in lines] == ["step 1", "step 20", "step 40"]
    assert all("ETA" not in line and "reward 0.5" in line for line in lines)


def test_a_resumed_run_opens_with_its_parents_records(tmp_path: Path) -> None:
    parent = [{"step": step, "time": 0.0, "reward": step / 10} for step in range(1, 13)]
    reporter = MetricsReporter(tmp_path / "metrics.jsonl", show_progress=False, inherited=parent)
    reporter.start(None)  # as the core does, before the engine knows where it resumes
    assert not (tmp_path / "metrics.jsonl").exists()
    reporter.start(20, completed=10)  # the engine resumes from its checkpoint of step 10
    reporter.log(11, {"reward": 2.0})
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert records[:10] == parent[:10], "up to the checkpoint, not the steps after it"
    assert [r["step"] for r in records] == list(range(1, 12))
    assert reporter.last()["reward"] == 2.0
    assert [p.name for p in plot_run(tmp_path)] == ["reward.png"]


def test_without_a_resume_step_the_parents_records_before_the_first_new_step_are_kept(
    tmp_path: Path,
) -> None:
    parent = [{"step": step, "time": 0.0, "loss": 1.0} for step in (5, 10, 15)]
    reporter = MetricsReporter(tmp_path / "metrics.jsonl", show_progress=False, inherited=parent)
    reporter.log(11, {"loss": 0.5})
    reporter.log(12, {"loss": 0.4})
    assert [r["step"] for r in read_jsonl(tmp_path / "metrics.jsonl")] == [5, 10, 11, 12]


def test_eval_prints_progress_lines_without_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    """Without a terminal `eval` prints a line every 5% of the rows, as training does of its
    steps (there is no bar to draw)."""
    from aworld_train.evaluation._generation import _progress_bar

    with _progress_bar(True, 40) as advance:  # pytest's stderr is no terminal
        for _ in range(20):
            advance(2)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 20, "one line per 5% (2 of 40 rows)"
    assert lines[0].startswith("evaluating  row 2/40 (5%)  elapsed 0:00:00  ETA ")
    assert lines[-1].startswith("evaluating  row 40/40 (100%)  elapsed ")
    assert "ETA" not in lines[-1]
    with _progress_bar(False, 40) as advance:  # progress not asked for: nothing
        advance(40)
    assert capsys.readouterr().out == ""
