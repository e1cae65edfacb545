"""One dataset row checked and made canonical: the ``columns:`` mapping applied (a dotted path
reads a nested field), the required columns present, the prompt a string or chat messages,
``data_source`` and ``extra_info`` filled in. The caller adds which row it is to the error."""

from __future__ import annotations

from typing import Any

from aworld_train.errors import DatasetError, did_you_mean

CANONICAL_COLUMNS = ("prompt", "ground_truth", "data_source", "extra_info")


def column_mapping(columns: dict[str, str] | None) -> dict[str, str]:
    """The job's ``{canonical: user_column}`` mapping, checked; a user column may be a dotted
    path into nested fields (``reward_model.ground_truth``)."""
    if not columns:
        return {}
    if not isinstance(columns, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in columns.items()
    ):
        raise DatasetError(
            "columns must map canonical names to your column names, "
            "e.g. {prompt: question, ground_truth: answer}"
        )
    for key in columns:
        if key not in CANONICAL_COLUMNS:
            raise DatasetError(
                f"columns: unknown canonical column '{key}'{did_you_mean(key, CANONICAL_COLUMNS)}"
                f" (canonical columns: {', '.join(CANONICAL_COLUMNS)})"
            )
    return dict(columns)


class RowError(Exception):
    """What is wrong with one row; the caller adds which row it is."""


REQUIRED_COLUMNS = ("prompt", "ground_truth")
#: Where VeRL's own layout keeps the answer (VeRL's data scripts, AWorld Train's GAIA data):
#: the ground truth of a row with no ``ground_truth`` column when none is mapped.
VERL_GROUND_TRUTH = "reward_model.ground_truth"


def canonical_row(
    row: Any, index: int, columns: dict[str, str], default_source: str
) -> dict[str, Any]:
    """The row renamed, checked and filled in.

    :param columns: the checked ``{canonical: user_column}`` mapping.
    :raises RowError: saying what is wrong with it.
    """
    if not isinstance(row, dict):
        raise RowError(f"a row must be an object, got {type(row).__name__}")
    raw, row = row, _renamed(row, columns)
    for required in REQUIRED_COLUMNS:
        if row.get(required) is None:
            raise RowError(_missing(required, columns, raw, reason=None))
    _check_prompt(row["prompt"])
    truth = row["ground_truth"]
    if isinstance(truth, bool) or not isinstance(truth, (str, int, float)):
        raise RowError(
            f"column 'ground_truth' must be a string or a number, got {type(truth).__name__}"
        )
    row["ground_truth"] = str(truth)
    source = row.get("data_source")
    if source is None:
        row["data_source"] = default_source
    elif not isinstance(source, str):
        raise RowError("column 'data_source' must be a string")
    extra = row.get("extra_info")
    if extra is None:
        extra = {}
    if not isinstance(extra, dict):
        raise RowError(f"column 'extra_info' must be an object, got {type(extra).__name__}")
    row["extra_info"] = {"index": index, **extra}
    return row


def _row_columns(row: dict[str, Any], columns: dict[str, str]) -> dict[str, str]:
    """The mapping for this row: the job's, plus VeRL's layout (``reward_model.ground_truth``)
    for a row that has neither a ``ground_truth`` column nor one mapped onto it."""
    if "ground_truth" in columns or "ground_truth" in row or "reward_model" not in row:
        return columns
    return {**columns, "ground_truth": VERL_GROUND_TRUTH}


def _renamed(row: dict[str, Any], columns: dict[str, str]) -> dict[str, Any]:
    """The row with each mapped column under its canonical name: a column the row has is
    renamed in place; a dotted path into a nested field is read, and the column that holds
    it stays (VeRL's ``reward_model`` passes through).

    :raises RowError: for a mapping that is ambiguous on this row, or a path the row lacks
        for a required column (an optional one is then filled in as if absent).
    """
    mapping = _row_columns(row, columns)
    for canonical, source in mapping.items():
        if source != canonical:
            _check_mapped(row, canonical, source)
    renames = {source: canonical for canonical, source in mapping.items() if source in row}
    renamed = {renames.get(key, key): value for key, value in row.items()}
    for canonical, source in mapping.items():
        if source in row:  # renamed above
            continue
        try:
            renamed[canonical] = _follow(row, source)
        except _PathMissing as missing:
            if canonical in REQUIRED_COLUMNS:
                raise RowError(_missing(canonical, columns, row, reason=str(missing))) from None
    return renamed


def _missing(
    canonical: str, columns: dict[str, str], row: dict[str, Any], reason: str | None
) -> str:
    """``missing column 'ground_truth' (mapped from 'answer')[: why]; map your column ...``.

    :param row: the row as read, before the mapping.
    """
    mapping = _row_columns(row, columns)
    named = f"'{canonical}'"
    if canonical in columns:
        named += f" (mapped from '{columns[canonical]}')"
    elif canonical in mapping:
        named += f" (read from '{mapping[canonical]}', the nested layout)"
    why = f": {reason}" if reason else ""
    return (
        f"missing column {named}{why}; map your column with columns: {{{canonical}: <your column>}}"
    )


class _PathMissing(Exception):
    """Why a row lacks the value at a column path."""


def _follow(row: dict[str, Any], path: str) -> Any:
    """The value at ``path`` (``column`` or ``column.field.field``) in the row.

    :raises _PathMissing: saying which part of the path the row lacks.
    """
    if path in row:  # a column whose own name has a dot in it
        return row[path]
    first, *fields = path.split(".")
    if first not in row:
        raise _PathMissing(f"the row has no column '{first}'{did_you_mean(first, row)}")
    value, walked = row[first], first
    for name in fields:
        if value is None:
            raise _PathMissing(f"'{walked}' is null")
        if not isinstance(value, dict):
            raise _PathMissing(f"'{walked}' is {type(value).__name__}, not an object")
        if name not in value:
            raise _PathMissing(f"'{walked}' has no field '{name}'{did_you_mean(name, value)}")
        value, walked = value[name], f"{walked}.{name}"
    return value


def _check_mapped(row: dict[str, Any], canonical: str, source: str) -> None:
    """A mapping must read a column the row has, and not onto one it has already."""
    if canonical not in row:
        return
    try:
        _follow(row, source)
    except _PathMissing:
        raise RowError(
            f"columns: {{{canonical}: {source}}} but the row has no column "
            f"'{source}' (it has '{canonical}' itself); drop the mapping or fix the "
            "name"
        ) from None
    raise RowError(
        f"columns: {{{canonical}: {source}}} but the row has both '{source}' "
        f"and '{canonical}'; rename one of them"
    )


_ROLES = ("system", "user", "assistant", "tool")


def _check_prompt(prompt: Any) -> None:
    if isinstance(prompt, str):
        if not prompt.strip():
            raise RowError("column 'prompt' is empty")
        return
    if isinstance(prompt, list) and prompt:
        for position, message in enumerate(prompt):
            if not (
                isinstance(message, dict)
                and message.get("role") in _ROLES
                and isinstance(message.get("content"), str)
            ):
                raise RowError(
                    f"column 'prompt' message {position} must be "
                    f"{{role: {'|'.join(_ROLES)}, content: <string>}}, got {message!r}"
                )
        return
    raise RowError(
        f"column 'prompt' must be a string or a list of {{role, content}} messages, "
        f"got {type(prompt).__name__}"
    )
