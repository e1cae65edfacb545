"""Reward: resolve the user's reward functions, check their signature, and score a completion
with them (each result checked). ``check`` scores the training rows in an isolated child
process: :mod:`aworld_train.checks._reward`.

The canonical signature, as VeRL uses it::

    reward(data_source, solution_str, ground_truth, extra_info=None) -> float | dict

A dict carries ``score`` plus extra metrics.
"""

from __future__ import annotations

import inspect
import math
import numbers
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aworld_train.errors import RewardError, did_you_mean
from aworld_train.job.references import import_object, load_file, resolve_path, split_reference
from aworld_train.isolation import describe
from aworld_train.reward._builtin import BUILTIN_REWARDS


@dataclass
class RewardFunction:
    """One reward function and its weight.

    :ivar name: its short name, logged as ``rewards/<name>`` (``exact_match``, ``score``).
    :ivar fn: the callable with the canonical signature.
    :ivar weight: its weight in the total.
    :ivar ref: a reference another process can import it from: ``/abs/path/file.py:function``
        or ``package.module:function``; ``None`` for a callable that is not importable (a
        lambda, a closure). Engines that load rewards in another process use it. For an
        engine's own reward, the reference as the job wrote it (``swift:accuracy``).
    :ivar engine: the engine whose own reward this is (``swift`` for ``swift:accuracy``), or
        ``None`` for a function of the job's. Only that engine scores it, while training: the
        core neither calls nor checks it on the ground truth, and ``fn`` refuses to score.
    """

    name: str
    fn: Callable[..., Any]
    weight: float = 1.0
    ref: str | None = None
    engine: str | None = None


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
        return self.total(
            lambda function: call_checked(
                function, row, data_source, solution_str, ground_truth, extra_info
            )
        )

    def total(self, value_of: Callable[[RewardFunction], float | dict[str, Any]]) -> RewardResult:
        """The weighted total of ``value_of(function)`` (a checked result) over the functions."""
        total = 0.0
        metrics: dict[str, float] = {}
        for function in self.functions:
            value = value_of(function)
            if isinstance(value, dict):
                metrics.update(
                    {k: float(v) for k, v in value.items() if k != "score" and is_number(v)}
                )
                value = value["score"]
            metrics[f"rewards/{function.name}"] = float(value)
            total += function.weight * float(value)
        return RewardResult(score=total, metrics=metrics)


def resolve_reward(
    reward: Any, base_dir: Path | None = None, engines: Collection[str] = ()
) -> RewardSpec:
    """Resolve a reward given as a callable, ``path/to/file.py:function``,
    ``path/to/file.py`` (a file that defines one reward function), ``package.module:function``,
    a built-in name, an engine's own reward ``<engine>:<name>`` (``swift:accuracy``: see
    :func:`engine_reward`), ``{name: <any of these>, weight: w}``, or a list of these; then
    check each function's signature.

    :param engines: the installed engines' names: ``<engine>:<name>`` is an engine's own reward
        only for one of them (which wins over a Python module of that name).
    :raises RewardError: naming the file, module or function that is wrong.
    """
    if isinstance(reward, RewardSpec):
        return reward
    if reward is None or reward == []:
        raise RewardError(
            "no reward given: name a built-in (exact_match, answer_match), "
            "a file.py[:function] or a package.module:function"
        )
    items = reward if isinstance(reward, list) else [reward]
    return RewardSpec([_resolve_one(item, base_dir, engines) for item in items])


CANONICAL_SIGNATURE = "reward(data_source, solution_str, ground_truth, extra_info=None)"

#: What ``None`` from a reward means: refused, the same on every engine, in ``check`` and in
#: training (and in ``eval``). TRL and ms-swift would read it as "this function does not apply
#: to this sample" (a NaN left out of the weighted sum); VeRL has no such meaning (its reward
#: managers need a number for every completion), so one job would train differently per
#: engine. A ``None`` is also far more often a reward that fell off the end of its ``if``
#: chain than a deliberate choice, and ``check`` can then name the row.
NONE_REFUSED = (
    "a reward scores every completion with a number (return 0.0 for a completion "
    "it does not apply to)"
)


def _resolve_one(item: Any, base_dir: Path | None, engines: Collection[str]) -> RewardFunction:
    weight = 1.0
    if isinstance(item, dict):
        unknown = set(item) - {"name", "weight"}
        if "name" not in item or unknown:
            raise RewardError(f"reward entry {item!r} must be {{name: <reward>, weight: <number>}}")
        weight = item.get("weight", 1.0)
        if not is_number(weight):
            raise RewardError(
                f"reward '{item['name']}': weight must be a finite number, got {weight!r}"
            )
        item = item["name"]
    if callable(item):
        name = getattr(item, "__name__", type(item).__name__)
        module = getattr(item, "__module__", None)
        qualname = getattr(item, "__qualname__", "")
        importable = module not in (None, "__main__") and "<" not in qualname
        function = RewardFunction(
            name, item, float(weight), f"{module}:{qualname}" if importable else None
        )
    elif isinstance(item, str) and _engine_reference(item, engines) is not None:
        engine, name = _engine_reference(item, engines)  # type: ignore[misc]
        return engine_reward(engine, name, float(weight))
    elif isinstance(item, str) and item in BUILTIN_REWARDS:
        fn = BUILTIN_REWARDS[item]
        function = RewardFunction(item, fn, float(weight), f"aworld_train.reward._builtin:{item}")
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


