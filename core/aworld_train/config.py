"""Config: the engine-neutral training keys, one section per engine, and ``-o`` overrides."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aworld_train.errors import ConfigError, did_you_mean


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

    ``batch_size`` counts samples per optimisation step on one device: for GRPO and PPO that
    is completions (prompts × ``num_generations``), for SFT and DPO rows. Every engine reads it
    so, which keeps one job file meaning the same on each.
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
        data = {key: getattr(self, key) for key in _COMMON_TYPES if getattr(self, key) is not None}
        data["resources"] = {
            key: getattr(self.resources, key)
            for key in _RESOURCE_TYPES
            if getattr(self.resources, key) is not None
        }
        data.update({name: dict(section) for name, section in self.sections.items()})
        return data


# The type each common key accepts; an int is accepted where a float is expected.
_COMMON_TYPES: dict[str, tuple[type, ...]] = {
    "algorithm": (str,),
    "model": (str,),
    "learning_rate": (float, int),
    "max_steps": (int,),
    "num_epochs": (float, int),
    "batch_size": (int,),
    "num_generations": (int,),
    "max_prompt_length": (int,),
    "max_completion_length": (int,),
    "seed": (int,),
    "logging_steps": (int,),
    "save_steps": (int,),
}
_RESOURCE_TYPES: dict[str, tuple[type, ...]] = {
    "nnodes": (int,),
    "gpus_per_node": (int,),
    "ray_address": (str,),
}


def parse_overrides(overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Turn ``["a.b=1", "trl.beta=0.0"]`` into a nested dict; values are parsed as YAML scalars.

    :raises ConfigError: for an item without ``=`` or with an empty key.
    """
    import yaml

    nested: dict[str, Any] = {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError(f"override '{item}' is not KEY=VALUE (for example -o max_steps=50)")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        node = nested
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{item}' sets a key inside '{part}', which is a value")
        node[parts[-1]] = value
    return nested


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``extra`` into a copy of ``base``; ``extra`` wins."""
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


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
    from aworld_train.files import read_mapping

    where = "config"
    if config is None:
        data: dict[str, Any] = {}
    elif isinstance(config, TrainConfig):
        data = config.to_dict()
    elif isinstance(config, dict):
        data = config
    elif isinstance(config, (str, Path)):
        path = Path(config) if base_dir is None else base_dir / config
        data = read_mapping(path, ConfigError, "config")
        where = str(path)
    else:
        raise ConfigError(
            f"config must be a mapping or a YAML/JSON path, not {type(config).__name__}"
        )
    data = merge(data, parse_overrides(overrides))

    allowed = set(_COMMON_TYPES) | {"resources"} | set(engine_names)
    values: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in data.items():
        if key in _COMMON_TYPES:
            if value is not None:  # null keeps the default (seed 42, algorithm grpo)
                values[key] = _typed(where, key, value, _COMMON_TYPES[key])
        elif key == "resources":
            values["resources"] = _resources(where, value)
        elif key in engine_names:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: '{key}' must be a mapping of {key} settings")
            sections[key] = value
        else:
            raise ConfigError(
                f"{where}: unknown config key '{key}'{did_you_mean(key, allowed)}; "
                f"known keys: {', '.join(sorted(allowed))}"
            )
    return TrainConfig(**values, sections=sections)


def _typed(where: str, key: str, value: Any, types: tuple[type, ...]) -> Any:
    if value is None:
        return None
    if float in types and isinstance(value, str):
        # PyYAML reads "1e-3" (no dot) as a string.
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, types):
        wanted = " or ".join(t.__name__ for t in types)
        raise ConfigError(
            f"{where}: '{key}' must be {wanted}, got {type(value).__name__} {value!r}"
        )
    return float(value) if float in types and not isinstance(value, str) else value


def _resources(where: str, value: Any) -> Resources:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: 'resources' must be a mapping (nnodes, gpus_per_node, ...)")
    fields: dict[str, Any] = {}
    for key, item in value.items():
        if key not in _RESOURCE_TYPES:
            raise ConfigError(
                f"{where}: unknown config key 'resources.{key}'"
                f"{did_you_mean(key, _RESOURCE_TYPES)}"
            )
        if item is not None:  # null keeps the default
            fields[key] = _typed(where, f"resources.{key}", item, _RESOURCE_TYPES[key])
    return Resources(**fields)
