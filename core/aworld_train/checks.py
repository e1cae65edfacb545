"""The check pipeline: what ``AgentTrainer`` runs before a job may train, declared as data.

:data:`CHECKS` is an ordered list of :class:`Step`: each names the row of the check table it
decides, who runs it (the core's generic layer or the selected engine), what runs and how its
result is described. The core reads the config first (the model and the checks' limits come
from it), then the agent and its one model; the engine's check hooks come in AWorld Train's
order (agent, dataset, reward, config), each after the core's own check of that module, and
receive what the core resolved and what the earlier hooks returned as named arguments
(:class:`HandOff`). After ``check_config`` the engine says which settings it will train with
(``effective_settings``), under their common names. The core's steps are in
:mod:`aworld_train.check_steps`, the settings' in :mod:`aworld_train.check_settings`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from aworld_train import plugins
from aworld_train.check_settings import (
    check_effective_trackers,
    check_job_trackers,
    describe_effective_trackers,
    describe_settings,
    describe_trackers,
    effective_settings,
    engine_adds_trackers,
)
from aworld_train.check_steps import (
    agent_runnable,
    check_lora,
    check_model,
    check_model_weights,
    check_prompt_lengths,
    describe_agent,
    describe_agent_run,
    describe_config,
    describe_dataset,
    describe_lengths,
    describe_lora_targets,
    describe_memory,
    describe_model,
    describe_reward,
    describe_tools,
    estimate_memory,
    lengths_comparable,
    load_engine,
    load_job_agent,
    load_job_config,
    load_test_dataset,
    load_train_dataset,
    local_model,
    lora_targets_checkable,
    new_context,
    read_layout,
    resolve_job_reward,
    resolve_job_tools,
    run_agent_once,
)
from aworld_train.errors import AWorldTrainError
from aworld_train.job.saved import rerunnable_job
from aworld_train.job.spec import Job
from aworld_train.run.resume import check_resume_support, describe_resume_support
from aworld_train.version import __version__

if TYPE_CHECKING:
    import datasets
    import pluggy

    from aworld_train.agent import AgentSpec
    from aworld_train.config import ConfigLayout, TrainConfig
    from aworld_train.context import RunContext
    from aworld_train.memory import MemoryEstimate
    from aworld_train.reward import RewardSpec
    from aworld_train.run.directory import RunDirectory
    from aworld_train.run.metrics import MetricsReporter
    from aworld_train.settings import Setting
    from aworld_train.tools import ToolSet


@dataclass
class CheckResult:
    """One row of the check table."""

    module: str
    by: str  # "core" or the engine's name
    detail: str
    seconds: float


@dataclass
class HandOff:
    """What the hooks hand on to each other: each check's result, or the core's form where the
    engine's hook returned ``None``. The later hooks receive these as named arguments."""

    tools: ToolSet
    agent: Any = None
    dataset: Any = None
    reward: Any = None
    config: Any = None


@dataclass(frozen=True)
class Step:
    """One step of the check pipeline.

    :ivar module: the row of the check table it decides (``agent``, ``dataset``, ...).
    :ivar who: ``core`` (the generic layer) or ``engine`` (a hook of the selected engine; the
        row then names the engine).
    :ivar run: what runs, given the pipeline's state, which it fills in; returns what the row
        describes.
    :ivar describe: the row's text for what ``run`` returned; ``None``: the step adds no row.
    :ivar when: whether the step runs for this job.
    :ivar otherwise: the row's text when it does not run; ``None``: no row.
    """

    module: str
    who: Literal["core", "engine"]
    run: Callable[[CheckRun], Any]
    describe: Callable[[Any], str] | None
    when: Callable[[CheckRun], bool] = lambda checks: True
    otherwise: str | None = None


