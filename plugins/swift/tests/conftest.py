"""Shared fixtures: the tiny model, a small "Repeat: <digit>" job for AgentTrainer on swift, and
the samples swift collates to train on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aworld_train.testing.fixtures import repeat_digit_job, tiny_model  # noqa: F401


@pytest.fixture
def job(tmp_path: Path, tiny_model: Path) -> dict[str, Any]:  # noqa: F811
    """``AgentTrainer`` keyword arguments for a tiny GRPO job of 4 steps."""
    return repeat_digit_job(tmp_path, tiny_model, "swift", {"template": "qwen", "beta": 0.0})


@pytest.fixture
def collated(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, dict[str, Any]]]:
    """Every sample swift's GRPO trainer collates to train on, with what it encoded, as it
    collates them (a step's samples are generated and collated before that step's update)."""
    from swift.rlhf_trainers import grpo_trainer

    captured: list[tuple[Any, dict[str, Any]]] = []
    collate = grpo_trainer.collate_to_grpo_micro_batch

    def capturing(samples: list[Any], template: Any, **kwargs: Any) -> Any:
        captured.extend((sample, dict(sample.encoded)) for sample in samples)
        return collate(samples, template, **kwargs)

    monkeypatch.setattr(grpo_trainer, "collate_to_grpo_micro_batch", capturing)
    return captured
