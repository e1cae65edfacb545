"""The checks of the settings a job trains with: the trackers it logs to (the ones the job
names, then the ones the engine adds), the sections of other engines, which do nothing, and the
engine's ``effective_settings`` answer under the common names. Each check is a step of
:data:`aworld_train.checks.CHECKS`, given by name what it needs."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from aworld_train.checks._pipeline import Found
from aworld_train.errors import PluginError
from aworld_train.job.settings import PRECISIONS, Setting
from aworld_train.run.trackers import check_trackers, effective_trackers

if TYPE_CHECKING:
    from collections.abc import Mapping

    from aworld_train.checks._pipeline import EngineHooks, HandOff
    from aworld_train.job.declaration import SettingsDeclaration
    from aworld_train.job.config import TrainConfig
    from aworld_train.plugins.context import RunContext


def other_sections_warnings(
    config: TrainConfig, engine: str, declarations: Mapping[str, SettingsDeclaration]
) -> list[str]:
    """One line per key of another engine's section: it has no effect on ``engine``, and the
    common key that carries it to every engine, where that engine is installed and its
    declaration names one (``declarations``).

    A section whose engine has dotted keys (VeRL) is named by its leaf keys, dotted.
    """
    lines = []
    for name, section in config.sections.items():
        if name == engine:
            continue
        declared = declarations.get(name)
        for key in _section_keys(section, declared is not None and declared.dotted):
            common = declared.common_name(key) if declared else None
            carried = f"; the common key {common} carries it to every engine" if common else ""
            lines.append(
                f"config {name}.{key}: no effect on engine {engine} (only the {name} "
                f"engine reads the {name} section){carried}"
            )
    return lines


def _section_keys(section: dict[str, Any], dotted: bool, prefix: str = "") -> list[str]:
    """The keys of ``section``; with ``dotted``, the leaf keys of its nested mappings."""
    keys = []
    for key, value in section.items():
        if dotted and isinstance(value, dict) and value:
            keys += _section_keys(value, dotted, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def check_job_trackers(config: TrainConfig) -> tuple[str, ...]:
    """The trackers the job's ``report_to`` names are installed (and wandb has a key)."""
    check_trackers(config.report_to)
    return config.report_to


def describe_trackers(report_to: tuple[str, ...]) -> str:
    return f"{', '.join(report_to)}: installed"


def _report_to_row(settings: list[Setting] | None) -> Setting | None:
    return next((s for s in settings or () if s.name == "report_to"), None)


def engine_adds_trackers(config: TrainConfig, settings: list[Setting] | None) -> bool:
    """The engine will log to trackers the job's ``report_to`` did not name (its own section
    chose them, or its default does), which the trackers step has not checked."""
    row = _report_to_row(settings)
    return row is not None and bool(set(effective_trackers(row)) - set(config.report_to))


def check_effective_trackers(
    engine: str, settings: list[Setting] | None
) -> tuple[tuple[str, ...], str]:
    """The trackers the engine will really log to (its ``report_to`` row) are known, installed
    and, for wandb, have a key; the error names the key they came from."""
    row = _report_to_row(settings)
    assert row is not None
    if row.source == "job" or not row.engine_key:
        key = "report_to"
    else:
        key = f"{engine}.{row.engine_key}"
    if row.source == "default":
        key = f"{key} (the {engine} engine's default)"
    trackers = effective_trackers(row)
    check_trackers(trackers, key)
    return trackers, key


def describe_effective_trackers(checked: tuple[tuple[str, ...], str]) -> str:
    trackers, key = checked
    return f"{', '.join(trackers)} (from {key}): installed"


def effective_settings(hooks: EngineHooks, hand_off: HandOff, context: RunContext) -> Found:
    """The engine's answer to ``effective_settings``, checked, kept as ``settings`` (``None``
    when the engine reports none).

    :raises PluginError: for an answer that is not a list of ``Setting`` with unique names,
        ``device`` and a resolved ``precision`` among them and JSON values (a bug in the
        engine).
    """
    answer = hooks.call("effective_settings", engine_config=hand_off.config, ctx=context)
    if answer is None:
        return Found(None, settings=None)
    problem = _settings_problem(answer)
    if problem:
        raise PluginError(f"{hooks.info.label} effective_settings {problem}")
    settings = list(answer)
    return Found(settings, settings=settings)


def _settings_problem(answer: Any) -> str | None:
    """What is wrong with an ``effective_settings`` answer, or ``None``."""
    if not isinstance(answer, list) or not all(isinstance(s, Setting) for s in answer):
        return f"returned {type(answer).__name__}, not a list of Setting"
    values: dict[str, Any] = {}
    for setting in answer:
        if setting.name in values:
            return f"'{setting.name}' is reported twice"
        try:
            json.dumps(setting.value)
        except (TypeError, ValueError):
            return f"'{setting.name}' has a value that is not JSON: {setting.value!r}"
        values[setting.name] = setting.value
    missing = [name for name in ("device", "precision") if name not in values]
    if missing:
        return f"no {' or '.join(missing)} among the settings (every engine reports both)"
    if values["precision"] not in PRECISIONS[1:]:
        return (
            f"precision {values['precision']!r} is not the precision used (one of "
            f"{', '.join(PRECISIONS[1:])})"
        )
    return None


def describe_settings(settings: list[Setting] | None) -> str:
    if settings is None:
        return "not reported"
    values = {setting.name: setting.value for setting in settings}
    return f"{len(settings)} settings; device {values['device']}, precision {values['precision']}"
