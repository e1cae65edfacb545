"""``aworld-train view``: time to first paint of a run's page, and the server's memory, for runs
of 1,000 and 100,000 logged steps (goal at 100,000: under 2 s and under 200 MB).

Each size gets a run directory whose ``metrics.jsonl`` holds one record per step with the
metrics a TRL GRPO run logs (20 of them). A fresh ``aworld-train view`` serves it, and the
system's Chromium (Playwright) opens the run's page: "first" is from the request to every curve
drawn on a server that has read nothing yet (a large run is drawn from a preview first),
"every step" until the curves hold the whole run, "reopened" the first paint in a new tab once
the server has read it (the browser's cache holds the scripts). Memory is the server's peak resident set (``VmHWM``).

    .venvs/core/bin/python bench/view_first_paint.py --steps 1000 100000
"""

from __future__ import annotations

import argparse
import json
import math
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from aworld_train.testing.view import SYSTEM_CHROMIUM, running_view

METRICS = [
    "loss", "grad_norm", "learning_rate", "num_tokens", "completions/mean_length",
    "completions/min_length", "completions/max_length", "completions/clipped_ratio",
    "rewards/score/mean", "rewards/score/std", "reward", "reward_std", "frac_reward_zero_std",
    "entropy", "kl", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean",
    "step_time", "epoch",
]  # fmt: skip
# Every curve the run page draws of these.
DRAWN = 5


def write_run(folder: Path, steps: int) -> Path:
    run = folder / f"20260101-000000-trl-{steps}"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(
        json.dumps({"status": "completed", "engine": "trl", "started_at": "2026-01-01T00:00:00"})
    )
    (run / "job.yaml").write_text(f"engine: trl\nconfig: {{max_steps: {steps}}}\n")
    rng = random.Random(0)
    with (run / "metrics.jsonl").open("w") as handle:
        for step in range(1, steps + 1):
            record: dict[str, Any] = {"step": step, "time": 1_700_000_000 + step}
            for key in METRICS:
                record[key] = rng.random() * (1 - math.exp(-step / 1000))
            handle.write(json.dumps(record) + "\n")
    return run


def peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return math.nan


def first_paint(page: Any, url: str) -> float:
    started = time.perf_counter()
    page.goto(url)
    page.wait_for_function(
        f"document.querySelectorAll('.curve .main-svg').length >= {DRAWN}", timeout=120_000
    )
    return time.perf_counter() - started


def whole(page: Any, started: float) -> float:
    """When the page has drawn every step (after a large run's preview)."""
    page.wait_for_function(
        "document.getElementById('live').textContent.includes('logged records')", timeout=300_000
    )
    return time.perf_counter() - started


def measure(steps: int, browser: Any) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        run = write_run(Path(folder), steps)
        size_mb = (run / "metrics.jsonl").stat().st_size / 1e6
        with running_view(run.parent) as view:
            url = f"{view.url}#/run/{run.name}"
            context = browser.new_context()
            page = context.new_page()
            started = time.perf_counter()
            first = first_paint(page, url)
            every_step = whole(page, started)
            reopened = first_paint(context.new_page(), url)
            points = context.pages[-1].evaluate(
                "document.querySelector(\"[data-metric='reward']\").data[0].x.length"
            )
            memory = peak_mb(view.process.pid)
            context.close()
    return {
        "steps": steps,
        "metrics_mb": round(size_mb, 1),
        "first_s": round(first, 2),
        "every_step_s": round(every_step, 2),
        "reopened_s": round(reopened, 2),
        "reward_points_drawn": points,
        "server_peak_mb": round(memory),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 100_000])
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(**SYSTEM_CHROMIUM)
        for steps in args.steps:
            print(json.dumps(measure(steps, browser)), flush=True)
        browser.close()


if __name__ == "__main__":
    main()
