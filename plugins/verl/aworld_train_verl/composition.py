"""VeRL's own ``ppo_trainer`` config, composed with Hydra from the config folder inside the
installed ``verl`` distribution (``verl`` itself is not imported), and the dotted keys a job's
overrides are written in.

The packaged config is composed once per installed VeRL and kept as YAML under
``~/.cache/aworld-train/`` (:func:`aworld_train.engine.cached`), beside the schema
(:mod:`aworld_train_verl.schema`) that the same :func:`cache_key` keys.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import ConfigError
from aworld_train.engine.launch import cached

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig
    from omegaconf import DictConfig

CONFIG_NAME = "ppo_trainer"
SECTION = "verl"  # the section's name when the config names no engine (one built by hand)
#: Bumped when the texts cached under :func:`cache_key` change shape or content (2: ``Any`` is
#: ``"any"`` in the schema; 3: the KL estimators).
FORMAT = 3


def cache_key() -> list[Any]:
    """What the texts VeRL's code yields depend on: the cached texts' format, the VeRL and engine
    versions, and the ``verl.plugins`` that register more names (the key of
    :func:`aworld_train.engine.cached`)."""
    from importlib.metadata import entry_points, version

    plugins = sorted(f"{ep.name}={ep.value}" for ep in entry_points(group="verl.plugins"))
    return [FORMAT, version("verl"), version("aworld-train-verl"), plugins]


def config_dir() -> Path:
    """The folder of VeRL's packaged trainer configs, found without importing ``verl``."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or spec.origin is None:
        raise ConfigError("VeRL is not installed: pip install 'verl[verl-core]>=0.9.1,<0.10'")
    return Path(spec.origin).parent / "trainer" / "config"


@contextlib.contextmanager
def _hydra() -> Iterator[None]:
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
        yield


def _keys(node: Any, prefix: str = "") -> Iterator[str]:
    from omegaconf import DictConfig

    for key in node.keys() if isinstance(node, DictConfig) else ():
        dotted = f"{prefix}{key}"
        yield dotted
        try:
            child = node._get_node(key)
        except Exception:  # noqa: BLE001 - a node that cannot be read still names a key
            continue
        if isinstance(child, DictConfig):
            yield from _keys(child, dotted + ".")


@functools.lru_cache(maxsize=1)
def base_config() -> DictConfig:
    """VeRL's ``ppo_trainer`` config as packaged, with no override (read it, never change it).

    Hydra composes it from VeRL's config folder once per installed VeRL; the result is kept as
    YAML beside the schema (:func:`aworld_train.engine.cached`).
    """
    from omegaconf import OmegaConf

    def compose_packaged() -> str:
        from hydra import compose

        with _hydra():
            return OmegaConf.to_yaml(compose(CONFIG_NAME))

    text = cached(
        f"verl-{CONFIG_NAME}.yaml",
        compose_packaged,
        lambda text: "trainer:" in text,
        key=cache_key(),
    )
    base = OmegaConf.create(text)
    OmegaConf.set_struct(base, True)
    return base


def compose_config(overrides: Mapping[str, Any]) -> DictConfig:
    """VeRL's ``ppo_trainer`` config with dotted overrides applied as Hydra applies a
    ``key=value`` override (``+key=value`` adds a key), to a copy of :func:`base_config`;
    :func:`job_overrides` has checked the keys.

    :raises ConfigError: when OmegaConf rejects an override.
    """
    import copy

    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    composed = copy.deepcopy(base_config())
    for key, value in overrides.items():
        try:
            OmegaConf.update(
                composed, key.lstrip("+"), value, merge=True, force_add=key.startswith("+")
            )
        except OmegaConfBaseException as error:
            raise ConfigError(
                f"VeRL's {CONFIG_NAME} config rejects '{key}': {one_line(error)}"
            ) from error
    return composed


def known_keys(config: DictConfig) -> set[str]:
    """Every dotted key of a composed config."""
    return set(_keys(config))


def section_keys() -> frozenset[str]:
    """The top-level keys of VeRL's ``ppo_trainer`` config: what a whole VeRL config file holds."""
    return frozenset(str(key) for key in base_config().keys())


def flatten(section: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; dotted keys in the mapping are kept as they are.

    A mapping value is descended into, under a key starting with ``+`` or ``++`` too (``-o
    +trainer.x=1`` reads as ``{"+trainer": {"x": 1}}``, which is Hydra's ``+trainer.x=1``); an
    empty mapping sets nothing, except under such a key, where it adds an empty node.
    """
    flat: dict[str, Any] = {}
    for key, value in section.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and (value or not dotted.startswith("+")):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` → ``{"a": {"b": 1}}`` (a leading ``+`` dropped), so that key names count."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, last = key.lstrip("+").split(".")
        node = nested
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[last] = value
    return nested


def one_line(error: BaseException) -> str:
    """An error's text on one line, at most 400 characters."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 400 else text[:397] + "..."


def section_of(config: TrainConfig) -> dict[str, Any]:
    """The job's ``verl:`` section (or the section of the name the engine is installed under)."""
    return config.engine_section() if config.engine is not None else config.engine_section(SECTION)
