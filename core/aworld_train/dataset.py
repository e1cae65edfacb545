"""Dataset: load the user's rows into one canonical ``datasets.Dataset`` and validate each row.

Canonical columns: ``prompt`` (a string or a list of ``{role, content}`` messages),
``ground_truth`` (a string), ``data_source`` (a string, filled in when absent) and
``extra_info`` (a dict, with the row's ``index`` filled in when absent). Other columns pass
through. A ``columns:`` mapping ``{canonical: user_column}`` renames user columns first.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import DatasetError, did_you_mean

if TYPE_CHECKING:
    import datasets

CANONICAL_COLUMNS = ("prompt", "ground_truth", "data_source", "extra_info")


def load_dataset(
    source: Any,
    columns: dict[str, str] | None = None,
    base_dir: Path | None = None,
    role: str = "train_dataset",
) -> datasets.Dataset:
    """Load a dataset given as a ``.jsonl``/``.json``/``.csv``/``.parquet`` path (relative to
    ``base_dir``), a ``datasets.Dataset``, or a list of dicts; rename, validate and fill in the
    canonical columns. Nothing is written to disk (no Hugging Face cache).

    :param role: how errors name the dataset when it is not a file (``train_dataset``).
    :raises DatasetError: naming the file, the row (the line for JSONL) and the column.
    """
    import datasets

    rows, where, default_source = _read_rows(source, base_dir, role)
    if not rows:
        raise DatasetError(f"{where(None)}: the dataset is empty")
    mapping = _column_mapping(columns)
    canonical = [
        _canonical_row(row, index, where, mapping, default_source) for index, row in enumerate(rows)
    ]
    _check_consistent_prompts(canonical, where)
    try:
        return datasets.Dataset.from_list(canonical)
    except Exception as exc:  # arrow cannot unify a column's types across rows
        raise DatasetError(_type_clash(canonical, where) or (
            f"{where(None)}: columns hold values of different types across rows: {exc}"
        )) from None


Locator = Callable[[int | None], str]


def _read_rows(source: Any, base_dir: Path | None, role: str) -> tuple[list[Any], Locator, str]:
    """The raw rows, a function that names a row for messages, and the default data_source."""
    if isinstance(source, (str, Path)):
        from aworld_train.references import resolve_path

        path = resolve_path(source, base_dir)
        if not path.is_file():
            raise DatasetError(f"{role} not found: {path}")
        suffix = path.suffix.lower()
        readers = {".jsonl": _read_jsonl, ".json": _read_json, ".csv": _read_csv,
                   ".parquet": _read_parquet}
        if suffix not in readers:
            raise DatasetError(
                f"{path}: unsupported dataset format '{suffix}' (use .jsonl, .json, .csv or .parquet)"
            )
        try:
            rows = readers[suffix](path)
        except DatasetError:
            raise
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise DatasetError(f"cannot read {path}: {exc}") from None
        # JSONL rows are named by line (one row per non-blank line), others by row index.
        if suffix == ".jsonl":
            lines = [line for line, _ in rows]
            return ([row for _, row in rows],
                    lambda i: f"{path}" if i is None else f"{path}:{lines[i]}",
                    path.stem)
        return rows, lambda i: f"{path}" if i is None else f"{path} row {i}", path.stem
    if isinstance(source, list):
        return source, lambda i: role if i is None else f"{role} row {i}", role
    if type(source).__name__ == "Dataset" and hasattr(source, "to_list"):
        return source.to_list(), lambda i: role if i is None else f"{role} row {i}", role
    raise DatasetError(
        f"{role} must be a .jsonl/.json/.csv/.parquet path, a datasets.Dataset or a list of "
        f"dicts, not {type(source).__name__}"
    )


def _read_jsonl(path: Path) -> list[tuple[int, Any]]:
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append((number, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: invalid JSON: {exc.msg}") from None
    return rows


def _read_json(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: a .json dataset must hold a list of rows")
    return data


def _read_csv(path: Path) -> list[Any]:
    import pandas

    frame = pandas.read_csv(path, dtype=str, keep_default_na=False)
    return frame.to_dict(orient="records")


def _read_parquet(path: Path) -> list[Any]:
    import pyarrow.parquet

    try:
        return pyarrow.parquet.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow's own error types
        raise DatasetError(f"cannot read {path} as parquet: {exc}") from None


def _column_mapping(columns: dict[str, str] | None) -> dict[str, str]:
    """``{user_column: canonical}`` from the job's ``{canonical: user_column}``."""
    if not columns:
        return {}
    if not isinstance(columns, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in columns.items()
    ):
        raise DatasetError("columns must map canonical names to your column names, "
                           "e.g. {prompt: question, ground_truth: answer}")
    for key in columns:
        if key not in CANONICAL_COLUMNS:
            raise DatasetError(
                f"columns: unknown canonical column '{key}'{did_you_mean(key, CANONICAL_COLUMNS)}"
                f" (canonical columns: {', '.join(CANONICAL_COLUMNS)})"
            )
    return {user: canonical for canonical, user in columns.items()}


