"""The metrics reporter engines call with each logged step, and how progress is shown."""

from __future__ import annotations

import json
import math
import numbers
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aworld_train.run.files import METRICS_FILE

# Shown beside the progress, in this order, when an engine reports them.
_HEADLINE = ("reward", "loss")
# Without a terminal (a log file, nohup, CI) progress is a line every this many percent.
LINE_EVERY_PERCENT = 5
# ... or, while the engine has not said how many steps there are, every this many logged steps.
LINE_EVERY_STEPS = 20


class MetricsReporter:
    """Writes each step to ``metrics.jsonl`` (:func:`read_metrics` reads it back), shows
    progress and tells plugins.

    Engines call :meth:`start` once they know how many steps the run has, then :meth:`log` for
    every logged step.

    :param inherited: the records of the run this one resumes. The new ``metrics.jsonl`` opens
        with those up to the step the engine resumes from, so that it and the curves hold the
        whole run.
    """

    def __init__(
        self,
        path: Path | None,
        on_log: Callable[[int, dict[str, float]], None] | None = None,
        show_progress: bool = True,
        inherited: list[dict[str, Any]] | None = None,
    ) -> None:
        self.path = path
        self.history: list[dict[str, Any]] = []
        self._on_log = on_log
        self._show_progress = show_progress
        self._display: _RichBar | _ProgressLines | None = None
        self._inherited = list(inherited or [])

    def start(self, total_steps: int | None, completed: int = 0) -> None:
        """Show progress for ``total_steps`` steps (``None`` when unknown), ``completed`` of
        them done already (a resumed run); a second call sets the total once the engine knows
        it."""
        if completed:
            self._take_inherited(up_to=completed)
        if not self._show_progress:
            return
        if self._display is None:
            self._display = _RichBar() if sys.stdout.isatty() else _ProgressLines()
        self._display.start(total_steps, completed)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        """Record the metrics of global step ``step``.

        Values that are not finite numbers are dropped: a JSON line must stay parseable.
        """
        clean = {
            key: float(value)
            for key, value in metrics.items()
            if isinstance(value, numbers.Real)
            and not isinstance(value, bool)
            and math.isfinite(value)
        }
        self._take_inherited(up_to=int(step) - 1)
        record = {"step": int(step), "time": round(time.time(), 3), **clean}
        self._append([record])
        if self._display is not None:
            self._display.update(int(step), clean)
        if self._on_log is not None:
            self._on_log(int(step), clean)

    def stop(self) -> None:
        """Close the progress display."""
        if self._display is not None:
            self._display.stop()
            self._display = None

    def last(self) -> dict[str, Any]:
        """The most recent value of every metric logged so far."""
        merged: dict[str, Any] = {}
        for record in self.history:
            merged.update(record)
        merged.pop("time", None)
        return merged

    def _take_inherited(self, up_to: int) -> None:
        """Write the resumed run's records up to step ``up_to``, once, before any new one."""
        records, self._inherited = [r for r in self._inherited if r["step"] <= up_to], []
        self._append(records)

    def _append(self, records: list[dict[str, Any]]) -> None:
        self.history.extend(records)
        if self.path is not None and records:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.writelines(json.dumps(record) + "\n" for record in records)


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The records :class:`MetricsReporter` wrote to a run's ``metrics.jsonl``; a line cut short
    by a killed process is skipped."""
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int):
            records.append(record)
    return records


def _headline(metrics: dict[str, float]) -> str:
    return "  ".join(f"{key} {metrics[key]:.4g}" for key in _HEADLINE if key in metrics)


class _RichBar:
    """A progress bar, for a terminal."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("[bold]training"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[headline]}"),
        )
        self._task: Any = None

    def start(self, total: int | None, completed: int) -> None:
        if self._task is None:
            self._task = self._progress.add_task(
                "train", total=total, completed=completed, headline=""
            )
            self._progress.start()
        else:
            self._progress.update(self._task, total=total, completed=completed)

    def update(self, step: int, metrics: dict[str, float]) -> None:
        self._progress.update(self._task, completed=step, headline=_headline(metrics))

    def stop(self) -> None:
        self._progress.stop()


class _ProgressLines:
    """Plain progress lines on stdout, for a log file: the first logged step, then one every
    :data:`LINE_EVERY_PERCENT` percent (step, reward, loss, elapsed time, time left)."""

    def __init__(self) -> None:
        self._began = time.monotonic()
        self._total: int | None = None
        # The step and time the current total was set at: the pace counts from there, so the
        # time the engine spent loading its model does not slow the estimate.
        self._origin = (0, self._began)
        self._shown: int | None = None  # the last shown percent bucket (or count of steps)
        self._logged = 0

    def start(self, total: int | None, completed: int) -> None:
        self._total = total
        self._origin = (completed, time.monotonic())

    def update(self, step: int, metrics: dict[str, float]) -> None:
        self._logged += 1
        if self._total:
            bucket = step * 100 // self._total // LINE_EVERY_PERCENT
        else:
            bucket = self._logged // LINE_EVERY_STEPS
        if bucket == self._shown:
            return
        self._shown = bucket
        now = time.monotonic()
        parts = [
            f"training  step {step}"
            + (f"/{self._total} ({step * 100 // self._total}%)" if self._total else "")
        ]
        if metrics_text := _headline(metrics):
            parts.append(metrics_text)
        parts.append(f"elapsed {_clock(now - self._began)}")
        done, since = step - self._origin[0], now - self._origin[1]
        if self._total and done > 0:
            parts.append(f"ETA {_clock(since / done * max(self._total - step, 0))}")
        print("  ".join(parts), flush=True)

    def stop(self) -> None:
        return None


def count_lines(label: str, total: int, unit: str = "row") -> Callable[[int], None]:
    """Plain progress lines on stdout for work counted in ``unit`` (``eval``'s rows), as
    :class:`_ProgressLines` shows training's steps without a terminal: the first advance, then
    one every :data:`LINE_EVERY_PERCENT` percent, with the elapsed time and the time left.
    Returns the function that advances the count."""
    began = time.monotonic()
    state = {"done": 0, "shown": -1}

    def advance(count: int) -> None:
        state["done"] += count
        done = state["done"]
        bucket = done * 100 // max(total, 1) // LINE_EVERY_PERCENT
        if bucket == state["shown"]:
            return
        state["shown"] = bucket
        elapsed = time.monotonic() - began
        parts = [
            f"{label}  {unit} {done}/{total} ({done * 100 // max(total, 1)}%)",
            f"elapsed {_clock(elapsed)}",
        ]
        if 0 < done < total:
            parts.append(f"ETA {_clock(elapsed / done * (total - done))}")
        print("  ".join(parts), flush=True)

    return advance


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


#: Told the total number of steps and the steps already done, when training starts.
StartFn = Callable[[int, int], None]
#: Told the global step and the metrics of each logged step.
LogFn = Callable[[int, dict[str, Any]], None]
