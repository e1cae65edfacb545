"""The metrics reporter engines call with each logged step."""

from __future__ import annotations

import json
import math
import numbers
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

# Shown beside the progress bar, in this order, when an engine reports them.
_HEADLINE = ("reward", "loss")


class MetricsReporter:
    """Writes each step to ``metrics.jsonl``, drives the progress bar and tells plugins.

    Engines call :meth:`start` once they know how many steps the run has, then :meth:`log` for
    every logged step.
    """

    def __init__(
        self,
        path: Path | None,
        on_log: Callable[[int, dict[str, float]], None] | None = None,
        show_progress: bool = True,
    ) -> None:
        self.path = path
        self.history: list[dict[str, Any]] = []
        self._on_log = on_log
        self._show_progress = show_progress
        self._progress: Progress | None = None
        self._task: Any = None

    def start(self, total_steps: int | None, completed: int = 0) -> None:
        """Show a progress bar for ``total_steps`` steps (``None`` when unknown); a second call
        sets the total once the engine knows it."""
        if not self._show_progress:
            return
        if self._progress is not None:
            self._progress.update(self._task, total=total_steps, completed=completed)
            return
        self._progress = Progress(
            TextColumn("[bold]training"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[headline]}"),
        )
        self._task = self._progress.add_task(
            "train", total=total_steps, completed=completed, headline=""
        )
        self._progress.start()

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Record the metrics of global step ``step``.

        Values that are not finite numbers are dropped: a JSON line must stay parseable.
        """
        clean = {
            key: float(value)
            for key, value in metrics.items()
            if isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value)
        }
        record = {"step": int(step), "time": round(time.time(), 3), **clean}
        self.history.append(record)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
        if self._progress is not None:
            headline = "  ".join(f"{k} {clean[k]:.4g}" for k in _HEADLINE if k in clean)
            self._progress.update(self._task, completed=int(step), headline=headline)
        if self._on_log is not None:
            self._on_log(int(step), clean)

    def stop(self) -> None:
        """Close the progress bar."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def last(self) -> dict[str, Any]:
        """The most recent value of every metric logged so far."""
        merged: dict[str, Any] = {}
        for record in self.history:
            merged.update(record)
        merged.pop("time", None)
        return merged


#: Told the total number of steps and the steps already done, when training starts.
StartFn = Callable[[int, int], None]
#: Told the global step and the metrics of each logged step.
LogFn = Callable[[int, dict[str, Any]], None]


def trainer_callback(base: type, on_start: StartFn, on_log: LogFn) -> type:
    """A subclass of ``base`` (transformers' ``TrainerCallback``, or an engine's own subclass of
    it) that forwards the trainer's progress and log entries from the main process.

    The base class is passed in, so that this module does not import transformers.
    """

    class MetricsCallback(base):  # type: ignore[misc, valid-type]
        """Forwards the trainer's progress and log entries to aworld-train's metrics."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                on_start(state.max_steps, state.global_step)

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
            if state.is_world_process_zero and logs:
                on_log(state.global_step, dict(logs))

    return MetricsCallback