def _canonical_row(
    row: Any, index: int, where: Locator, mapping: dict[str, str], default_source: str
) -> dict[str, Any]:
    if not isinstance(row, dict):
        raise DatasetError(f"{where(index)}: a row must be an object, got {type(row).__name__}")
    row = {mapping.get(key, key): value for key, value in row.items()}
    for required in ("prompt", "ground_truth"):
        if required not in row or row[required] is None:
            user = next((u for u, c in mapping.items() if c == required), None)
            named = f"'{required}'" + (f" (mapped from '{user}')" if user else "")
            raise DatasetError(
                f"{where(index)}: missing column {named}; map your column with "
                f"columns: {{{required}: <your column>}}"
            )
    _check_prompt(row["prompt"], where(index))
    truth = row["ground_truth"]
    if isinstance(truth, bool) or not isinstance(truth, (str, int, float)):
        raise DatasetError(
            f"{where(index)}: column 'ground_truth' must be a string or a number, "
            f"got {type(truth).__name__}"
        )
    row["ground_truth"] = str(truth)
    source = row.get("data_source")
    if source is None:
        row["data_source"] = default_source
    elif not isinstance(source, str):
        raise DatasetError(f"{where(index)}: column 'data_source' must be a string")
    extra = row.get("extra_info")
    if extra is None:
        extra = {}
    if not isinstance(extra, dict):
        raise DatasetError(
            f"{where(index)}: column 'extra_info' must be an object, got {type(extra).__name__}"
        )
    row["extra_info"] = {"index": index, **extra}
    return row


_ROLES = ("system", "user", "assistant", "tool")


def _check_prompt(prompt: Any, where: str) -> None:
    if isinstance(prompt, str):
        if not prompt.strip():
            raise DatasetError(f"{where}: column 'prompt' is empty")
        return
    if isinstance(prompt, list) and prompt:
        for position, message in enumerate(prompt):
            if not (
                isinstance(message, dict)
                and message.get("role") in _ROLES
                and isinstance(message.get("content"), str)
            ):
                raise DatasetError(
                    f"{where}: column 'prompt' message {position} must be "
                    f"{{role: {'|'.join(_ROLES)}, content: <string>}}, got {message!r}"
                )
        return
    raise DatasetError(
        f"{where}: column 'prompt' must be a string or a list of {{role, content}} messages, "
        f"got {type(prompt).__name__}"
    )


def _check_consistent_prompts(rows: list[dict[str, Any]], where: Locator) -> None:
    first_is_text = isinstance(rows[0]["prompt"], str)
    for index, row in enumerate(rows):
        if isinstance(row["prompt"], str) != first_is_text:
            kinds = ("a string", "a message list") if first_is_text else ("a message list", "a string")
            raise DatasetError(
                f"{where(index)}: column 'prompt' is {kinds[1]} but row 0's is {kinds[0]}; "
                "use one form for every row"
            )


def _type_clash(rows: list[dict[str, Any]], where: Locator) -> str | None:
    """Name the first row whose value in a column has another type than the column's first
    value (ints and floats mix), or ``None`` when the clash is deeper than the top level."""
    first: dict[str, tuple[type, int]] = {}
    for index, row in enumerate(rows):
        for column, value in row.items():
            if value is None:
                continue
            if column not in first:
                first[column] = (type(value), index)
                continue
            kind, first_row = first[column]
            if type(value) is not kind and not {type(value), kind} <= {int, float}:
                return (f"{where(index)}: column '{column}' holds {type(value).__name__} but "
                        f"{kind.__name__} at {where(first_row)}; use one type per column")
    return None
