"""Dataset: load the user's rows into one canonical ``datasets.Dataset``, streaming: each row is
read, checked (:mod:`aworld_train.dataset._rows`) and turned into Arrow a batch at a time.

Canonical columns: ``prompt`` (a string or a list of ``{role, content}`` messages),
``ground_truth`` (a string), ``data_source`` (a string, filled in when absent) and
``extra_info`` (a dict, with the row's ``index`` filled in when absent). Other columns pass
through. A ``columns:`` mapping ``{canonical: user_column}`` renames user columns first; a user
column may be a dotted path into nested fields (``{ground_truth: reward_model.ground_truth}``).

VeRL's own layout loads as it is (``prompt`` as messages, ``data_source``, ``ability``,
``reward_model: {style, ground_truth}``, ``extra_info``, ``agent_name``): a row with no
``ground_truth`` column, when none is mapped, takes ``reward_model.ground_truth``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.dataset._rows import RowError, canonical_row, column_mapping
from aworld_train.errors import DatasetError
from aworld_train.job.files import MAX_DEPTH, deeper_than
from aworld_train.job.references import require_file, resolve_path

if TYPE_CHECKING:
    import datasets
    import pyarrow

# Rows are checked one at a time and turned into Arrow in batches of this many, so memory
# holds one batch of Python rows, not the whole dataset.
BATCH_ROWS = 10_000
# A JSONL line longer than this is refused rather than read into memory whole.
MAX_LINE_CHARS = 32 * 2**20
# Values nested deeper than this are refused: no real row comes close (a chat prompt is 3
# levels), and Arrow, and code that walks rows recursively, crash on deep enough nesting.
TOO_DEEP = f"a value is nested deeper than {MAX_DEPTH} levels"


@contextlib.contextmanager
def quiet_progress_bars() -> Iterator[None]:
    """Keep the progress bars ``datasets`` draws (``Map``, ``Filter``) off the terminal for the
    block: an engine's check converts datasets while ``check`` prints its table."""
    from datasets.utils import (
        are_progress_bars_disabled,
        disable_progress_bars,
        enable_progress_bars,
    )

    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            enable_progress_bars()


def load_dataset(
    source: Any,
    columns: dict[str, str] | None = None,
    base_dir: Path | None = None,
    role: str = "train_dataset",
) -> datasets.Dataset:
    """Load a dataset given as a ``.jsonl``/``.json``/``.csv``/``.parquet`` path (relative to
    ``base_dir``), a ``datasets.Dataset``, or a list of dicts; rename, validate and fill in the
    canonical columns. Rows stream: each is checked as it is read and the Arrow table grows a
    batch at a time. Nothing is written to disk (no Hugging Face cache).

    :param role: how errors name the dataset when it is not a file (``train_dataset``).
    :raises DatasetError: naming the file, the row (the line for JSONL) and the column.
    """
    import datasets
    from datasets.fingerprint import generate_random_fingerprint
    from datasets.table import InMemoryTable

    mapping = column_mapping(columns)
    rows = _open(source, base_dir, role)
    table = _build_table(_canonical_rows(rows, mapping), rows)
    # A fingerprint of our own: datasets would derive one by pickling the whole table, a copy
    # as large as the dataset. It only names cache files, which an in-memory dataset has none of.
    return datasets.Dataset(InMemoryTable(table), fingerprint=generate_random_fingerprint())


@dataclass
class _Rows:
    """A source's raw rows as ``(position, row)``, and how messages name them.

    :ivar name: the whole dataset, for messages (its path, or ``train_dataset``).
    :ivar default_source: the ``data_source`` of rows that have none.
    :ivar rows: the raw rows with their position: the line number for JSONL, else the index.
    :ivar by_line: whether positions are line numbers.
    """

    name: str
    default_source: str
    rows: Iterable[tuple[int, Any]]
    by_line: bool = False

    def where(self, position: int) -> str:
        """How a message names the row at ``position``."""
        return f"{self.name}:{position}" if self.by_line else f"{self.name} row {position}"


