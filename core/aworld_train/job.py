"""The job file: one YAML file naming the engine, agent, datasets, reward and config.

Relative paths inside a job file are resolved from the file's own folder. The job a run saves
(``runs/<run>/job.yaml``, with absolute paths) is a job file too, and loads as any other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from aworld_train.config_rules import describe_value
from aworld_train.errors import JobError, did_you_mean


@dataclass
class Job:
    """A job, from a file, from CLI flags, or both."""

    engine: str | None = None
    agent: Any = None
    train_dataset: Any = None
    test_dataset: Any = None
    reward: Any = None
    columns: dict[str, str] | None = None
    config: Any = None
    run_path: str = "runs"
    base_dir: Path = field(default_factory=Path.cwd)


JOB_FIELDS = tuple(f.name for f in fields(Job) if f.name != "base_dir")


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(row, dict) for row in value)


def _is_reward(value: Any) -> bool:
    return _is_text(value) or isinstance(value, dict)


def _is_columns(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(key, str) and isinstance(name, str) for key, name in value.items())


# What each field accepts in a job file, and how an error line words it.
_FIELD_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "engine": (_is_text, "an engine name (a string)"),
    "agent": (lambda v: _is_text(v) or isinstance(v, dict),
              "an agent file, a module:factory or file.py:factory reference, or a mapping"),
    "train_dataset": (lambda v: _is_text(v) or _is_rows(v),
                      "a dataset file path or a list of rows (mappings)"),
    "test_dataset": (lambda v: _is_text(v) or _is_rows(v),
                     "a dataset file path or a list of rows (mappings)"),
    "reward": (lambda v: _is_reward(v) or (isinstance(v, list) and all(map(_is_reward, v))),
               "a reward name, a file.py[:function] or module:function reference, a mapping "
               "{name, weight}, or a list of these"),
    "columns": (_is_columns, "a mapping of column names to column names (strings)"),
    "config": (lambda v: _is_text(v) or isinstance(v, dict),
               "a mapping of config keys or a config file path"),
    "run_path": (_is_text, "a string path"),
}


def load_job(path: str | Path | None, **flags: Any) -> Job:
    """Read a job file (or none) and apply the CLI flags that replace its fields.

    Paths given as flags are relative to the current folder; paths in the file are relative to
    the file's folder, so flag values are made absolute before they replace a field. A field
    that is null keeps its default.

    :raises JobError: for a missing or unreadable file, a YAML error, an unknown field or a
        field of the wrong type, naming the file and the field.
    """
    from aworld_train.files import read_mapping

    if path is None:
        data: dict[str, Any] = {}
        base_dir = Path.cwd()
    else:
        path = Path(path)
        data = read_mapping(path, JobError, "job file")
        base_dir = path.resolve().parent
        for key in data:
            if key not in JOB_FIELDS:
                raise JobError(
                    f"{path}: unknown job field '{key}'{did_you_mean(key, JOB_FIELDS)}; "
                    f"fields: {', '.join(JOB_FIELDS)}"
                )
        _check_types(data, str(path))
    for key, value in flags.items():
        if value is None:
            continue
        if key not in JOB_FIELDS:
            raise JobError(f"unknown job field '{key}'")
        data[key] = _absolute(value) if key != "engine" else value
    _check_types(data, "job")
    data = {key: value for key, value in data.items() if value is not None}
    if data.get("train_dataset") is None:
        raise JobError("no train_dataset: set it in the job file or pass --train-dataset")
    return Job(**data, base_dir=base_dir)


def _check_types(data: dict[str, Any], where: str) -> None:
    """:raises JobError: for the first field whose value its field does not accept."""
    for key, value in data.items():
        accepts, wanted = _FIELD_TYPES[key]
        if value is not None and not accepts(value):
            raise JobError(f"{where}: '{key}' must be {wanted}, got {describe_value(value)}")


def _absolute(value: Any) -> Any:
    """A flag's path made absolute, keeping ``file.py:function`` and built-in names intact."""
    if not isinstance(value, str):
        return value
    target, sep, name = value.rpartition(":")
    if sep and target.endswith(".py"):
        return f"{Path(target).resolve()}:{name}"
    return str(Path(value).resolve()) if Path(value).exists() else value
