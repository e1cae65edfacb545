"""Worker processes: rewards travel as references, events come back as metrics."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from aworld_train.job.config import TrainConfig
from aworld_train.plugins.context import RunContext
from aworld_train.errors import TrainingError
from aworld_train.launch.workers import (
    EVENT_MARKER,
    load_rewards,
    rendezvous,
    reward_references,
    run_workers,
)
from aworld_train.reward import resolve_reward
from aworld_train.run.metrics import MetricsReporter


def make_ctx(tmp_path: Path) -> RunContext:
    return RunContext(
        engine="test",
        run_dir=tmp_path,
        config=TrainConfig(),
        metrics=MetricsReporter(tmp_path / "metrics.jsonl", show_progress=False),
    )


def test_rewards_travel_as_references_with_their_weights(tmp_path: Path) -> None:
    (tmp_path / "rewards.py").write_text(
        "def score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return float(solution_str == ground_truth)\n"
    )
    spec = resolve_reward([{"name": "rewards.py:score", "weight": 2.0}, "exact_match"], tmp_path)
    loaded = load_rewards(json.loads(json.dumps(reward_references(spec))))
    assert [(f.name, f.weight) for f in loaded.functions] == [("score", 2.0), ("exact_match", 1.0)]
    assert loaded.score("d", "7", "7").score == 3.0


def test_a_lambda_reward_cannot_reach_other_processes() -> None:
    spec = resolve_reward(lambda data_source, solution_str, ground_truth, extra_info=None: 1.0)
    with pytest.raises(TrainingError, match="not importable by other processes"):
        reward_references(spec)


def test_several_nodes_need_the_rendezvous_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.delenv("NODE_RANK", raising=False)
    with pytest.raises(TrainingError, match="set MASTER_ADDR, NODE_RANK on every node"):
        rendezvous(2)
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    monkeypatch.setenv("NODE_RANK", "1")
    assert rendezvous(2) == {"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "NODE_RANK": "1"}


WORKER = """
from aworld_train.launch.workers import emit
print("a line for the log")
emit("start", total=2, done=0)
emit("log", step=1, metrics={"reward": 0.25})
emit("log", step=2, metrics={"reward": 0.75})
emit("done", metrics={"reward": 0.75})
"""


def test_the_main_workers_events_become_metrics(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    final = run_workers([sys.executable, "-c", WORKER], ctx, tmp_path / "workers.log", what="test")
    assert final == {"reward": 0.75}
    assert [(r["step"], r["reward"]) for r in ctx.metrics.history] == [(1, 0.25), (2, 0.75)]
    log = (tmp_path / "workers.log").read_text().splitlines()
    assert log[0] == "a line for the log"
    assert [json.loads(line.removeprefix(EVENT_MARKER))["event"] for line in log[1:]] == [
        "start",
        "log",
        "log",
        "done",
    ]


def test_a_failing_launch_names_its_last_error(tmp_path: Path) -> None:
    code = "import sys; print('loading'); print('ValueError: planted', flush=True); sys.exit(3)"
    with pytest.raises(
        TrainingError,
        match=r"2 test processes exited with status 3: ValueError: planted \(full output in .*w\.log\)",
    ):
        run_workers(
            [sys.executable, "-c", code],
            make_ctx(tmp_path),
            tmp_path / "w.log",
            what="2 test processes",
        )


def test_scoped_environment_sets_unsets_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    from aworld_train.launch.workers import scoped_environment

    monkeypatch.setenv("AWORLD_TRAIN_KEPT", "before")
    monkeypatch.delenv("AWORLD_TRAIN_NEW", raising=False)
    with pytest.raises(RuntimeError):
        with scoped_environment({"AWORLD_TRAIN_NEW": "secret", "AWORLD_TRAIN_KEPT": None}):
            assert os.environ["AWORLD_TRAIN_NEW"] == "secret"
            assert "AWORLD_TRAIN_KEPT" not in os.environ
            raise RuntimeError("restored even when the block fails")
    assert "AWORLD_TRAIN_NEW" not in os.environ
    assert os.environ["AWORLD_TRAIN_KEPT"] == "before"
