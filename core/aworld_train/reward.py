"""Reward: resolve the user's reward functions, check their signature, run them on a sample.

The canonical signature, as VeRL uses it::

    reward(data_source, solution_str, ground_truth, extra_info=None) -> float | dict

A dict carries ``score`` plus extra metrics.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aworld_train.errors import RewardError, did_you_mean
from aworld_train.isolation import describe


@dataclass
class RewardFunction:
    """One reward function and its weight.

    :ivar name: its short name, logged as ``rewards/<name>`` (``exact_match``, ``score``).
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

    def __call__(
        self,
        data_source: str,
        solution_str: str,
        ground_truth: str,
        extra_info: dict[str, Any] | None = None,
    ) -> float:
        """The weighted total: a spec is itself a reward with the canonical signature."""
        return self.score(data_source, solution_str, ground_truth, extra_info).score

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
        return self._total(lambda function: _call(
            function, row, data_source, solution_str, ground_truth, extra_info))

    def _total(
        self, value_of: Callable[[RewardFunction], float | dict[str, Any]]
    ) -> RewardResult:
        """The weighted total of ``value_of(function)`` (a checked result) over the functions."""
        total = 0.0
        metrics: dict[str, float] = {}
        for function in self.functions:
            value = value_of(function)
            if isinstance(value, dict):
                metrics.update(
                    {k: float(v) for k, v in value.items() if k != "score" and _is_number(v)}
                )
                value = value["score"]
            metrics[f"rewards/{function.name}"] = float(value)
            total += function.weight * float(value)
        return RewardResult(score=total, metrics=metrics)


def resolve_reward(reward: Any, base_dir: Path | None = None) -> RewardSpec:
    """Resolve a reward given as a callable, ``path/to/file.py:function``,
    ``path/to/file.py`` (a file that defines one reward function), ``package.module:function``,
    a built-in name, ``{name: <any of these>, weight: w}``, or a list of these; then check each
    function's signature.

    :raises RewardError: naming the file, module or function that is wrong.
    """
    if isinstance(reward, RewardSpec):
        return reward
    if reward is None or reward == []:
        raise RewardError("no reward given: name a built-in (exact_match, answer_match), "
                          "a file.py[:function] or a package.module:function")
    items = reward if isinstance(reward, list) else [reward]
    return RewardSpec([_resolve_one(item, base_dir) for item in items])


def check_reward_on_row(
    spec: RewardSpec, row: dict[str, Any], row_index: int = 0, timeout: float = 5.0
) -> RewardResult:
    """Run every reward function once on a sample row, using the row's ground truth as the
    completion, so a reward that fails fails before any training.

    Each function runs in a child process of its own (:func:`aworld_train.isolation.call_isolated`):
    a reward that hangs, calls ``sys.exit``, ends or crashes the process fails the check in
    one line instead of ending or stalling it.

    :param timeout: seconds each function may take on the row (config ``reward_timeout``).
    :raises RewardError: naming the function, the row and what went wrong.
    """
    from aworld_train.isolation import call_isolated

    arguments = (row.get("data_source", ""), str(row["ground_truth"]), row["ground_truth"],
                 row.get("extra_info"))

    def isolated(function: RewardFunction) -> float | dict[str, float]:
        return call_isolated(
            lambda: _plain(_call(function, row_index, *arguments)),
            timeout=timeout,
            what=_where(function, row_index),
            error=RewardError,
            hint="set config reward_timeout to allow more",
        )

    return spec._total(isolated)


CANONICAL_SIGNATURE = "reward(data_source, solution_str, ground_truth, extra_info=None)"