@dataclass
class CheckRun:
    """The state the check pipeline fills in, step by step."""

    job: Job  # its engine the one picked when it named none
    engine_info: plugins.EngineInfo
    run_dir: RunDirectory
    check_only: bool
    resume_from: Path | None
    progress: bool
    record: Callable[[CheckResult], None]
    failed_reporters: set[str] = field(default_factory=set)
    # Filled in by the steps, in this order.
    manager: pluggy.PluginManager = field(init=False)
    layout: ConfigLayout | None = field(init=False)
    config: TrainConfig = field(init=False)
    spec: AgentSpec = field(init=False)
    tools: ToolSet | None = None  # None: the agent has no tools
    metrics: MetricsReporter = field(init=False)
    context: RunContext = field(init=False)
    hand_off: HandOff = field(init=False)
    train_dataset: datasets.Dataset | None = None
    test_dataset: datasets.Dataset | None = None
    reward: RewardSpec | None = None
    settings: list[Setting] | None = None  # None: the engine does not report its settings
    memory: MemoryEstimate | None = None  # None: not estimated (see the resources row)
    resume_support: str | None = None  # the engine's promise, when the run resumes another

    @property
    def engine(self) -> str:
        """The engine's name."""
        assert self.job.engine is not None, "the trainer picks an engine before the checks"
        return self.job.engine

    def run(self, steps: tuple[Step, ...]) -> None:
        """Run each step that applies to this job, in order, recording its row as soon as it
        is decided."""
        for step in steps:
            if not step.when(self):
                if step.otherwise is not None:
                    self.record(CheckResult(step.module, step.who, step.otherwise, 0.0))
                continue
            started = time.perf_counter()
            value = step.run(self)
            if step.describe is not None:
                by = self.engine if step.who == "engine" else "core"
                self.record(
                    CheckResult(
                        step.module, by, step.describe(value), time.perf_counter() - started
                    )
                )

    def call_engine(self, hook: str, **arguments: Any) -> Any:
        """Call the engine's hook ``hook`` with ``arguments``; anything it raises besides an
        ``AWorldTrainError`` is a bug in the engine (the traceback stays on the exception)."""
        try:
            return getattr(self.manager.hook, hook)(**arguments)
        except AWorldTrainError:
            raise
        except Exception as exc:
            raise plugins.hook_failure(self.manager, self.engine_info, hook, exc) from exc

    def report_metrics(self, step: int, metrics: dict[str, float]) -> None:
        plugins.report_metrics(
            self.manager,
            self.engine,
            self.failed_reporters,
            step=step,
            metrics=metrics,
            ctx=self.context,
        )

    def versions(self) -> dict[str, str]:
        """What ``manifest.json`` records as ``versions``."""
        versions = {
            "aworld-train": __version__,
            self.engine_info.distribution: self.engine_info.version,
        }
        versions.update(self.call_engine("engine_versions") or {})
        return versions

    def settings_fields(self) -> dict[str, Any]:
        """What ``manifest.json`` records of the effective settings: ``device``, ``precision``
        and ``settings`` (``{common name: value}``), nothing when the engine reports none;
        and the ``memory`` estimate of the ``resources`` row when there is one."""
        if self.memory is not None:
            return {**self._settings_only(), "memory": self.memory.to_dict()}
        return self._settings_only()

    def _settings_only(self) -> dict[str, Any]:
        if self.settings is None:
            return {}
        values = {setting.name: setting.value for setting in self.settings}
        return {"device": values["device"], "precision": values["precision"], "settings": values}

    def rerunnable_job(self) -> dict[str, Any]:
        """The job as ``job.yaml`` keeps it."""
        return rerunnable_job(self.job, self.spec, self.context.config.to_dict())


def _new_context(checks: CheckRun) -> None:
    """The run context the engine's hooks receive, and the hand-off that starts with its
    tools."""
    checks.context = new_context(checks)
    checks.hand_off = HandOff(tools=checks.context.tools)


def _engine_check(
    key: str, core_form: Callable[[CheckRun], Any], arguments: Callable[[CheckRun], dict[str, Any]]
) -> Callable[[CheckRun], Any]:
    """The step that calls the engine's ``check_<key>`` with ``arguments`` and hands on its
    result under ``key``, or the core's form when it returned ``None``."""

    def run(checks: CheckRun) -> Any:
        result = checks.call_engine(f"check_{key}", **arguments(checks), ctx=checks.context)
        handed_on = core_form(checks) if result is None else result
        setattr(checks.hand_off, key, handed_on)
        return result

    return run


