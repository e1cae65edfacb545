"""``aworld-train view`` watching real TRL runs in a real Chromium: the reward curve of the
repeat-digit job gains points while it trains, and an agent's episode shows its tool result and
which tokens were trained on."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from aworld_train.testing.agents import write_agent_job
from aworld_train.testing.fixtures import read_jsonl, repeat_digit_job
from aworld_train.testing.view import running_view

pytestmark = [pytest.mark.slow, pytest.mark.browser]

# The points of the reward curve the page drew.
REWARD_STEPS = "() => document.querySelector(\"[data-metric='reward']\").data[0].x"


def job_file(folder: Path, kwargs: dict[str, Any], steps: int) -> Path:
    """:func:`repeat_digit_job`'s keyword arguments as a job file of ``steps`` steps."""
    job = {
        "engine": kwargs["train_engine_name"],
        "agent": kwargs["agent"],
        "train_dataset": kwargs["train_dataset"],
        "reward": kwargs["reward_func"],
        "config": {**kwargs["config"], "max_steps": steps, "save_steps": steps},
        "run_path": "runs",
    }
    path = folder / "job.yaml"
    path.write_text(json.dumps(job))
    return path


def first_logged_run(runs: Path, process: subprocess.Popen[str]) -> Path:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        for run in runs.glob("*/metrics.jsonl"):
            if run.read_text().strip():
                return run.parent
        assert process.poll() is None, process.stderr.read()  # type: ignore[union-attr]
        time.sleep(0.5)
    raise AssertionError("the run logged no step in 300 s")


def test_the_reward_curve_gains_points_while_the_repeat_digit_job_trains(
    page: Any, console_errors: list[str], tmp_path: Path, tiny_model: Path
) -> None:
    job = job_file(tmp_path, repeat_digit_job(tmp_path, tiny_model, "trl", {"beta": 0.0}), 2000)
    runs = tmp_path / "runs"
    runs.mkdir()
    with running_view(runs) as view:
        process = subprocess.Popen(
            [sys.executable, "-m", "aworld_train.cli", "train", job],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            run = first_logged_run(runs, process)
            page.goto(f"{view.url}#/run/{run.name}")
            page.wait_for_selector("[data-metric='reward'] .main-svg")
            first = page.evaluate(REWARD_STEPS)
            page.wait_for_function(f"({REWARD_STEPS})().length > {len(first)}", timeout=120_000)
            later = page.evaluate(REWARD_STEPS)
            page.screenshot(path=tmp_path / "live.png", full_page=True)
            assert process.poll() is None, "the run ended before the page saw it grow"
        finally:
            process.send_signal(signal.SIGINT)  # the curve grew: the rest of the run is not needed
            process.wait(timeout=120)
    logged = [record["step"] for record in read_jsonl(run / "metrics.jsonl") if "reward" in record]
    assert later == logged[: len(later)] and later[: len(first)] == first
    assert console_errors == []


def test_an_agent_episode_shows_its_tool_result_and_the_tokens_trained_on(
    page: Any, console_errors: list[str], tmp_path: Path, tiny_model: Path
) -> None:
    job = write_agent_job(
        tmp_path,
        tiny_model,
        "trl",
        {"beta": 0.0},
        max_steps=1,
        save_steps=1,
        max_completion_length=40,
    )
    subprocess.run(
        [sys.executable, "-m", "aworld_train.cli", "train", job],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    (run,) = (tmp_path / "runs").iterdir()
    samples = read_jsonl(run / "samples.jsonl")
    index = next(
        i
        for i, s in enumerate(samples)
        if any(m["role"] == "tool" for m in s["episode"]["messages"])
    )
    with running_view(tmp_path / "runs") as view:
        page.goto(f"{view.url}#/episodes/{run.name}")
        page.wait_for_selector(f"#samples tr[data-index='{index}']")
        page.screenshot(path=tmp_path / "episodes.png", full_page=True)
        page.click(f"#samples tr[data-index='{index}']")
        page.wait_for_selector("#tokens")
        episode = samples[index]["episode"]
        tool = next(m for m in episode["messages"] if m["role"] == "tool")
        assert tool["content"] in page.inner_text("#turns .turn.tool")
        trained = page.eval_on_selector_all("#tokens span.trained", "spans => spans.length")
        context = page.eval_on_selector_all("#tokens span.context", "spans => spans.length")
        # Every response token is one span; the prompt is one more context span.
        assert trained == sum(episode["mask"]) > 0
        assert context == len(episode["mask"]) - trained + 1
        assert page.get_attribute("#tokens span.trained", "title").startswith("log-prob ")
        page.screenshot(path=tmp_path / "episode.png", full_page=True)
    assert console_errors == []
