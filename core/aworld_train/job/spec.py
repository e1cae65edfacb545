"""The job: one :class:`Job`, whether it comes from a job file with CLI flags and ``-o``
overrides (:func:`load_job`) or from ``AgentTrainer(...)``'s arguments, resolved once
(:func:`resolve_job`): the check pipeline carries that job, ``ctx.given`` is it, the run's
folder is its ``run_path`` and a run saves it as ``job.yaml``.

Relative paths inside a job file are resolved from the file's own folder, those of flags from
the current one. The job a run saves (``runs/<run>/job.yaml``, with absolute paths) is a job
file too, and loads as any other.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aworld_train.job.config import JOB_FIELDS, read_config
from aworld_train.job.overrides import merge, parse_overrides
from aworld_train.job._rules import describe_value
from aworld_train.errors import JobError, did_you_mean
from aworld_train.job.references import absolute_reference, resolve_path


@dataclass(frozen=True)
class Job:
    """A job as the user gave it, ``None`` where they gave nothing. Resolved
    (:func:`resolve_job`), as every step after it reads it and ``ctx.given`` shows it, its paths
    are absolute and its ``-o`` overrides merged into ``config`` (a mapping then).

    Objects (an AWorld ``Agent``, a ``datasets.Dataset``, a callable, a mapping) are the
    user's own. Python users name two fields as AWorld Train does: ``reward_func`` is
    ``reward``, ``train_engine_name`` is ``engine`` (``AgentTrainer`` maps them).

    :ivar engine: the engine's name; ``None`` picks one.
    :ivar agent: the AWorld ``Agent``, the agent mapping, the agent file or the
        ``module:factory`` / ``file.py:factory`` reference.
    :ivar train_dataset: the dataset path, ``datasets.Dataset`` or list of rows.
    :ivar test_dataset: the same forms.
    :ivar reward: the callable, the reference, the built-in name, a ``{name, weight}``
        mapping, or a list of these.
    :ivar columns: the ``{canonical: user_column}`` mapping of both datasets, or ``None``.
    :ivar config: the config path or mapping.
    :ivar run_path: the folder that receives run directories.
    :ivar overrides: the ``key.sub=value`` config overrides (``-o``); a resolved job keeps
        them, merged into ``config``, so that an error line can name the override it is about.
    :ivar base_dir: the folder relative paths are resolved from (the job file's); ``None``:
        the current folder.
    :ivar written_config: the config as written, before the overrides, and how error lines name
        it (its file as the job named it, or ``config``): what the config check reads, so that
        an engine's layout claims the file's keys and the overrides' each, and an error names
        the file or the override; ``None``: the job is not resolved yet.
    :ivar as_written: the job before its paths were made absolute (flags applied), for error
        lines that name an input as the user wrote it; ``None``: the job is not resolved yet.
    """

    engine: str | None = None
    agent: Any = None
    train_dataset: Any = None
    test_dataset: Any = None
    reward: Any = None
    columns: dict[str, str] | None = None
    config: Any = None
    run_path: str | Path = "runs"
    overrides: tuple[str, ...] = ()
    base_dir: Path | None = None
    written_config: tuple[dict[str, Any], str] | None = field(
        default=None, repr=False, compare=False
    )
    as_written: Job | None = field(default=None, repr=False, compare=False)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(row, dict) for row in value)


def _is_reward(value: Any) -> bool:
    return _is_text(value) or isinstance(value, dict)


def _is_columns(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(key, str) and isinstance(name, str) for key, name in value.items()
    )


# What each field accepts in a job file, and how an error line words it.
_FIELD_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "engine": (_is_text, "an engine name (a string)"),
    "agent": (
        lambda v: _is_text(v) or isinstance(v, dict),
        "an agent file, a module:factory or file.py:factory reference, or a mapping",
    ),
    "train_dataset": (
        lambda v: _is_text(v) or _is_rows(v),
        "a dataset file path or a list of rows (mappings)",
    ),
    "test_dataset": (
        lambda v: _is_text(v) or _is_rows(v),
        "a dataset file path or a list of rows (mappings)",
    ),
    "reward": (
        lambda v: _is_reward(v) or (isinstance(v, list) and all(map(_is_reward, v))),
        "a reward name, a file.py[:function] or module:function reference, a mapping "
        "{name, weight}, or a list of these",
    ),
    "columns": (_is_columns, "a mapping of column names to column names (strings)"),
    "config": (
        lambda v: _is_text(v) or isinstance(v, dict),
        "a mapping of config keys or a config file path",
    ),
    "run_path": (_is_text, "a string path"),
}


def load_job(
    path: str | Path | None, overrides: tuple[str, ...] | list[str] = (), **flags: Any
) -> Job:
    """Read a job file (or none) with the CLI flags that replace its fields and the ``-o``
    config overrides, as one resolved job (:func:`resolve_job`).

    Paths given as flags are relative to the current folder; paths in the file are relative to
    the file's folder. A field that is null keeps its default.

    :raises JobError: for a missing or unreadable file, a YAML error, an unknown field or a
        field of the wrong type, naming the file and the field.
    """
    from aworld_train.job.files import read_mapping

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
    given = {key: value for key, value in flags.items() if value is not None}
    for key in given:
        if key not in JOB_FIELDS:
            raise JobError(f"unknown job field '{key}'")
    _check_types(given, "job")
    data = {key: value for key, value in data.items() if value is not None}
    if data.get("train_dataset") is None and given.get("train_dataset") is None:
        raise JobError("no train_dataset: set it in the job file or pass --train-dataset")
    return resolve_job(Job(**data, overrides=tuple(overrides), base_dir=base_dir), given)


def resolve_job(job: Job, flags: Mapping[str, Any] | None = None) -> Job:
    """The job every later step reads (the check pipeline, ``ctx.given``, the run's folder, the
    saved ``job.yaml``): ``job`` (a job file's, or ``AgentTrainer(...)``'s arguments) with the
    fields ``flags`` gives replacing its own, its paths absolute (:func:`_absolute_paths`), its
    config read (``written_config``) and, with ``-o`` overrides, the mapping with them merged
    in. A job resolved already is returned as it is.

    :param flags: the CLI's flags, their paths relative to the current folder (the job's are
        relative to its ``base_dir``).
    :raises ConfigError: for a config that cannot be read as a mapping, or a malformed override,
        naming the file or the override.
    """
    if job.written_config is not None:
        return job
    if flags:
        from_flags = _absolute_paths(Job(**flags), Path.cwd())
        job = replace(job, **{key: getattr(from_flags, key) for key in flags})
    written = read_config(job.config, job.base_dir)
    resolved = _absolute_paths(job, job.base_dir)
    if job.overrides:
        resolved = replace(resolved, config=merge(written[0], parse_overrides(job.overrides)))
    return replace(resolved, written_config=written, as_written=job)


def _check_types(data: dict[str, Any], where: str) -> None:
    """:raises JobError: for the first field whose value its field does not accept."""
    for key, value in data.items():
        accepts, wanted = _FIELD_TYPES[key]
        if value is not None and not accepts(value):
            raise JobError(f"{where}: '{key}' must be {wanted}, got {describe_value(value)}")


def _absolute_paths(job: Job, base: Path | None) -> Job:
    """The job with its paths absolute strings, resolved from ``base`` (``None``: the current
    folder): the dataset files and ``run_path``; the agent and config files that exist; the file
    of every ``file.py[:name]`` reference (the agent's, each reward's, in a list or a
    ``{name, weight}`` mapping). Anything else (a module reference, a built-in name, an object)
    is as it was."""
    return replace(
        job,
        agent=_existing_path(job.agent, base),
        train_dataset=_path(job.train_dataset, base),
        test_dataset=_path(job.test_dataset, base),
        reward=_absolute_reward(job.reward, base),
        config=_existing_path(job.config, base),
        run_path=_path(job.run_path, base),
    )


def _path(value: Any, base_dir: Path | None) -> Any:
    return str(resolve_path(value, base_dir)) if isinstance(value, (str, Path)) else value


def _existing_path(value: Any, base_dir: Path | None) -> Any:
    """A file that is there made absolute, and the file of a ``file.py:name`` reference; text
    that names no file (a ``module:factory`` reference) as it is."""
    if not isinstance(value, (str, Path)):
        return value
    reference = absolute_reference(str(value), base_dir)
    if reference != str(value):
        return reference
    path = resolve_path(value, base_dir)
    return str(path) if path.exists() else value


def _absolute_reward(reward: Any, base_dir: Path | None) -> Any:
    if isinstance(reward, list):
        return [_absolute_reward(item, base_dir) for item in reward]
    if isinstance(reward, dict) and "name" in reward:
        return {**reward, "name": _absolute_reward(reward["name"], base_dir)}
    return absolute_reference(reward, base_dir) if isinstance(reward, str) else reward
