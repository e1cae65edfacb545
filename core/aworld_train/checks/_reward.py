"""The reward checked on the training rows before any training: each sampled row's ground truth
scored as the completion, all in one child process with a time limit (the reward is the user's
code), so a reward that fails, hangs or ends the process on some row fails ``check`` in one
line naming the row."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aworld_train.errors import RewardError
from aworld_train.isolation import Heartbeat, call_isolated
from aworld_train.reward import (
    RewardFunction,
    RewardResult,
    RewardSpec,
    call_checked,
    is_number,
    where_scored,
)

#: The most training rows ``check`` scores with their ground truth as the completion: all rows
#: of a dataset this size or smaller, else this many spread evenly over it.
CHECK_ROWS = 1000
#: Seconds of scoring after which ``check`` starts no further row (the row then running still
#: has ``reward_timeout``): a slow reward is checked on fewer rows, not for longer.
CHECK_SECONDS = 1.0
#: Two scores closer than this are the same score (float sums of weighted functions).
_SAME_SCORE = 1e-9


@dataclass
class GroundTruthScores:
    """What the reward scored on the ground truth of the rows ``check`` sampled.

    :ivar rows: the rows scored, in the order they were scored (row 0 first).
    :ivar scores: each row's weighted total, in the same order.
    :ivar dataset_rows: how many rows the dataset holds.
    :ivar first: the first row's result (row 0 in a check), with each function's metrics.
    """

    rows: list[int]
    scores: list[float]
    dataset_rows: int
    first: RewardResult

    @property
    def low(self) -> float:
        return min(self.scores)

    @property
    def high(self) -> float:
        return max(self.scores)

    def below_high(self) -> list[tuple[int, float]]:
        """The rows whose ground truth scores below the highest score seen, by row."""
        return sorted(
            (row, score)
            for row, score in zip(self.rows, self.scores)
            if score < self.high - _SAME_SCORE
        )

    def describe(self) -> str:
        """The check table's text: the range on the ground truth, over how many rows."""
        span = (
            f"{self.low:.3g}"
            if self.low >= self.high - _SAME_SCORE
            else f"{self.low:.3g} to {self.high:.3g}"
        )
        below = len(self.below_high())
        share = "all" if len(self.rows) == self.dataset_rows else f"{len(self.rows):,} of"
        text = f"the ground truth scores {span} on {share} {self.dataset_rows:,} rows"
        return text + (f" ({below} below {self.high:.3g})" if below else "")

    def warning(self) -> str | None:
        """A warning when the right answer scores below the reward's maximum (the highest
        score seen) on some rows: a reward that misreads some answers, worth knowing before
        training on it."""
        below = self.below_high()
        if not below:
            return None
        shown = ", ".join(f"{row} ({score:.3g})" for row, score in below[:5])
        more = f" and {len(below) - 5} more" if len(below) > 5 else ""
        rows = "row" if len(below) == 1 else "rows"
        return (
            f"reward: the ground truth, scored as the completion, gets less than "
            f"{self.high:.3g} on {len(below)} of {len(self.rows)} rows checked ({rows} "
            f"{shown}{more}): a right answer should get the reward's maximum; check how "
            "the reward reads these rows' answers"
        )


def sample_rows(count: int, budget: int = CHECK_ROWS) -> list[int]:
    """The rows ``check`` scores, in the order it scores them: every row of a dataset of at
    most ``budget`` rows, else ``budget`` rows spread evenly from the first to the last. Row 0
    comes first, then halves, quarters, ... of the span, so a scoring cut short by the time
    budget still covers the whole dataset."""
    if count <= 0:
        return []
    taken = min(count, max(budget, 1))
    spread = [round(i * (count - 1) / (taken - 1)) for i in range(taken)] if taken > 1 else [0]
    order: list[int] = []
    seen: set[int] = set()
    step = 1 << max(taken - 1, 0).bit_length()
    while step:
        for position in range(0, taken, step):
            if position not in seen:
                seen.add(position)
                order.append(spread[position])
        step //= 2
    return order