def _resolve_one(item: Any, base_dir: Path | None) -> RewardFunction:
    from aworld_train.references import import_object, resolve_path, split_reference
    from aworld_train.rewards import BUILTIN_REWARDS

    weight = 1.0
    if isinstance(item, dict):
        unknown = set(item) - {"name", "weight"}
        if "name" not in item or unknown:
            raise RewardError(
                f"reward entry {item!r} must be {{name: <reward>, weight: <number>}}"
            )
        weight = item.get("weight", 1.0)
        if not _is_number(weight):
            raise RewardError(
                f"reward '{item['name']}': weight must be a finite number, got {weight!r}"
            )
        item = item["name"]
    if callable(item):
        name = getattr(item, "__name__", type(item).__name__)
        module = getattr(item, "__module__", None)
        qualname = getattr(item, "__qualname__", "")
        importable = module not in (None, "__main__") and "<" not in qualname
        function = RewardFunction(name, item, float(weight), f"{module}:{qualname}" if importable else None)
    elif isinstance(item, str) and item in BUILTIN_REWARDS:
        fn = BUILTIN_REWARDS[item]
        function = RewardFunction(item, fn, float(weight), f"aworld_train.rewards:{item}")
    elif isinstance(item, str) and (":" in item or item.endswith(".py")):
        reference = item if ":" in item else f"{item}:{_sole_reward(item, base_dir)}"
        fn = import_object(reference, RewardError, "reward", base_dir)
        target, attr = split_reference(reference)
        ref = f"{resolve_path(target, base_dir)}:{attr}" if target.endswith(".py") else reference
        function = RewardFunction(attr, fn, float(weight), ref)
    else:
        hint = did_you_mean(item, BUILTIN_REWARDS) if isinstance(item, str) else ""
        raise RewardError(
            f"reward {item!r}{hint} is not a built-in ({', '.join(BUILTIN_REWARDS)}), "
            "a path/to/file.py[:function] or a package.module:function"
        )
    if not callable(function.fn):
        raise RewardError(f"reward '{function.name}' is not callable")
    _check_signature(function)
    return function


def _sole_reward(path: str, base_dir: Path | None) -> str:
    """The name of the one reward function a file given without ``:function`` defines: of
    the public functions defined in the file itself (not those it imports), the one that
    takes the canonical arguments.

    :raises RewardError: naming the file and its functions when it defines none or several.
    """
    from aworld_train.references import load_file, resolve_path

    module = load_file(resolve_path(path, base_dir), RewardError, "reward")
    defined: dict[str, Callable[..., Any]] = {}
    for name, value in vars(module).items():
        if (inspect.isfunction(value) and value.__module__ == module.__name__
                and not name.startswith("_") and value not in defined.values()):
            defined[name] = value
    candidates = [name for name, fn in defined.items() if _takes_reward_arguments(fn)]
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        listed = f"{', '.join(candidates[:-1])} and {candidates[-1]}"
        raise RewardError(f"reward file {path} defines {listed}: name one, "
                          f"e.g. {path}:{candidates[0]}")
    others = ", ".join(f"{name}{inspect.signature(fn)}" for name, fn in defined.items())
    raise RewardError(f"reward file {path} defines no function {CANONICAL_SIGNATURE}"
                      + (f" (it defines {others})" if others else "")
                      + f"; define one, or name one as {path}:function")


def _takes_reward_arguments(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` can be called with the canonical reward arguments by name."""
    try:
        inspect.signature(fn).bind(data_source="", solution_str="", ground_truth="",
                                   extra_info=None)
    except TypeError:
        return False
    return True


def _check_signature(function: RewardFunction) -> None:
    try:
        signature = inspect.signature(function.fn)
    except (TypeError, ValueError):
        return  # a builtin without introspectable signature: the sample row will tell
    if not _takes_reward_arguments(function.fn):
        raise RewardError(
            f"reward '{function.ref or function.name}' has signature {signature}; "
            f"expected {CANONICAL_SIGNATURE}"
        )


def _call(
    function: RewardFunction,
    row: int | None,
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None,
) -> float | dict[str, Any]:
    where = _where(function, row)
    try:
        value = function.fn(
            data_source=data_source,
            solution_str=solution_str,
            ground_truth=ground_truth,
            extra_info=extra_info,
        )
    except Exception as exc:  # the user's code: name it, the row and the exception
        raise RewardError(f"{where} raised {describe(exc)}") from exc
    if isinstance(value, dict):
        if not _is_number(value.get("score")):
            raise RewardError(f"{where} returned a dict without a numeric 'score': {value!r}")
        return value
    if not _is_number(value):
        raise RewardError(
            f"{where} returned {type(value).__name__} {value!r}; expected a float or a dict "
            "with a 'score'"
        )
    return value


def _where(function: RewardFunction, row: int | None) -> str:
    named = f"reward '{function.ref or function.name}'"
    return named if row is None else f"{named} on row {row}"


def _plain(value: float | dict[str, Any]) -> float | dict[str, float]:
    """A checked result as plain floats, which any process can unpickle (numpy scalars, and a
    dict's values that are not numbers, stay behind)."""
    if isinstance(value, dict):
        return {k: float(v) for k, v in value.items() if _is_number(v)}
    return float(value)


def _is_number(value: Any) -> bool:
    # numbers.Real also admits numpy scalars (np.float32, np.int64) that rewards often return.
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