def _open(source: Any, base_dir: Path | None, role: str) -> _Rows:
    if isinstance(source, (str, Path)):
        path = resolve_path(source, base_dir)
        require_file(path, DatasetError, role)
        suffix = path.suffix.lower()
        readers = {
            ".jsonl": _read_jsonl,
            ".json": _read_json,
            ".csv": _read_csv,
            ".parquet": _read_parquet,
        }
        if suffix not in readers:
            raise DatasetError(
                f"{path}: unsupported dataset format '{suffix}' (use .jsonl, .json, .csv or .parquet)"
            )
        return _Rows(str(path), path.stem, _guarded(path, readers[suffix]), suffix == ".jsonl")
    if isinstance(source, list):
        return _Rows(role, role, _list_rows(source, role))
    if type(source).__name__ == "Dataset" and hasattr(source, "to_list"):
        return _Rows(role, role, enumerate(_dataset_rows(source)))
    raise DatasetError(
        f"{role} must be a .jsonl/.json/.csv/.parquet path, a datasets.Dataset or a list of "
        f"dicts, not {type(source).__name__}"
    )


Reader = Callable[[Path], Iterator[tuple[int, Any]]]


def _guarded(path: Path, reader: Reader) -> Iterator[tuple[int, Any]]:
    """The reader's rows, with a failure to read the file turned into one line."""
    try:
        yield from reader(path)
    except DatasetError:
        raise
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from None


def _read_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    # utf-8-sig: a byte-order mark at the start (some Windows editors write one) is not data.
    with path.open(encoding="utf-8-sig") as handle:
        lines = iter(partial(handle.readline, MAX_LINE_CHARS + 1), "")
        for number, line in enumerate(lines, start=1):
            if len(line.rstrip("\n")) > MAX_LINE_CHARS:
                raise DatasetError(
                    f"{path}:{number}: line longer than {MAX_LINE_CHARS:,} "
                    "characters; split the row or shorten its values"
                )
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{number}: invalid JSON: {exc.msg}") from None
            except RecursionError:
                raise DatasetError(f"{path}:{number}: {TOO_DEEP}") from None


