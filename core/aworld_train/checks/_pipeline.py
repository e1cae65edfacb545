"""How the check pipeline runs its steps: each :class:`Check` holds what runs, the row it
decides and when it applies; its function receives what it needs as named arguments (what the
trainer gave, or what an earlier step kept) and returns what it found (:class:`Found`). The
runner gathers what the steps keep and records each row as soon as it is decided. The steps
themselves are in :mod:`aworld_train.checks._steps`, :mod:`aworld_train.checks._model_steps`,
:mod:`aworld_train.checks._settings` and :mod:`aworld_train.run.resume`, their order in
:data:`aworld_train.checks.CHECKS`."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from aworld_train import plugins
from aworld_train.errors import AWorldTrainError

if TYPE_CHECKING:
    import pluggy

    from aworld_train.tools import ToolSet


@dataclass
class CheckResult:
    """One row of the check table."""

    module: str
    by: str  # "core" or the engine's name
    detail: str
    seconds: float


@dataclass(frozen=True)
class HandOff:
    """What the hooks hand on to each other: each check's result, or the core's form where the
    engine's hook returned ``None``. The later hooks receive these as named arguments."""

    tools: ToolSet
    agent: Any = None
    dataset: Any = None
    reward: Any = None
    config: Any = None


@dataclass(frozen=True)
class EngineHooks:
    """The selected engine's hooks, in the plugin manager that holds it and the extension
    plugins."""

    info: plugins.EngineInfo
    manager: pluggy.PluginManager

    @property
    def name(self) -> str:
        return self.info.name

    def call(self, hook: str, **arguments: Any) -> Any:
        """Call the hook ``hook`` with ``arguments``; anything it raises besides an
        ``AWorldTrainError`` is a bug in the engine (the traceback stays on the exception)."""
        try:
            return getattr(self.manager.hook, hook)(**arguments)
        except AWorldTrainError:
            raise
        except Exception as exc:
            raise plugins.hook_failure(self.manager, self.info, hook, exc) from exc

    def implements(self, hook: str) -> bool:
        """Whether any plugin implements ``hook``."""
        return bool(getattr(self.manager.hook, hook).get_hookimpls())


class Found:
    """What a step found: ``shown`` is what its row describes, ``kept`` the values later steps
    receive under these names. A step that keeps nothing may return ``shown`` alone."""

    __slots__ = ("kept", "shown")

    def __init__(self, shown: Any = None, /, **kept: Any) -> None:
        self.shown = shown
        self.kept = kept


def always() -> bool:
    return True


@dataclass(frozen=True)
class Check:
    """One step of the check pipeline.

    :ivar module: the row of the check table it decides (``agent``, ``dataset``, ...).
    :ivar who: ``core`` (the generic layer) or ``engine`` (a hook of the selected engine; the
        row then names the engine).
    :ivar run: what runs, given by name what it needs; returns what it found.
    :ivar describe: the row's text for what ``run`` found; ``None``: the step adds no row.
    :ivar applies: whether the step runs for this job, given by name what it needs.
    :ivar otherwise: the row's text when it does not run; ``None``: no row.
    :ivar keeps: the names of what ``run`` keeps for the later steps.
    """

    module: str
    who: Literal["core", "engine"]
    run: Callable[..., Any]
    describe: Callable[[Any], str] | None
    applies: Callable[..., bool] = always
    otherwise: str | None = None
    keeps: tuple[str, ...] = ()


def needs(function: Callable[..., Any]) -> tuple[str, ...]:
    """The names a step's ``run`` or ``applies`` is given."""
    return tuple(inspect.signature(function).parameters)


def run_checks(
    checks: Iterable[Check], found: dict[str, Any], record: Callable[[CheckResult], None]
) -> None:
    """Run each check that applies, in order, each given by name what it needs from ``found``
    (``engine``, the engine's name, among them), and add what it keeps to ``found``, so that
    what was found before a check failed stays at hand."""
    for check in checks:
        if not check.applies(**_given(check.applies, found)):
            if check.otherwise is not None:
                record(CheckResult(check.module, check.who, check.otherwise, 0.0))
            continue
        started = time.perf_counter()
        result = check.run(**_given(check.run, found))
        result = result if isinstance(result, Found) else Found(result)
        assert set(result.kept) == set(check.keeps), f"{check.run.__name__} keeps {check.keeps}"
        found.update(result.kept)
        if check.describe is not None:
            by = found["engine"] if check.who == "engine" else "core"
            seconds = time.perf_counter() - started
            record(CheckResult(check.module, by, check.describe(result.shown), seconds))


def _given(function: Callable[..., Any], found: dict[str, Any]) -> dict[str, Any]:
    return {name: found[name] for name in needs(function)}
