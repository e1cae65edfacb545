"""``aworld-train view`` in a real Chromium (Playwright), through the real CLI, on toy-engine
runs: the runs page lists a completed and a running run, a run's reward curve has a point per
logged step and gains points while the run trains, compare overlays two runs, the exported file
shows the same curve from ``file://`` with no network, and no page logs a console error.
Screenshots of each page go to the test's temporary folder."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.testing.view import running_view
from helpers import ARITHMETIC, read_jsonl

pytestmark = pytest.mark.browser

# A reward that takes its time, so that the run is still training while the page watches it.
SLOW_REWARD = """
import time


def score(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(0.05)
    return 1.0 if solution_str == ground_truth else 0.0
"""
# The points of a curve the page drew.
POINTS = "key => document.querySelector(`[data-metric='${key}']`).data[0].x"


def completed_run(toy_job: dict[str, Any], seed: int) -> Path:
    trainer = AgentTrainer(**{**toy_job, "config": {**toy_job["config"], "seed": seed}})
    trainer.train()
    return trainer.run_dir.path


@contextmanager
def training(folder: Path, runs: Path) -> Iterator[Path]:
    """``aworld-train train`` of a toy job of 2,000 slow steps into ``runs``: its run
    directory once it has logged a step; interrupted (Ctrl-C) at the end."""
    (folder / "reward.py").write_text(SLOW_REWARD)
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ARITHMETIC))
    job = {
        "engine": "toy",
        "agent": {"name": "adder"},
        "train_dataset": "train.jsonl",
        "reward": "reward.py:score",
        "config": {"max_steps": 2000, "batch_size": 4},
        "run_path": str(runs),
    }
    (folder / "job.yaml").write_text(json.dumps(job))
    before = set(runs.iterdir()) if runs.exists() else set()
    process = subprocess.Popen(
        [sys.executable, "-m", "aworld_train.cli", "train", "job.yaml"],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            new = set(runs.iterdir()) - before if runs.exists() else set()
            if new and read_jsonl_if_any(next(iter(new)) / "metrics.jsonl"):
                break
            assert process.poll() is None, process.stderr.read()  # type: ignore[union-attr]
            time.sleep(0.2)
        else:
            raise AssertionError("the training logged no step in 120 s")
        yield next(iter(new))
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)


def read_jsonl_if_any(path: Path) -> list[dict[str, Any]]:
    return read_jsonl(path) if path.is_file() else []


def test_runs_page_and_a_curve_that_grows_while_the_run_trains(
    page: Any, console_errors: list[str], toy_job: dict[str, Any], tmp_path: Path
) -> None:
    runs = Path(toy_job["run_path"])
    done = completed_run(toy_job, seed=0)
    (tmp_path / "live").mkdir()
    with training(tmp_path / "live", runs) as live, running_view(runs) as view:
        page.goto(view.url)
        page.wait_for_selector(f"tr[data-run='{live.name}'][data-status='running']")
        page.wait_for_selector(f"tr[data-run='{done.name}'][data-status='completed']")
        page.screenshot(path=tmp_path / "runs.png", full_page=True)
        # A new run appears without a reload.
        another = completed_run(toy_job, seed=1)
        page.wait_for_selector(f"tr[data-run='{another.name}'][data-status='completed']")
        page.fill("#filter", "completed")
        assert page.eval_on_selector_all("#runs tbody tr", "rows => rows.length") == 2

        page.goto(f"{view.url}#/run/{live.name}")
        page.wait_for_selector("[data-metric='reward'] .main-svg")
        first = page.evaluate(POINTS, "reward")
        logged = [record["step"] for record in read_jsonl(live / "metrics.jsonl")]
        assert first == logged[: len(first)] and len(first) >= 1
        # Without reloading, the curve gains the steps logged since.
        page.wait_for_function(f"({POINTS})('reward').length > {len(first)}", timeout=30_000)
        later = page.evaluate(POINTS, "reward")
        assert later[: len(first)] == first and later == sorted(set(later))
        page.screenshot(path=tmp_path / "run-live.png", full_page=True)
    assert console_errors == []


def test_curves_compare_and_the_exported_file(
    page: Any, console_errors: list[str], toy_job: dict[str, Any], tmp_path: Path
) -> None:
    runs = Path(toy_job["run_path"])
    first, second = completed_run(toy_job, seed=0), completed_run(toy_job, seed=1)
    with running_view(runs) as view:
        page.goto(f"{view.url}#/run/{first.name}")
        page.wait_for_selector("[data-metric='loss'] .main-svg")
        # One point per logged step.
        assert page.evaluate(POINTS, "reward") == [1, 2, 3, 4, 5, 6]
        rewards = page.evaluate("document.querySelector(\"[data-metric='reward']\").data[0].y")
        assert rewards == [r["reward"] for r in read_jsonl(first / "metrics.jsonl")]
        page.screenshot(path=tmp_path / "run.png", full_page=True)

        page.goto(f"{view.url}#/compare/{first.name},{second.name}")
        page.wait_for_selector("#compare-plot .main-svg")
        traces = page.evaluate(
            "() => document.getElementById('compare-plot').data.map(t => [t.name, t.x.length])"
        )
        assert traces == [[first.name, 6], [second.name, 6]]
        assert page.inner_text("h2") == f"compare {first.name} {second.name}"
        page.screenshot(path=tmp_path / "compare.png", full_page=True)

    exported = tmp_path / "first.html"
    subprocess.run(
        [sys.executable, "-m", "aworld_train.cli", "view", first, "--html", exported],
        check=True,
        capture_output=True,
    )
    asked: list[str] = []

    def offline(route: Any) -> None:
        if route.request.url == exported.as_uri():
            route.continue_()
        else:
            asked.append(route.request.url)
            route.abort()

    page.route("**/*", offline)
    page.goto(exported.as_uri())
    page.wait_for_selector("[data-metric='reward'] .main-svg")
    assert page.evaluate(POINTS, "reward") == [1, 2, 3, 4, 5, 6]
    page.screenshot(path=tmp_path / "exported.png", full_page=True)
    assert asked == []  # nothing fetched: everything is in the file
    assert console_errors == []
