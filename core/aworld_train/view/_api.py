"""What the page asks the view for: one function per question, each answering a JSON-able
value, or ``None`` for something that is not there (a 404). The server answers requests with
them and the static export records their answers, so both pages show the same data."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from aworld_train.view._runs import RunFolder

# The most samples one search lists.
SEARCH_LIMIT = 100
# How much of a prompt and a completion the list of samples shows.
_PREVIEW_CHARS = 160

Params = Mapping[str, str]


def runs(folder: RunFolder, params: Params) -> Any:
    summaries = (folder.summary(run_id) for run_id in folder.run_ids())
    return {"runs": [summary for summary in summaries if summary is not None]}


def run(folder: RunFolder, params: Params) -> Any:
    return folder.detail(params.get("run", ""))


def metrics(folder: RunFolder, params: Params) -> Any:
    """The curves from record ``after`` on (0: all of them) and the cursor to ask from next.

    A large file not read yet is first answered with a preview (``partial``: a line every so
    often, the cursor still 0), so that the page draws at once and asks again for the whole.
    """
    files = folder.run(params.get("run", ""))
    if files is None:
        return None
    columns = folder.metrics(files)
    if columns is None:
        return {"curves": {}, "next": 0}
    after = _integer(params.get("after")) or 0
    if after == 0 and columns.needs_preview():
        return {"curves": columns.preview(), "next": 0, "partial": True}
    columns.refresh()
    return {"curves": columns.since(after), "next": columns.records}


def samples(folder: RunFolder, params: Params) -> Any:
    """The newest samples that match the search (``step``, ``min_reward``, ``q``)."""
    files = folder.run(params.get("run", ""))
    index = folder.samples(files) if files is not None else None
    if index is None:
        return None
    found, matches = index.search(
        step=_integer(params.get("step")),
        min_reward=_number(params.get("min_reward")),
        text=params.get("q", ""),
        limit=SEARCH_LIMIT,
    )
    rows = [
        {
            "index": number,
            "step": sample.get("step"),
            "reward": sample.get("reward"),
            "prompt": _preview(sample.get("prompt")),
            "completion": _preview(sample.get("completion")),
            "tokens": bool(sample.get("episode")),
        }
        for number, sample in zip(found, index.read_at(found))
    ]
    return {"samples": rows, "matches": matches, "total": len(index)}


def sample(folder: RunFolder, params: Params) -> Any:
    files = folder.run(params.get("run", ""))
    index = folder.samples(files) if files is not None else None
    number = _integer(params.get("index"))
    return None if index is None or number is None else index.sample(number)


ANSWERS: dict[str, Callable[[RunFolder, Params], Any]] = {
    "runs": runs,
    "run": run,
    "metrics": metrics,
    "samples": samples,
    "sample": sample,
}


def _integer(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def _preview(value: Any) -> str:
    if isinstance(value, list):  # chat messages: the last one is the row's question
        value = value[-1].get("content") if value and isinstance(value[-1], dict) else ""
    text = " ".join(str(value or "").split())
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"
