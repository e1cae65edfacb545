"""The job file: one YAML file naming the engine, agent, datasets, reward and config.

Relative paths inside a job file are resolved from the file's own folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

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


def load_job(path: str | Path | None, **flags: Any) -> Job:
    """Read a job file (or none) and apply the CLI flags that replace its fields.

    Paths given as flags are relative to the current folder; paths in the file are relative to
    the file's folder, so flag values are made absolute before they replace a field.

    :raises JobError: for a missing file, a YAML error, or an unknown field.
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
    for key, value in flags.items():
        if value is None:
            continue
        if key not in JOB_FIELDS:
            raise JobError(f"unknown job field '{key}'")
        data[key] = _absolute(value) if key != "engine" else value
    if data.get("train_dataset") is None:
        raise JobError("no train_dataset: set it in the job file or pass --train-dataset")
    return Job(**data, base_dir=base_dir)


def _absolute(value: Any) -> Any:
    """A flag's path made absolute, keeping ``file.py:function`` and built-in names intact."""
    if not isinstance(value, str):
        return value
    target, sep, name = value.rpartition(":")
    if sep and target.endswith(".py"):
        return f"{Path(target).resolve()}:{name}"
    return str(Path(value).resolve()) if Path(value).exists() else value