#: ``<engine>:<name>``: an engine's name, then a registry name (no path, no module dots).
_ENGINE_REFERENCE = re.compile(r"([a-z][a-z0-9_-]*):([A-Za-z_][\w-]*)")


def _engine_reference(item: str, engines: Collection[str]) -> tuple[str, str] | None:
    """``(engine, name)`` when ``item`` names an engine's own reward: the part before the colon
    is one of ``engines``, which wins over a Python module of that name
    (``swift:accuracy`` is ms-swift's reward, not ``accuracy`` in the ``swift`` package)."""
    found = _ENGINE_REFERENCE.fullmatch(item)
    if found is None:
        return None
    return (found[1], found[2]) if found[1] in engines else None


def engine_reward(engine: str, name: str, weight: float = 1.0) -> RewardFunction:
    """An engine's own reward (``swift:accuracy``): the engine that trains scores it; nothing
    in the core can, so its function refuses to score in one line."""
    reference = f"{engine}:{name}"

    def scored_by_the_engine(
        data_source: str,
        solution_str: str,
        ground_truth: str,
        extra_info: dict[str, Any] | None = None,
    ) -> float:
        raise RewardError(
            f"reward '{reference}' is engine {engine}'s own reward: only that "
            "engine scores it, while training"
        )

    return RewardFunction(name, scored_by_the_engine, weight, reference, engine=engine)


def engine_rewards_for(spec: RewardSpec, engine: str) -> None:
    """:raises RewardError: for an engine's own reward (``swift:format``) in a job that trains
    on another engine, which has no such reward."""
    for function in spec.functions:
        if function.engine is not None and function.engine != engine:
            raise RewardError(
                f"reward '{function.ref}' is engine {function.engine}'s own reward, but this job "
                f"trains on engine {engine}: run it with --engine {function.engine}, or use a "
                "reward of the job's own (file.py:function, module:function or a built-in name)"
            )


def own_functions(spec: RewardSpec) -> RewardSpec | None:
    """The job's own functions of ``spec`` (the core can score them), or ``None`` when every
    function is an engine's own."""
    own = [function for function in spec.functions if function.engine is None]
    return RewardSpec(own) if own else None


def _sole_reward(path: str, base_dir: Path | None) -> str:
    """The name of the one reward function a file given without ``:function`` defines: of
    the public functions defined in the file itself (not those it imports), the one that
    takes the canonical arguments.

    :raises RewardError: naming the file and its functions when it defines none or several.
    """
    module = load_file(resolve_path(path, base_dir), RewardError, "reward")
    defined: dict[str, Callable[..., Any]] = {}
    for name, value in vars(module).items():
        if (
            inspect.isfunction(value)
            and value.__module__ == module.__name__
            and not name.startswith("_")
            and value not in defined.values()
        ):
            defined[name] = value
    candidates = [name for name, fn in defined.items() if _takes_reward_arguments(fn)]
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        listed = f"{', '.join(candidates[:-1])} and {candidates[-1]}"
        raise RewardError(
            f"reward file {path} defines {listed}: name one, e.g. {path}:{candidates[0]}"
        )
    others = ", ".join(f"{name}{inspect.signature(fn)}" for name, fn in defined.items())
    raise RewardError(
        f"reward file {path} defines no function {CANONICAL_SIGNATURE}"
        + (f" (it defines {others})" if others else "")
        + f"; define one, or name one as {path}:function"
    )


def _takes_reward_arguments(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` can be called with the canonical reward arguments by name."""
    try:
        inspect.signature(fn).bind(
            data_source="", solution_str="", ground_truth="", extra_info=None
        )
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


def call_checked(
    function: RewardFunction,
    row: int | None,
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict[str, Any] | None,
) -> float | dict[str, Any]:
    """``function``'s result on one completion, checked.

    :raises RewardError: naming the function and the row, when it raises or returns ``None``,
        NaN, an infinity, or anything but a number or a dict with a numeric ``score``.
    """
    where = where_scored(function, row)
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
        if "score" in value and value["score"] is None:
            raise RewardError(f"{where} returned a dict whose 'score' is None; {NONE_REFUSED}")
        if not is_number(value.get("score")):
            raise RewardError(
                f"{where} returned a dict without a finite numeric 'score': {value!r}"
            )
        return value
    if value is None:
        raise RewardError(f"{where} returned None; {NONE_REFUSED}")
    if not is_number(value):
        raise RewardError(
            f"{where} returned {type(value).__name__} {value!r}; expected a finite number or "
            "a dict with a numeric 'score'"
        )
    return value


def where_scored(function: RewardFunction, row: int | None) -> str:
    """How an error names the function, and the row it scored."""
    named = f"reward '{function.ref or function.name}'"
    return named if row is None else f"{named} on row {row}"


def is_number(value: Any) -> bool:
    """Whether ``value`` is a finite real number (a bool is not)."""
    # numbers.Real also admits numpy scalars (np.float32, np.int64) that rewards often return.
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
