"""Shared fixtures: the tiny model and a small "Repeat: <digit>" job for AgentTrainer on trl."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aworld_train.testing.fixtures import repeat_digit_job, tiny_model  # noqa: F401
from aworld_train.testing.real_configs import long_model  # noqa: F401 - the tiny model with room for long configs
from aworld_train.testing.view import browser_type_launch_args, console_errors  # noqa: F401


@pytest.fixture
def job(tmp_path: Path, tiny_model: Path) -> dict[str, Any]:  # noqa: F811
    """``AgentTrainer`` keyword arguments for a tiny GRPO job of 4 steps."""
    return repeat_digit_job(tmp_path, tiny_model, "trl", {"beta": 0.0})
