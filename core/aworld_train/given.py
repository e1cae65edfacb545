"""The job as the user gave it, and as ``ctx.given`` shows it to the engine: paths made
absolute, so an engine that starts processes elsewhere still finds the files."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aworld_train.config import merge, parse_overrides, read_config
from aworld_train.context import Given
from aworld_train.references import resolve_path


@dataclass
class Job:
    """The job as the user gave it; ``None`` where they gave nothing."""

    agent: Any
    config: Any
    reward_func: Any
    train_dataset: Any
    test_dataset: Any
    columns: dict[str, str] | None
    overrides: list[str] | tuple[str, ...]
    base_dir: Path | None


def as_given(job: Job) -> Given:
    """The job's inputs as the user gave them, paths made absolute (``ctx.given``)."""
    config = _absolute_path(job.config, job.base_dir)
    if job.overrides:
        config = merge(read_config(job.config, job.base_dir)[0], parse_overrides(job.overrides))
    return Given(
        agent=_absolute_path(job.agent, job.base_dir),
        train_dataset=_absolute_path(job.train_dataset, job.base_dir),
        test_dataset=_absolute_path(job.test_dataset, job.base_dir),
        reward=_absolute_reward(job.reward_func, job.base_dir),
        config=config,
        columns=job.columns or None,
    )


def _absolute_reward(reward: Any, base_dir: Path | None) -> Any:
    """A reward as given, each reference made absolute (in a list, in ``{name, weight}``)."""
    if isinstance(reward, list):
        return [_absolute_reward(item, base_dir) for item in reward]
    if isinstance(reward, dict) and "name" in reward:
        return {**reward, "name": _absolute_path(reward["name"], base_dir)}
    return _absolute_path(reward, base_dir)


def _absolute_path(value: Any, base_dir: Path | None) -> Any:
    """A path made an absolute string (relative to ``base_dir``), and the file of a
    ``file.py:name`` reference; anything else (a module reference, a built-in name, an
    object) as it is."""
    if not isinstance(value, (str, Path)):
        return value
    target, sep, name = str(value).rpartition(":")
    if sep and target.endswith(".py"):
        return f"{resolve_path(target, base_dir)}:{name}"
    path = resolve_path(value, base_dir)
    return str(path) if os.path.exists(path) else value


def model_identity(model: str, base_dir: Path | None) -> str:
    """A model as it is compared with another: the absolute folder it names, looked up where
    the model check looks (the job's folder, then the current one), else its text."""
    for root in (base_dir, None):
        folder = resolve_path(model, root)
        if os.path.isdir(folder):
            return str(folder)
    return model
