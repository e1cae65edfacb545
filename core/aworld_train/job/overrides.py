"""The ``-o`` config overrides: ``key.sub=value`` items parsed into a mapping
(:func:`parse_overrides`) and deep-merged over the config as written (:func:`merge`)."""

from __future__ import annotations

from typing import Any

from aworld_train.errors import ConfigError
from aworld_train.job.files import guarded_yaml_loader


def parse_overrides(overrides: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """Turn ``["a.b=1", "trl.beta=0.0"]`` into a nested dict; values are parsed as YAML scalars.

    A value that is not valid YAML (or one past the YAML guards in :mod:`aworld_train.job.files`)
    stays text.

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
            value = yaml.load(raw, Loader=guarded_yaml_loader()) if raw.strip() else ""
        except (yaml.YAMLError, ValueError):
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
