"""Records what it sees into ``<run dir>/recorded.jsonl``, one JSON object per event.

- ``check_dataset``, as a wrapper around the engine's implementation: the engine it wrapped,
  the number of training rows, which earlier results the context already held, and the type
  of what the engine returned.
- ``report_metrics``: every logged step and its metrics.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path
from typing import Any

from aworld_train import hookimpl

RECORD_FILE = "recorded.jsonl"


def _record(run_dir: Path, event: dict[str, Any]) -> None:
    with (run_dir / RECORD_FILE).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(event) + "\n")


@hookimpl(wrapper=True)
def check_dataset(
    train_dataset: Any, test_dataset: Any, agent: Any, ctx: Any
) -> Generator[None, Any, Any]:
    result = yield
    _record(
        ctx.run_dir,
        {
            "hook": "check_dataset",
            "engine": ctx.engine,
            "rows": len(train_dataset),
            "agent": type(agent).__name__,
            "engine_result": type(result).__name__,
        },
    )
    return result


@hookimpl
def report_metrics(step: int, metrics: dict[str, float], ctx: Any) -> None:
    _record(ctx.run_dir, {"hook": "report_metrics", "step": step, "metrics": metrics})
