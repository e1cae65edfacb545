"""Config: the engine-neutral training keys, one section per engine, and ``-o`` overrides."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aworld_train.errors import ConfigError


@dataclass
class Resources:
    """Where the job runs. Engines map these onto their own distributed runtime."""

    nnodes: int = 1
    gpus_per_node: int | None = None  # None: whatever the engine finds visible
    ray_address: str | None = None  # VeRL: the Ray cluster to join


@dataclass
class TrainConfig:
    """The validated config of a job.

    ``None`` means "the engine's default". ``sections`` holds the raw section named after each
    engine (``trl:``, ``swift:``, ``verl:``); the engine validates its own against its schema.
    """

    algorithm: str = "grpo"
    model: str | None = None
    learning_rate: float | None = None
    max_steps: int | None = None
    num_epochs: float | None = None
    batch_size: int | None = None
    num_generations: int | None = None
    max_prompt_length: int | None = None
    max_completion_length: int | None = None
    seed: int = 42
    logging_steps: int | None = None
    save_steps: int | None = None
    resources: Resources = field(default_factory=Resources)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)

    def engine_section(self, engine: str) -> dict[str, Any]:
        """The raw section named after ``engine`` (empty when the job has none)."""
        return dict(self.sections.get(engine, {}))

    def to_dict(self) -> dict[str, Any]:
        """The config as plain data, as a job file would hold it."""
        raise NotImplementedError


def parse_overrides(overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Turn ``["a.b=1", "trl.beta=0.0"]`` into a nested dict; values are parsed as YAML scalars.

    :raises ConfigError: for an item without ``=`` or with an empty key.
    """
    raise NotImplementedError


def load_config(
    config: dict[str, Any] | str | Path | None,
    overrides: list[str] | tuple[str, ...] = (),
    engine_names: tuple[str, ...] = (),
    base_dir: Path | None = None,
) -> TrainConfig:
    """Read a config (a dict, or a YAML/JSON path relative to ``base_dir``), apply dotted
    ``overrides``, and validate every common key's type.

    :param engine_names: the names allowed as engine sections (the installed engines and the
        engines this project ships).
    :raises ConfigError: naming the file and key, with a did-you-mean for unknown keys.
    """
    raise NotImplementedError
