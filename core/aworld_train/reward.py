"""Reward: resolve the user's reward functions, check their signature, run them on a sample.

The canonical signature, as VeRL uses it::

    reward(data_source, solution_str, ground_truth, extra_info=None) -> float | dict

A dict carries ``score`` plus extra metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aworld_train.errors import RewardError


@dataclass
class RewardFunction:
    """One reward function and its weight.

    :ivar name: how it is shown and logged (``exact_match``, ``rewards.py:score``, ...).
    :ivar fn: the callable with the canonical signature.
    :ivar weight: its weight in the total.
    :ivar ref: a reference another process can import it from: ``/abs/path/file.py:function``
        or ``package.module:function``; ``None`` for a callable that is not importable (a
        lambda, a closure). Engines that load rewards in another process use it.
    """

    name: str
    fn: Callable[..., Any]
    weight: float = 1.0
    ref: str | None = None


@dataclass
class RewardResult:
    """The weighted total of one completion and the metrics behind it."""

    score: float
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class RewardSpec:
    """The resolved reward functions of a job."""

    functions: list[RewardFunction]

    def score(
        self,
        data_source: str,
        solution_str: str,
        ground_truth: str,
        extra_info: dict[str, Any] | None = None,
        row: int | None = None,
    ) -> RewardResult:
        """Score one completion with every function and return the weighted total.

        ``metrics`` holds each function's score under ``rewards/<name>`` and the extra keys of
        dict results under their own names.

        :param row: the dataset row, named in the error when a function fails.
        :raises RewardError: when a function raises or returns neither a number nor a dict with
            a numeric ``score``, naming the function, the row and the exception.
        """
        raise NotImplementedError


def resolve_reward(reward: Any, base_dir: Path | None = None) -> RewardSpec:
    """Resolve a reward given as a callable, ``path/to/file.py:function``,
    ``package.module:function``, a built-in name, ``{name: <any of these>, weight: w}``, or a
    list of these; then check each function's signature.

    :raises RewardError: naming the file, module or function that is wrong.
    """
    raise NotImplementedError


def check_reward_on_row(spec: RewardSpec, row: dict[str, Any], row_index: int = 0) -> RewardResult:
    """Run every reward function on a sample row, using the row's ground truth as the
    completion, so a reward that raises or returns a non-number fails before any training.

    :raises RewardError: naming the function, the row and the exception.
    """
    raise NotImplementedError