def check_reward_on_rows(
    spec: RewardSpec,
    dataset: Any,
    timeout: float = 5.0,
    rows: int = CHECK_ROWS,
    seconds: float = CHECK_SECONDS,
) -> GroundTruthScores:
    """Score rows of ``dataset`` with every reward function, each row's ground truth as the
    completion, so a reward that fails on some row fails before any training.

    The rows are :func:`sample_rows`; scoring stops starting rows after ``seconds``. All of
    them run in one child process (:func:`aworld_train.isolation.call_isolated`): a reward that
    hangs, calls ``sys.exit``, ends or crashes the process fails the check in one line instead
    of ending or stalling it.

    :param dataset: a ``datasets.Dataset`` or a list of canonical rows.
    :param timeout: seconds each function may take on one row (config ``reward_timeout``).
    :raises RewardError: naming the function, the first row it failed on and what went wrong:
        it raised, returned ``None``, NaN, an infinity or anything but a number or a dict with
        a numeric ``score``, hung, or ended the process.
    """
    order = sample_rows(len(dataset), rows)
    if not order:
        raise RewardError("the training dataset has no rows to score the reward on")
    return _score_rows(
        spec, lambda: _read_rows(dataset, order), order, len(dataset), timeout, seconds
    )


def check_reward_on_row(
    spec: RewardSpec, row: dict[str, Any], row_index: int = 0, timeout: float = 5.0
) -> RewardResult:
    """Run every reward function once on one row, as :func:`check_reward_on_rows` does.

    :raises RewardError: naming the function, the row and what went wrong.
    """
    return _score_rows(spec, lambda: [row], [row_index], 1, timeout, math.inf).first


def _read_rows(dataset: Any, order: list[int]) -> list[dict[str, Any]]:
    """The rows ``order`` names, in that order: a ``datasets.Dataset`` reads them in one
    selection (a row at a time costs ten times more), a list by index."""
    if hasattr(dataset, "select") and hasattr(dataset, "to_list"):
        return dataset.select(order).to_list()
    return [dataset[index] for index in order]


def _score_rows(
    spec: RewardSpec,
    read: Callable[[], list[dict[str, Any]]],
    order: list[int],
    dataset_rows: int,
    timeout: float,
    seconds: float,
) -> GroundTruthScores:
    """Score the rows ``order`` names (``read`` returns them, in the child) in one child
    process, each function call a step of a heartbeat, so each has ``timeout`` seconds and an
    error names the row it was on."""
    functions = spec.functions
    heartbeat = Heartbeat()

    def running() -> str:
        step = max(heartbeat.step, 0)
        return where_scored(functions[step % len(functions)], order[step // len(functions)])

    def score_all() -> tuple[list[float], dict[str, float]]:
        rows = read()
        started = time.monotonic()
        scores: list[float] = []
        metrics: dict[str, float] = {}
        for position, (index, row) in enumerate(zip(order, rows)):
            if position and time.monotonic() - started > seconds:
                break
            result = spec.total(_beating(heartbeat, position * len(functions), index, row))
            scores.append(result.score)
            if position == 0:
                metrics = result.metrics
        return scores, metrics

    scores, metrics = call_isolated(
        score_all,
        timeout=timeout,
        what=running,
        error=RewardError,
        heartbeat=heartbeat,
        hint="set config reward_timeout to allow more",
    )
    return GroundTruthScores(
        order[: len(scores)], scores, dataset_rows, RewardResult(scores[0], metrics)
    )


def _beating(
    heartbeat: Heartbeat, first_step: int, index: int, row: dict[str, Any]
) -> Callable[[RewardFunction], float | dict[str, float]]:
    """Score ``row`` (its ground truth as the completion) with one function, a heartbeat step
    each: what :meth:`RewardSpec._total` calls for each function."""
    arguments = (
        row.get("data_source", ""),
        str(row["ground_truth"]),
        row["ground_truth"],
        row.get("extra_info"),
    )
    step = first_step

    def value_of(function: RewardFunction) -> float | dict[str, float]:
        nonlocal step
        heartbeat.beat(step)
        step += 1
        return _plain(call_checked(function, index, *arguments))

    return value_of


def _plain(value: float | dict[str, Any]) -> float | dict[str, float]:
    """A checked result as plain floats, which any process can unpickle (numpy scalars, and a
    dict's values that are not numbers, stay behind)."""
    if isinstance(value, dict):
        return {k: float(v) for k, v in value.items() if is_number(v)}
    return float(value)
