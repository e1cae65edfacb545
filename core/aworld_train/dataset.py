"""Dataset: load the user's rows into one canonical ``datasets.Dataset`` and validate each row.

Canonical columns: ``prompt`` (a string or a list of ``{role, content}`` messages),
``ground_truth`` (a string), ``data_source`` (a string, filled in when absent) and
``extra_info`` (a dict, with the row's ``index`` filled in when absent). Other columns pass
through. A ``columns:`` mapping ``{canonical: user_column}`` renames user columns first.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import DatasetError

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
    raise NotImplementedError
