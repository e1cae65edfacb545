"""How an engine's own config file is read whole: the top-level keys its layout claims move
into its section, and a claimed key that is a common key misspelt is refused."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aworld_train.job._rules import describe_value
from aworld_train.errors import ConfigError, did_you_mean
from aworld_train.job.spelling import edit_distance, swapped

if TYPE_CHECKING:
    from aworld_train.job.declaration import SettingsDeclaration


@dataclass(frozen=True)
class ConfigLayout:
    """How an engine's own config files look, so that one given whole works as its section.

    An engine returns one from its ``config_layout`` hook. With it, a top-level config key the
    core does not know and the layout claims moves into the engine's section, as if written
    under ``<engine>:``; ``algorithm`` given as a mapping is claimed the same way when
    ``section_keys`` lists it.

    :ivar section_keys: the names at the top of the engine's own config file that belong in its
        section (VeRL: ``data``, ``actor_rollout_ref``, ``trainer``, ...).
    :ivar model_key: the dotted key inside the section that names the policy model
        (``actor_rollout_ref.model.path``); the core takes it out of the section and makes it
        the one model of the job, with the common ``model`` and the agent's.
    :ivar takes_any: every top-level key the core does not know belongs to the section: the
        engine owns its config format (a ``TrainerProcessor``).
    """

    section_keys: frozenset[str] = frozenset()
    model_key: str | None = None
    takes_any: bool = False

    def claims(self, key: str, value: Any) -> bool:
        """Whether the top-level ``key`` (with ``value``) belongs in the engine's section.

        :param key: a top-level key that is neither a common key, ``resources`` nor a section
            name, or ``algorithm``.
        """
        if key == "algorithm":  # the common key when it names one; VeRL's section when a mapping
            return isinstance(value, dict) and (self.takes_any or key in self.section_keys)
        # Hydra's ``+key`` (add) and ``++key`` (add or override) name the same section.
        return self.takes_any or key.lstrip("+") in self.section_keys


def claim(
    data: dict[str, Any],
    engine: str,
    known: set[str],
    commons: tuple[str, ...],
    layout: ConfigLayout,
    where: str,
) -> dict[str, Any]:
    """``data`` with the top-level keys ``layout`` claims moved into ``engine``'s section.

    :param known: the top-level keys that stay where they are (the common keys but
        ``algorithm``, ``resources``, the engine sections).
    :param commons: the common keys (and ``resources``) a claimed key must not be a near miss of.
    :raises ConfigError: for a key given at the top and in the section with different values.
    """
    claimed = {
        key: value
        for key, value in data.items()
        if isinstance(key, str) and key not in known and layout.claims(key, value)
    }
    if not claimed:
        return data
    for key in claimed:
        # A key the layout names is the engine's own; one claimed only because the engine
        # takes any key (a processor) may be a common key misspelt, which would do nothing.
        near = None if key.lstrip("+") in layout.section_keys else near_miss(key, commons)
        if near is not None:
            raise ConfigError(
                f"{where}: unknown config key '{key}' (did you mean '{near}'?); "
                f"engine '{engine}' takes keys of its own, but not one this close "
                "to a common key"
            )
    section = data.get(engine, {})
    if not isinstance(section, dict):
        raise not_a_section(where, engine)
    kept = {key: value for key, value in data.items() if key not in claimed}
    kept[engine] = _merge_once(claimed, section, where, engine, "")
    return kept


def near_miss(key: str, commons: tuple[str, ...]) -> str | None:
    """The common key (or ``resources``) among ``commons`` that ``key`` is a near miss of, or
    ``None``.

    A near miss is the same key in another case or with ``-``/``_`` dropped or changed
    (``learningRate``), two adjacent letters swapped (``modle``), or, for a common key of six
    or more letters, one edit (``learning_rat``, ``max_step``; two from ten letters on). A key
    that adds whole words to a common key (``clip_ratio_c``) is another key. Looser likeness
    (``did_you_mean``'s) would refuse an engine's own keys such as ``model_path`` or ``mode``.
    """
    if key in commons:
        return None
    word, words = _key_letters(key), key.lstrip("+").lower().replace("-", "_").split("_")
    for common in commons:
        letters, common_words = _key_letters(common), common.split("_")
        if len(words) > len(common_words) and words[: len(common_words)] == common_words:
            continue
        allowed = 2 if len(letters) >= 10 else 1 if len(letters) >= 6 else 0
        if word == letters or swapped(word, letters) or edit_distance(word, letters) <= allowed:
            return common
    return None


def _key_letters(key: str) -> str:
    """A key compared by its letters: lower case, without ``+``, ``-`` and ``_``."""
    return key.lower().lstrip("+").replace("-", "").replace("_", "")


def _merge_once(
    top: dict[str, Any], section: dict[str, Any], where: str, engine: str, prefix: str
) -> dict[str, Any]:
    """``top`` deep-merged into a copy of ``section``; a key in both must hold one value."""
    merged = dict(section)
    for key, value in top.items():
        dotted = f"{prefix}{key}"
        if key not in merged:
            merged[key] = value
        elif isinstance(value, dict) and isinstance(merged[key], dict):
            merged[key] = _merge_once(value, merged[key], where, engine, f"{dotted}.")
        elif value != merged[key]:
            raise ConfigError(
                f"{where}: config key '{dotted}' is {describe_value(value)} but "
                f"'{engine}.{dotted}' is {describe_value(merged[key])}: give it once, at the "
                f"top or under '{engine}:'"
            )
    return merged


def not_a_section(where: str, key: str) -> ConfigError:
    return ConfigError(f"{where}: '{key}' must be a mapping of {key} settings")


def whole_config_hint(
    key: str, engine: str | None, declarations: Mapping[str, SettingsDeclaration]
) -> str:
    """``; this looks like a whole <engine> config ...`` for a top-level key of an installed
    engine's own config file, given to another engine (``""`` otherwise)."""
    for name, declared in declarations.items():
        if name != engine and key.lstrip("+") in declared.config_keys:
            return (
                f"; this looks like a whole {declared.label} config: run it with --engine {name}, "
                f"or put it under '{name}:'"
            )
    return ""


def other_engine_section(
    key: str,
    value: Any,
    declarations: Mapping[str, SettingsDeclaration] | None,
    commons: tuple[str, ...],
) -> bool:
    """Whether ``key`` holds the section of an engine not installed here, as a job that trains
    on several engines carries: a mapping under a name that is neither a common key misspelt
    nor a key of an installed engine's own config. Only where the installed engines were asked
    (``declarations``): without them every section is named by ``engine_names``."""
    if declarations is None or not isinstance(value, dict):
        return False
    if any(key.lstrip("+") in declared.config_keys for declared in declarations.values()):
        return False
    return _ENGINE_NAME.fullmatch(key) is not None and not did_you_mean(key, commons)


# An engine's name, as its entry point spells it.
_ENGINE_NAME = re.compile(r"[a-z][a-z0-9_-]*")
