"""The check pipeline: what ``AgentTrainer`` runs before a job may train, declared as data.

:data:`CHECKS` is an ordered list of :class:`~aworld_train.checks._pipeline.Check`: each names
the row of the check table it decides, who runs it (the core's generic layer or the selected
engine), what runs, when it applies, how its result is described and what it keeps for the
later steps. Each step is given by name what it needs (what the trainer gave: ``job``,
``engine``, ``engine_info``, ``run_dir``, ``check_only``, ``resume_from``, ``progress``; or what
an earlier step kept) and returns what it found. The core reads the config first (the model and
the checks' limits come from it), then the agent and its one model; the engine's check hooks
come in AWorld Train's order (agent, dataset, reward, config), each after the core's own check
of that module, and receive what the core resolved and what the earlier hooks returned as named
arguments (:class:`~aworld_train.checks._pipeline.HandOff`). After ``check_config`` the engine
says which settings it will train with (``effective_settings``), under their common names. The
core's steps are in :mod:`aworld_train.checks._steps` and :mod:`aworld_train.checks._model_steps`,
the settings' in :mod:`aworld_train.checks._settings`; :func:`check_job` runs them and returns what the trainer
keeps (:class:`Checked`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.checks._pipeline import (
    Check,
    CheckResult,
    EngineHooks,
    Found,
    HandOff,
    run_checks,
)
from aworld_train.checks._settings import (
    check_effective_trackers,
    check_job_trackers,
    describe_effective_trackers,
    describe_settings,
    describe_trackers,
    effective_settings,
    engine_adds_trackers,
)
from aworld_train.checks._model_steps import (
    check_lora,
    check_model,
    check_model_weights,
    check_prompt_lengths,
    describe_lengths,
    describe_lora_targets,
    describe_memory,
    describe_model,
    estimate_memory,
    lengths_comparable,
    local_model,
    lora_targets_checkable,
)
from aworld_train.checks._steps import (
    check_resume_support,
    describe_resume_support,
    agent_runnable,
    describe_agent,
    describe_agent_run,
    describe_config,
    describe_dataset,
    describe_reward,
    describe_tools,
    load_engine,
    load_job_agent,
    load_job_config,
    load_test_dataset,
    load_train_dataset,
    new_context,
    read_layout,
    resolve_job_reward,
    resolve_job_tools,
    run_agent_once,
)
from aworld_train.job.spec import Job
from aworld_train.job.saved import rerunnable_job
from aworld_train.version import __version__

if TYPE_CHECKING:
    import datasets

    from aworld_train import plugins
    from aworld_train.agent import AgentSpec
    from aworld_train.job.config import TrainConfig
    from aworld_train.plugins.context import RunContext
    from aworld_train.model.memory import MemoryEstimate
    from aworld_train.reward import RewardSpec
    from aworld_train.run.directory import RunDirectory
    from aworld_train.job.settings import Setting

__all__ = ["CHECKS", "Check", "CheckResult", "Checked", "HandOff", "check_job"]


def _engine_check(
    hooks: EngineHooks,
    context: RunContext,
    hand_off: HandOff,
    key: str,
    core_form: Any,
    **arguments: Any,
) -> Found:
    """Call the engine's ``check_<key>`` with ``arguments``: what it returned is what it found,
    handed on under ``key``, or the core's form when it returned ``None``."""
    result = hooks.call(f"check_{key}", **arguments, ctx=context)
    handed_on = core_form if result is None else result
    return Found(result, hand_off=replace(hand_off, **{key: handed_on}))


def engine_check_agent(
    hooks: EngineHooks, spec: AgentSpec, config: TrainConfig, context: RunContext, hand_off: HandOff
) -> Found:
    return _engine_check(
        hooks, context, hand_off, "agent", spec, agent=spec, config=config, tools=context.tools
    )


def engine_check_dataset(
    hooks: EngineHooks,
    train_dataset: datasets.Dataset | None,
    test_dataset: datasets.Dataset | None,
    config: TrainConfig,
    context: RunContext,
    hand_off: HandOff,
) -> Found:
    given = {"train_dataset": train_dataset, "test_dataset": test_dataset}
    earlier = {"agent": hand_off.agent, "config": config}
    return _engine_check(hooks, context, hand_off, "dataset", train_dataset, **given, **earlier)


def engine_check_reward(
    hooks: EngineHooks,
    reward: RewardSpec | None,
    config: TrainConfig,
    context: RunContext,
    hand_off: HandOff,
) -> Found:
    earlier = {"agent": hand_off.agent, "dataset": hand_off.dataset, "config": config}
    return _engine_check(hooks, context, hand_off, "reward", reward, reward=reward, **earlier)


def engine_check_config(
    hooks: EngineHooks, config: TrainConfig, context: RunContext, hand_off: HandOff
) -> Found:
    earlier = {"agent": hand_off.agent, "dataset": hand_off.dataset, "reward": hand_off.reward}
    return _engine_check(hooks, context, hand_off, "config", config, config=config, **earlier)


def _describe_engine_result(result: Any) -> str:
    return "kept the core's form" if result is None else f"converted ({type(result).__name__})"


def _given(name: str) -> Callable[[Job], bool]:
    """Whether the user gave the job's ``name`` (``None`` is not loaded)."""
    return lambda job: getattr(job, name) is not None