def _read_json(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except RecursionError:
        raise DatasetError(f"{path}: {TOO_DEEP}") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: a .json dataset must hold a list of rows")
    yield from enumerate(data)


def _read_csv(path: Path) -> Iterator[tuple[int, Any]]:
    import pandas

    chunks = pandas.read_csv(
        path, dtype=str, keep_default_na=False, encoding="utf-8-sig", chunksize=BATCH_ROWS
    )
    index = 0
    for chunk in chunks:
        for row in chunk.to_dict(orient="records"):
            yield index, row
            index += 1


def _read_parquet(path: Path) -> Iterator[tuple[int, Any]]:
    import pyarrow.parquet

    try:
        batches = pyarrow.parquet.ParquetFile(path).iter_batches(batch_size=BATCH_ROWS)
        yield from enumerate(row for batch in batches for row in batch.to_pylist())
    except Exception as exc:  # pyarrow's own error types
        raise DatasetError(f"cannot read {path} as parquet: {exc}") from None


def _dataset_rows(dataset: datasets.Dataset) -> Iterator[dict[str, Any]]:
    for batch in dataset.with_format(None).iter(batch_size=BATCH_ROWS):
        names = list(batch)
        for values in zip(*batch.values()):
            yield dict(zip(names, values))


def _list_rows(rows: list[Any], role: str) -> Iterator[tuple[int, Any]]:
    """Rows given in Python, each checked for depth first: Arrow crashes on deep nesting,
    which a file cannot reach (the JSON reader stops far earlier)."""
    for index, row in enumerate(rows):
        if deeper_than(row, MAX_DEPTH):
            raise DatasetError(f"{role} row {index}: {TOO_DEEP}")
        yield index, row


def _canonical_rows(source: _Rows, mapping: dict[str, str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The source's rows, each checked and made canonical as it is read."""
    first_is_text: bool | None = None
    for index, (position, raw) in enumerate(source.rows):
        try:
            row = canonical_row(raw, index, mapping, source.default_source)
        except RowError as exc:
            raise DatasetError(f"{source.where(position)}: {exc}") from None
        is_text = isinstance(row["prompt"], str)
        if first_is_text is None:
            first_is_text = is_text
        elif is_text != first_is_text:
            kinds = ("a string", "a message list")
            if not first_is_text:
                kinds = kinds[::-1]
            raise DatasetError(
                f"{source.where(position)}: column 'prompt' is {kinds[1]} but row 0's is "
                f"{kinds[0]}; use one form for every row"
            )
        yield position, row


def _build_table(rows: Iterator[tuple[int, dict[str, Any]]], source: _Rows) -> pyarrow.Table:
    """One Arrow table from the rows, converted a batch at a time; every column any row has
    (``None`` where a row lacks it), its type widened across batches as Arrow would across
    the whole column (ints and floats make floats)."""
    import pyarrow

    # Every column seen so far, in order of appearance, with its first value's type and row.
    columns: dict[str, tuple[type, int] | None] = {}
    tables = []
    batch: list[tuple[int, dict[str, Any]]] = []
    for item in rows:
        batch.append(item)
        if len(batch) == BATCH_ROWS:
            tables.append(_batch_table(batch, columns, source))
            batch = []
    if batch:
        tables.append(_batch_table(batch, columns, source))
    if not tables:
        raise DatasetError(f"{source.name}: the dataset is empty")
    try:
        return pyarrow.concat_tables(tables, promote_options="permissive")
    except pyarrow.ArrowException as exc:  # a clash below the top level of a column
        raise DatasetError(
            f"{source.name}: columns hold values of different types across rows: {exc}"
        ) from None


def _batch_table(
    batch: list[tuple[int, dict[str, Any]]],
    columns: dict[str, tuple[type, int] | None],
    source: _Rows,
) -> pyarrow.Table:
    """One batch of checked rows as Arrow; ``columns`` carries what earlier batches saw."""
    import pyarrow

    before = dict(columns)
    for _, row in batch:
        for column in row:
            if column not in columns:
                columns[column] = None
    arrays = {}
    for column, first in columns.items():
        values = [row.get(column) for _, row in batch]
        kinds = set(map(type, values)) - {type(None)} | ({first[0]} if first else set())
        if len(kinds) > 1 and not kinds <= {int, float}:
            raise DatasetError(_type_clash(batch, before, source))
        if first is None and kinds:
            columns[column] = next(
                (type(value), position)
                for (position, _), value in zip(batch, values)
                if value is not None
            )
        arrays[column] = values
    try:
        table = pyarrow.table({column: pyarrow.array(values) for column, values in arrays.items()})
    except (pyarrow.ArrowException, OverflowError) as exc:  # a clash below the top level
        raise DatasetError(
            f"{source.name}: columns hold values of different types across rows: {exc}"
        ) from None
    if any(_type_depth(field.type) > MAX_DEPTH for field in table.schema):
        deep = next(position for position, row in batch if deeper_than(row, MAX_DEPTH))
        raise DatasetError(f"{source.where(deep)}: {TOO_DEEP}")
    return table


def _type_depth(kind: pyarrow.DataType) -> int:
    """How deep an Arrow type nests (a string is 0, a list of strings 1)."""
    deepest, stack = 0, [(kind, 0)]
    while stack:
        kind, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((kind.field(i).type, depth + 1) for i in range(kind.num_fields))
    return deepest


def _type_clash(
    batch: list[tuple[int, dict[str, Any]]],
    first: dict[str, tuple[type, int] | None],
    source: _Rows,
) -> str:
    """Name the first row of the batch whose value in a column has another type than the
    column's first value (ints and floats mix); ``first`` holds what earlier batches saw."""
    known = {column: seen for column, seen in first.items() if seen is not None}
    for position, row in batch:
        for column, value in row.items():
            if value is None:
                continue
            if column not in known:
                known[column] = (type(value), position)
                continue
            kind, first_position = known[column]
            if type(value) is not kind and not {type(value), kind} <= {int, float}:
                return (
                    f"{source.where(position)}: column '{column}' holds "
                    f"{type(value).__name__} but {kind.__name__} at "
                    f"{source.where(first_position)}; use one type per column"
                )
    raise AssertionError("a batch whose column types clash has a row that shows it")


#: The format a canonical copy of a dataset file is written in, by the user file's suffix: the
#: same format, except CSV, which cannot hold a message list or ``extra_info``'s object.
CANONICAL_SUFFIXES = {
    ".jsonl": ".jsonl",
    ".json": ".json",
    ".parquet": ".parquet",
    ".csv": ".jsonl",
}


def write_canonical(dataset: datasets.Dataset, folder: Path, name: str, like: str | Path) -> Path:
    """Write a canonical dataset (as :func:`load_dataset` returns it) to ``folder/name``, in
    the format of the user's file ``like`` (:data:`CANONICAL_SUFFIXES`), for code that reads
    files: a ``TrainerProcessor`` given the job's dataset path with ``columns`` applied.

    :returns: the file written.
    """
    import pyarrow.parquet

    suffix = CANONICAL_SUFFIXES.get(Path(like).suffix.lower(), ".jsonl")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}{suffix}"
    if suffix == ".parquet":
        pyarrow.parquet.write_table(dataset.data.table, path)
        return path
    rows = _dataset_rows(dataset)
    with path.open("w", encoding="utf-8") as handle:
        if suffix == ".jsonl":  # one row at a time: memory holds a batch, not the dataset
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            json.dump(list(rows), handle, ensure_ascii=False)
    return path