def _describe_engine_result(result: Any) -> str:
    return "kept the core's form" if result is None else f"converted ({type(result).__name__})"


def _given(name: str) -> Callable[[CheckRun], bool]:
    """Whether the user gave the job's ``name`` (``None`` is not loaded)."""
    return lambda checks: getattr(checks.job, name) is not None


#: The checks, in the order they run. The engine's hooks come in AWorld Train's order (agent,
#: dataset, reward, config), each after the core's own check of that module; the core reads
#: the config first, since the model and the checks' limits come from it.
CHECKS: tuple[Step, ...] = (
    Step("engine", "core", load_engine, None),
    Step(
        "resume",
        "engine",
        check_resume_support,
        describe_resume_support,
        when=lambda checks: checks.resume_from is not None,
    ),
    Step("config layout", "engine", read_layout, None),
    Step("config", "core", load_job_config, describe_config),
    Step(
        "trackers",
        "core",
        check_job_trackers,
        describe_trackers,
        when=lambda checks: bool(checks.config.report_to),
    ),
    Step("agent", "core", load_job_agent, describe_agent),
    Step("model", "core", check_model, describe_model),
    Step("weights", "core", check_model_weights, str, when=local_model),
    Step("lora", "core", check_lora, describe_lora_targets, when=lora_targets_checkable),
    Step(
        "tools",
        "core",
        resolve_job_tools,
        describe_tools,
        when=lambda checks: checks.spec.uses_tools,
    ),
    Step("context", "core", _new_context, None),
    Step(
        "agent",
        "engine",
        _engine_check(
            "agent",
            lambda c: c.spec,
            lambda c: {"agent": c.spec, "config": c.config, "tools": c.context.tools},
        ),
        _describe_engine_result,
    ),
    Step(
        "dataset",
        "core",
        load_train_dataset,
        describe_dataset,
        when=_given("train_dataset"),
        otherwise="none given",
    ),
    Step("test dataset", "core", load_test_dataset, describe_dataset, when=_given("test_dataset")),
    Step("lengths", "core", check_prompt_lengths, describe_lengths, when=lengths_comparable),
    Step(
        "dataset",
        "engine",
        _engine_check(
            "dataset",
            lambda c: c.train_dataset,
            lambda c: {
                "train_dataset": c.train_dataset,
                "test_dataset": c.test_dataset,
                "agent": c.hand_off.agent,
                "config": c.config,
            },
        ),
        _describe_engine_result,
    ),
    Step(
        "reward",
        "core",
        resolve_job_reward,
        describe_reward,
        when=_given("reward"),
        otherwise="none given",
    ),
    Step("agent run", "core", run_agent_once, describe_agent_run, when=agent_runnable),
    Step(
        "reward",
        "engine",
        _engine_check(
            "reward",
            lambda c: c.reward,
            lambda c: {
                "reward": c.reward,
                "agent": c.hand_off.agent,
                "dataset": c.hand_off.dataset,
                "config": c.config,
            },
        ),
        _describe_engine_result,
    ),
    Step(
        "config",
        "engine",
        _engine_check(
            "config",
            lambda c: c.config,
            lambda c: {
                "config": c.config,
                "agent": c.hand_off.agent,
                "dataset": c.hand_off.dataset,
                "reward": c.hand_off.reward,
            },
        ),
        _describe_engine_result,
    ),
    Step(
        "settings",
        "engine",
        effective_settings,
        describe_settings,
        when=lambda checks: bool(checks.manager.hook.effective_settings.get_hookimpls()),
    ),
    Step("resources", "core", estimate_memory, describe_memory, when=local_model),
    Step(
        "trackers",
        "core",
        check_effective_trackers,
        describe_effective_trackers,
        when=engine_adds_trackers,
    ),
)
