"""Canonical rows → the JSONL ms-swift reads.

Each row becomes ``messages`` (the prompt as chat messages; for SFT the ground truth follows as
the assistant's reply) plus the columns rewards need: ``solution`` (swift's own name for the
reference answer), ``ground_truth``, ``data_source`` and ``extra_info``. ``extra_info`` is
stored as a JSON string because Arrow cannot hold dicts whose keys differ between rows; the
reward wrapper decodes it. Other columns pass through unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import DatasetError

from aworld_train_swift.rollout import PROMPT_COLUMN

if TYPE_CHECKING:
    import datasets

# The folder of the run directory the converted files go to.
DATA_DIR = "data"
# Columns swift reads itself; a pass-through column of one of these names would change training.
_RESERVED = {"messages", "solution", "images", "videos", "audios", "tools", "rejected_response"}


@dataclass
class SwiftDatasets:
    """The converted files, ready for swift's ``dataset`` / ``val_dataset`` arguments."""

    train: Path
    test: Path | None
    train_rows: int
    test_rows: int = 0


def prompt_messages(prompt: Any, role: str, row: int) -> list[dict[str, str]]:
    """The prompt of one row as a list of ``{role, content}`` messages."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list) and prompt:
        messages = []
        for turn in prompt:
            if not isinstance(turn, dict) or "role" not in turn or "content" not in turn:
                raise DatasetError(
                    f"{role} row {row}: column 'prompt' holds {turn!r}; each message needs "
                    "'role' and 'content'"
                )
            messages.append({"role": str(turn["role"]), "content": str(turn["content"])})
        return messages
    raise DatasetError(
        f"{role} row {row}: column 'prompt' must be a string or a list of chat messages, "
        f"got {type(prompt).__name__}"
    )


def convert_dataset(
    dataset: datasets.Dataset, path: Path, algorithm: str, role: str, keep_prompt: bool = False
) -> int:
    """Write ``dataset`` to ``path`` as swift JSONL and return the number of rows.

    :param algorithm: ``sft`` appends the ground truth as the assistant's reply; ``dpo`` too,
        as the chosen reply, with the row's ``rejected`` column as ``rejected_response``;
        ``grpo`` leaves the reply to the policy.
    :param keep_prompt: also keep the prompt as the job gave it (JSON text, a string or chat
        messages: :data:`~aworld_train_swift.rollout.PROMPT_COLUMN`), for an agent that gets
        the row as it is.
    :raises DatasetError: naming the dataset, the row and the column.
    """
    clashing = _RESERVED.intersection(dataset.column_names)
    if clashing:
        raise DatasetError(
            f"{role}: column '{sorted(clashing)[0]}' is a name ms-swift reads itself; rename it "
            "with the job's columns: mapping"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for index, row in enumerate(dataset):
            messages = prompt_messages(row["prompt"], role, index)
            ground_truth = row["ground_truth"]
            if algorithm in ("sft", "dpo"):
                if messages[-1]["role"] == "assistant":
                    raise DatasetError(
                        f"{role} row {index}: the prompt already ends with an assistant "
                        "message; SFT appends the ground truth as the reply"
                    )
                messages.append({"role": "assistant", "content": str(ground_truth)})
            record = {
                key: value
                for key, value in row.items()
                if key not in ("prompt", "extra_info", "rejected")
            }
            if algorithm == "dpo":
                rejected = row.get("rejected")
                if not isinstance(rejected, str) or not rejected:
                    raise DatasetError(
                        f"{role} row {index}: DPO needs a 'rejected' column holding the reply "
                        "to prefer less than the ground truth (map one with columns:)"
                    )
                record["rejected_response"] = rejected
            if keep_prompt:
                record[PROMPT_COLUMN] = json.dumps(row["prompt"], ensure_ascii=False, default=str)
            extra_info = row.get("extra_info") or {}
            record.update(
                messages=messages,
                solution=ground_truth,
                extra_info=json.dumps({"index": index, **extra_info}, default=str),
            )
            handle.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            count += 1
    if count == 0:
        raise DatasetError(f"{role}: the dataset has no rows")
    return count


def datasets_to_swift(
    train_dataset: datasets.Dataset | None,
    test_dataset: datasets.Dataset | None,
    algorithm: str,
    run_dir: Path,
    eval_limit: int | None = None,
    keep_prompt: bool = False,
) -> SwiftDatasets:
    """Convert both datasets into ``run_dir/data/{train,test}.jsonl``.

    :param eval_limit: keep the first this many rows of the test set (evaluation scores them).
    :param keep_prompt: keep each row's prompt as the job gave it (see :func:`convert_dataset`).
    :raises DatasetError: when the job gives no training dataset, or for a row swift cannot use.
    """
    if train_dataset is None:
        raise DatasetError(
            "no train_dataset: the swift engine trains on a dataset; set train_dataset in the "
            "job (a .jsonl, .json, .csv or .parquet file)"
        )
    folder = run_dir / DATA_DIR
    rows = convert_dataset(
        train_dataset, folder / "train.jsonl", algorithm, "train_dataset", keep_prompt
    )
    test, test_rows = None, 0
    if test_dataset is not None:
        if eval_limit is not None and eval_limit < len(test_dataset):
            test_dataset = test_dataset.select(range(eval_limit))
        test = folder / "test.jsonl"
        test_rows = convert_dataset(test_dataset, test, algorithm, "test_dataset", keep_prompt)
    return SwiftDatasets(
        train=folder / "train.jsonl", test=test, train_rows=rows, test_rows=test_rows
    )