#: The checks, in the order they run. The engine's hooks come in AWorld Train's order (agent,
#: dataset, reward, config), each after the core's own check of that module; the core reads
#: the config first, since the model and the checks' limits come from it.
CHECKS: tuple[Check, ...] = (
    Check("engine", "core", load_engine, None, keeps=("hooks",)),
    Check(
        "resume",
        "engine",
        check_resume_support,
        describe_resume_support,
        applies=lambda resume_from: resume_from is not None,
        keeps=("resume_support",),
    ),
    Check("config layout", "engine", read_layout, None, keeps=("layout",)),
    Check("config", "core", load_job_config, describe_config, keeps=("config",)),
    Check(
        "trackers",
        "core",
        check_job_trackers,
        describe_trackers,
        applies=lambda config: bool(config.report_to),
    ),
    Check("agent", "core", load_job_agent, describe_agent, keeps=("spec",)),
    Check("model", "core", check_model, describe_model, keeps=("config", "spec")),
    Check("weights", "core", check_model_weights, str, applies=local_model),
    Check("lora", "core", check_lora, describe_lora_targets, applies=lora_targets_checkable),
    Check(
        "tools",
        "core",
        resolve_job_tools,
        describe_tools,
        applies=lambda spec: spec.uses_tools,
        keeps=("tools",),
    ),
    Check("context", "core", new_context, None, keeps=("context", "hand_off")),
    Check("agent", "engine", engine_check_agent, _describe_engine_result, keeps=("hand_off",)),
    Check(
        "dataset",
        "core",
        load_train_dataset,
        describe_dataset,
        applies=_given("train_dataset"),
        otherwise="none given",
        keeps=("train_dataset",),
    ),
    Check(
        "test dataset",
        "core",
        load_test_dataset,
        describe_dataset,
        applies=_given("test_dataset"),
        keeps=("test_dataset",),
    ),
    Check("lengths", "core", check_prompt_lengths, describe_lengths, applies=lengths_comparable),
    Check("dataset", "engine", engine_check_dataset, _describe_engine_result, keeps=("hand_off",)),
    Check(
        "reward",
        "core",
        resolve_job_reward,
        describe_reward,
        applies=_given("reward"),
        otherwise="none given",
        keeps=("reward",),
    ),
    Check("agent run", "core", run_agent_once, describe_agent_run, applies=agent_runnable),
    Check("reward", "engine", engine_check_reward, _describe_engine_result, keeps=("hand_off",)),
    Check("config", "engine", engine_check_config, _describe_engine_result, keeps=("hand_off",)),
    Check(
        "settings",
        "engine",
        effective_settings,
        describe_settings,
        applies=lambda hooks: hooks.implements("effective_settings"),
        keeps=("settings",),
    ),
    Check(
        "resources",
        "core",
        estimate_memory,
        describe_memory,
        applies=local_model,
        keeps=("memory",),
    ),
    Check(
        "trackers",
        "core",
        check_effective_trackers,
        describe_effective_trackers,
        applies=engine_adds_trackers,
    ),
)

#: What a check that did not run leaves for the later ones.
NOT_FOUND: dict[str, Any] = {
    "resume_support": None,  # the engine's promise, when the run resumes another
    "tools": None,  # the agent has no tools
    "train_dataset": None,
    "test_dataset": None,
    "reward": None,
    "settings": None,  # the engine does not report its settings
    "memory": None,  # not estimated (see the resources row)
}


@dataclass(frozen=True)
class Checked:
    """What the trainer keeps of a job's checks."""

    job: Job
    hooks: EngineHooks
    spec: AgentSpec
    context: RunContext
    hand_off: HandOff
    settings: list[Setting] | None  # None: the engine does not report its settings
    memory: MemoryEstimate | None
    resume_support: str | None

    def versions(self) -> dict[str, str]:
        """What ``manifest.json`` records as ``versions``."""
        info = self.hooks.info
        versions = {"aworld-train": __version__, info.distribution: info.version}
        versions.update(self.hooks.call("engine_versions") or {})
        return versions

    def settings_fields(self) -> dict[str, Any]:
        """What ``manifest.json`` records of the effective settings: ``device``, ``precision``
        and ``settings`` (``{common name: value}``), nothing when the engine reports none;
        and the ``memory`` estimate of the ``resources`` row when there is one."""
        fields: dict[str, Any] = {}
        if self.settings is not None:
            values = {setting.name: setting.value for setting in self.settings}
            fields = {"device": values["device"], "precision": values["precision"]}
            fields["settings"] = values
        if self.memory is not None:
            fields["memory"] = self.memory.to_dict()
        return fields

    def rerunnable_job(self) -> dict[str, Any]:
        """The job as ``job.yaml`` keeps it."""
        return rerunnable_job(self.job, self.spec, self.context.config.to_dict())


def check_job(
    job: Job,
    engine_info: plugins.EngineInfo,
    run_dir: RunDirectory,
    *,
    check_only: bool,
    resume_from: Path | None,
    progress: bool,
    record: Callable[[CheckResult], None],
    checks: Iterable[Check] = CHECKS,
    loaded: Callable[[EngineHooks], None] = lambda hooks: None,
) -> Checked:
    """Run ``checks`` for ``job`` (its engine the one picked), recording each row as it is
    decided.

    :param loaded: told the engine's hooks as soon as they are loaded, so that a later failure
        can name the plugin that raised.
    """
    assert job.engine is not None, "the trainer picks an engine before the checks"
    found: dict[str, Any] = {
        **NOT_FOUND,
        "job": job,
        "engine": job.engine,
        "engine_info": engine_info,
        "run_dir": run_dir,
        "check_only": check_only,
        "resume_from": resume_from,
        "progress": progress,
    }
    try:
        run_checks(checks, found, record)
    finally:
        if "hooks" in found:
            loaded(found["hooks"])
    return Checked(**{kept.name: found[kept.name] for kept in fields(Checked)})
