"""Shared fixtures of the core tests.

The test-only distributions under ``tests/distributions`` are pip-installed into the core's
virtual environment (``make .venvs/core/.ready``): ``toy`` (engines ``toy`` and ``twin``),
``broken``, ``dup`` (``twin`` again), ``mismatch`` and the ``recorder`` extension plugin.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aworld_train import plugins
from aworld_train.testing.view import browser_type_launch_args, console_errors  # noqa: F401
from helpers import ARITHMETIC, ENV_VARS, RecordingProcessor


@pytest.fixture(autouse=True)
def plugin_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts with no plugin selection from the environment and no registered
    processor left over by another test."""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    yield
    for info in plugins.list_engines():
        if info.distribution == plugins.REGISTERED:
            plugins.unregister_processor(info.name)


@pytest.fixture
def rows() -> list[dict[str, Any]]:
    return [dict(row) for row in ARITHMETIC]


@pytest.fixture
def toy_job(tmp_path: Path, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``AgentTrainer`` keyword arguments of a small valid job on the toy engine."""
    return {
        "agent": {"name": "adder", "system_prompt": "Answer with the number."},
        "train_dataset": rows,
        "reward_func": "exact_match",
        "config": {"max_steps": 6, "batch_size": 4},
        "run_path": tmp_path / "runs",
        "train_engine_name": "toy",
    }


@pytest.fixture
def recording_engine() -> Iterator[type[RecordingProcessor]]:
    """``RecordingProcessor`` registered as the engine ``recording``, with an empty log."""
    RecordingProcessor.calls = []
    plugins.register_processor("recording", RecordingProcessor)
    yield RecordingProcessor
    plugins.unregister_processor("recording")
