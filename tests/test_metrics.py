"""The metrics reporter engines call, and the curves drawn from ``metrics.jsonl``."""

from __future__ import annotations

import json
from pathlib import Path

from helpers import read_jsonl

from aworld_train.metrics import MetricsReporter
from aworld_train.plots import plot_run


def test_log_writes_one_json_line_per_step_and_tells_the_listener(tmp_path: Path) -> None:
    heard: list[tuple[int, dict[str, float]]] = []
    reporter = MetricsReporter(tmp_path / "metrics.jsonl", on_log=lambda s, m: heard.append((s, m)),
                               show_progress=False)
    reporter.start(2)
    reporter.log(1, {"reward": 0.5, "loss": 2, "done": True, "bad": float("nan"),
                     "inf": float("inf"), "name": "x"})
    reporter.log(2, {"reward": 0.75})
    reporter.stop()
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [{k: v for k, v in r.items() if k != "time"} for r in records] == [
        {"step": 1, "reward": 0.5, "loss": 2.0}, {"step": 2, "reward": 0.75}]
    assert heard == [(1, {"reward": 0.5, "loss": 2.0}), (2, {"reward": 0.75})]
    assert reporter.last() == {"step": 2, "reward": 0.75, "loss": 2.0}


def test_numpy_scalars_are_logged() -> None:
    import numpy

    reporter = MetricsReporter(None, show_progress=False)
    reporter.log(1, {"reward": numpy.float32(0.5), "tokens": numpy.int64(7),
                     "nan": numpy.float32("nan")})
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
