"""The check pipeline: what ``AgentTrainer`` runs before a job may train, declared as data.

:data:`CHECKS` is an ordered list of :class:`Step`: each names the row of the check table it
decides, who runs it (the core's generic layer or the selected engine), what runs and how its
result is described. The core reads the config first (the model and the checks' limits come
from it), then the agent and its one model; the engine's check hooks come in AWorld Train's
order (agent, dataset, reward, config), each after the core's own check of that module, and
receive what the core resolved and what the earlier hooks returned as named arguments
(:class:`HandOff`). After ``check_config`` the engine says which settings it will train with
(``effective_settings``), under their common names.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from aworld_train import __version__, plugins
from aworld_train.errors import AWorldTrainError

if TYPE_CHECKING:
    import datasets
    import pluggy

    from aworld_train.agent import AgentSpec
    from aworld_train.config import ConfigLayout, TrainConfig
    from aworld_train.context import Given, RunContext
    from aworld_train.memory import MemoryEstimate
    from aworld_train.metrics import MetricsReporter
    from aworld_train.reward import RewardSpec
    from aworld_train.rundir import RunDirectory
    from aworld_train.settings import Setting
    from aworld_train.tools import ToolSet

logger = logging.getLogger("aworld_train")


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


@dataclass
class Job:
    """The job as the user gave it; ``None`` where they gave nothing."""

    agent: Any
    config: Any
    reward_func: Any
    train_dataset: Any
    test_dataset: Any
    columns: dict[str, str] | None
    overrides: list[str] | tuple[str, ...]
    base_dir: Path | None


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

    job: Job
    engine: str
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
    metrics: MetricsReporter = field(init=False)
    context: RunContext = field(init=False)
    hand_off: HandOff = field(init=False)
    train_dataset: datasets.Dataset | None = None
    test_dataset: datasets.Dataset | None = None
    reward: RewardSpec | None = None
    settings: list[Setting] | None = None  # None: the engine does not report its settings
    memory: MemoryEstimate | None = None  # None: not estimated (see the resources row)

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
                self.record(CheckResult(step.module, by, step.describe(value),
                                        time.perf_counter() - started))

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
        plugins.report_metrics(self.manager, self.engine, self.failed_reporters,
                               step=step, metrics=metrics, ctx=self.context)

    def versions(self) -> dict[str, str]:
        """What ``manifest.json`` records as ``versions``."""
        versions = {"aworld-train": __version__,
                    self.engine_info.distribution: self.engine_info.version}
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
        return {"device": values["device"], "precision": values["precision"],
                "settings": values}

    def rerunnable_job(self, run_path: Path) -> dict[str, Any]:
        """The job as ``job.yaml`` keeps it."""
        from aworld_train.saved_job import rerunnable_job

        job = self.job
        return rerunnable_job(engine=self.engine, agent=job.agent, agent_spec=self.spec,
                              train_dataset=job.train_dataset, test_dataset=job.test_dataset,
                              reward=job.reward_func, columns=job.columns,
                              config=self.context.config.to_dict(), run_path=run_path,
                              base_dir=job.base_dir)


def _load_engine(checks: CheckRun) -> None:
    """The plugin manager holding the engine and the extension plugins."""
    checks.manager = plugins.create_manager(checks.engine, checks.run_dir.path)


def _config_layout(checks: CheckRun) -> None:
    """The engine's answer to ``config_layout``. :raises PluginError: for an answer that is
    neither a ``ConfigLayout`` nor ``None`` (a bug in the engine)."""
    from aworld_train.config import ConfigLayout
    from aworld_train.errors import PluginError

    layout = checks.call_engine("config_layout")
    if layout is not None and not isinstance(layout, ConfigLayout):
        raise PluginError(f"{checks.engine_info.label} config_layout returned "
                          f"{type(layout).__name__}, not a ConfigLayout or None")
    checks.layout = layout


def _load_config(checks: CheckRun) -> TrainConfig:
    from aworld_train.config import load_config

    job = checks.job
    engine_names = tuple(set(plugins.installed_engine_names()) | set(plugins.KNOWN_ENGINES))
    checks.config = load_config(job.config, job.overrides, engine_names, job.base_dir,
                                engine=checks.engine, layout=checks.layout)
    for line in other_sections_warnings(checks.config, checks.engine):
        logger.warning(line)
    _check_evaluation(checks.config, job)
    return checks.config


def _check_evaluation(config: TrainConfig, job: Job) -> None:
    """``eval_steps`` and ``eval_limit`` need a test set, on every engine.

    :raises ConfigError: one line naming the key, for a job without ``test_dataset``.
    """
    from aworld_train.errors import ConfigError

    if job.test_dataset is not None:
        return
    for key in ("eval_steps", "eval_limit"):
        if getattr(config, key) is not None:
            raise ConfigError(f"config {key}: the job has no test_dataset to evaluate; add one "
                              f"or remove {key}")


def other_sections_warnings(config: TrainConfig, engine: str) -> list[str]:
    """One line per key of another engine's section: it has no effect on ``engine``, and the
    common key that carries it to every engine, where one does (:data:`ENGINE_KEYS`).

    A section whose engine has dotted keys (VeRL) is named by its leaf keys, dotted.
    """
    from aworld_train.settings import ENGINE_KEYS, common_name

    lines = []
    for name, section in config.sections.items():
        if name == engine:
            continue
        dotted = any("." in key for keys in ENGINE_KEYS.get(name, {}).values() for key in keys)
        for key in _section_keys(section, dotted):
            common = common_name(name, key)
            carried = f"; the common key {common} carries it to every engine" if common else ""
            lines.append(f"config {name}.{key}: no effect on engine {engine} (only the {name} "
                         f"engine reads the {name} section){carried}")
    return lines


def _section_keys(section: dict[str, Any], dotted: bool, prefix: str = "") -> list[str]:
    """The keys of ``section``; with ``dotted``, the leaf keys of its nested mappings."""
    keys = []
    for key, value in section.items():
        if dotted and isinstance(value, dict) and value:
            keys += _section_keys(value, dotted, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def _check_trackers(checks: CheckRun) -> tuple[str, ...]:
    from aworld_train.settings import check_trackers

    check_trackers(checks.config.report_to)
    return checks.config.report_to


def _describe_trackers(report_to: tuple[str, ...]) -> str:
    return f"{', '.join(report_to)}: installed"


def _report_to_row(checks: CheckRun) -> Setting | None:
    return next((s for s in checks.settings or () if s.name == "report_to"), None)


def _new_trackers(checks: CheckRun) -> bool:
    """The engine will log to trackers the job's ``report_to`` did not name (its own section
    chose them, or its default does), which the trackers step has not checked."""
    from aworld_train.settings import effective_trackers

    row = _report_to_row(checks)
    return row is not None and bool(set(effective_trackers(row)) - set(checks.config.report_to))


def _check_effective_trackers(checks: CheckRun) -> tuple[tuple[str, ...], str]:
    """The trackers the engine will really log to (its ``report_to`` row) are known, installed
    and, for wandb, have a key; the error names the key they came from."""
    from aworld_train.settings import check_trackers, effective_trackers

    row = _report_to_row(checks)
    assert row is not None
    if row.source == "job" or not row.engine_key:
        key = "report_to"
    else:
        key = f"{checks.engine}.{row.engine_key}"
    if row.source == "default":
        key = f"{key} (the {checks.engine} engine's default)"
    trackers = effective_trackers(row)
    check_trackers(trackers, key)
    return trackers, key


def _describe_effective_trackers(checked: tuple[tuple[str, ...], str]) -> str:
    trackers, key = checked
    return f"{', '.join(trackers)} (from {key}): installed"


def _local_model(checks: CheckRun) -> bool:
    return checks.spec.model is not None and Path(checks.spec.model).is_dir()


def _model_folder(checks: CheckRun) -> str:
    """The model folder of a step that runs only for a local one (:func:`_local_model`)."""
    model = checks.spec.model
    assert model is not None, "a step for a local model folder ran without one"
    return model


def _check_weights(checks: CheckRun) -> str:
    """The tensors in the model folder's safetensors headers against the architecture its
    ``config.json`` builds on the meta device: what was compared, or why not."""
    from aworld_train.model import check_weights

    return check_weights(_model_folder(checks))


def _lora_targets_checkable(checks: CheckRun) -> bool:
    return checks.config.lora is not None and _local_model(checks)


def _check_lora_targets(checks: CheckRun) -> str | None:
    """LoRA's ``target_modules`` name modules of the local model (built on the meta device),
    or why they were not compared; ``None`` when they were."""
    from aworld_train.model import check_lora_targets
    from aworld_train.settings import ALL_LINEAR

    lora = checks.config.lora
    assert lora is not None
    if lora.target_modules == ALL_LINEAR:
        return f"target_modules {ALL_LINEAR}: every linear layer but the output head"
    return check_lora_targets(_model_folder(checks), lora.target_modules,
                              checks.config.trust_remote_code)


def _describe_lora_targets(skipped: str | None) -> str:
    return skipped or "lora.target_modules name modules of the model"


def _describe_config(config: TrainConfig) -> str:
    keys = ", ".join(f"{k} {v}" for k, v in config.to_dict().items()
                     if k not in ("resources",) and not isinstance(v, dict))
    sections = [name for name in config.sections]
    return keys + (f"; sections: {', '.join(sections)}" if sections else "")


def _load_agent(checks: CheckRun) -> tuple[AgentSpec, str | None]:
    from aworld_train.agent import load_agent
    from aworld_train.redaction import remember_secrets

    checks.spec = load_agent(checks.job.agent, checks.job.base_dir)
    remember_secrets({"agent": checks.spec.to_dict(), "config": checks.config.to_dict()})
    return checks.spec, checks.config.model or checks.spec.model


def _describe_agent(loaded: tuple[AgentSpec, str | None]) -> str:
    """The agent's row: its name, the model that trains (the config's, else the agent's own:
    an AWorld agent's llm_model_name is set aside when the config names one), what it has."""
    spec, policy = loaded
    aside = f" (not the agent's own {spec.model})" if spec.model and spec.model != policy else ""
    parts = [f"'{spec.name}'", f"model {policy or '(from config)'}{aside}"]
    if spec.system_prompt:
        parts.append("system prompt")
    if spec.uses_tools:
        parts.append(f"{len(spec.tools)} tools, {len(spec.mcp_servers)} MCP servers")
    return ", ".join(parts)


def _check_model(checks: CheckRun) -> str | None:
    """Check the one model of the job without running code from its folder, and give it to
    both places engines read (``config.model``, ``agent.model``) in its checked form (a local
    folder made absolute). The engine's own model key leaves its section, so the engine maps
    ``config.model`` onto it and trains the model checked here."""
    from aworld_train.model import preflight_model

    model = preflight_model(_one_model(checks), checks.job.base_dir,
                            checks.config.trust_remote_code)
    checks.spec.model = checks.config.model = model
    return model


def _one_model(checks: CheckRun) -> str | None:
    """The model the common ``model``, the agent and the engine's model key name (``None``
    when none does), taking the key out of the engine's section. ``-o model=...`` replaces
    the model the job names: the command line says which model to train this time.

    An AWorld ``Agent``'s ``llm_model_name`` is the name it calls its LLM server by, which
    AWorld Train itself sets aside when it trains: it is the policy only when nothing else
    names one, and never disagrees.

    :raises ConfigError: when two of them name different models, naming both places.
    """
    from aworld_train.config import describe_value, pop_section_key
    from aworld_train.errors import ConfigError

    spec, config, layout, job = checks.spec, checks.config, checks.layout, checks.job
    named = [("config key 'model'", config.model)]
    if spec.source is None:  # an agent file or mapping: its ``model`` is the policy
        named.append((f"agent '{spec.name}' model", spec.model))
    section = config.sections.get(checks.engine)
    if layout is not None and layout.model_key and section is not None:
        place = f"config key '{checks.engine}.{layout.model_key}'"
        _, value = pop_section_key(section, layout.model_key)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{place} must be a model folder or hub id (a string), got "
                              f"{describe_value(value)}")
        named.append((place, value))
    if config.model and any(item.partition("=")[0].strip() == "model"
                            for item in job.overrides):
        return config.model
    given: list[tuple[str, str]] = [(place, value) for place, value in named if value]
    if not given and spec.source is not None and spec.model:
        given = [(f"AWorld agent '{spec.name}' llm_model_name", spec.model)]
    for place, value in given[1:]:
        first_place, first = given[0]
        if _model_identity(value, job.base_dir) != _model_identity(first, job.base_dir):
            raise ConfigError(f"{first_place} names {first} but {place} names {value}: "
                              "name the model once")
    return given[0][1] if given else None


def _describe_model(model: str | None) -> str:
    if model is None:
        return "none named"
    if Path(model).is_dir():
        return f"local folder {model}, checked without running code from it"
    return f"hub id {model} (not contacted during the checks)"


def _new_context(checks: CheckRun) -> None:
    """The run context the engine's hooks receive, with its metrics reporter."""
    from aworld_train.context import RunContext
    from aworld_train.metrics import MetricsReporter
    from aworld_train.metrics import read_metrics
    from aworld_train.tools import ToolSet

    checks.metrics = MetricsReporter(
        None if checks.check_only else checks.run_dir.metrics_path,
        on_log=checks.report_metrics,
        show_progress=checks.progress,
        inherited=read_metrics(checks.resume_from) if checks.resume_from else None,
    )
    checks.context = RunContext(
        engine=checks.engine,
        run_dir=checks.run_dir.path,
        config=checks.config,
        metrics=checks.metrics,
        check_only=checks.check_only,
        resume_from=checks.resume_from,
        given=_as_given(checks.job),
    )
    checks.hand_off = HandOff(tools=ToolSet())


def _resolve_tools(checks: CheckRun) -> ToolSet:
    from aworld_train.tools import resolve_tools

    tools = resolve_tools(checks.spec, checks.job.base_dir)
    checks.hand_off.tools = checks.context.tools = tools
    return tools


def _describe_tools(tools: ToolSet) -> str:
    servers = ", ".join(f"MCP server '{server.name}'" for server in tools.servers)
    return f"{len(tools)} tools ({', '.join(tools.names) or 'none'})" + (
        f" from {servers}" if servers else "")


def _load_train_dataset(checks: CheckRun) -> datasets.Dataset:
    checks.train_dataset = _load_dataset(checks, checks.job.train_dataset, "train_dataset")
    return checks.train_dataset


def _load_test_dataset(checks: CheckRun) -> datasets.Dataset:
    checks.test_dataset = _load_dataset(checks, checks.job.test_dataset, "test_dataset")
    return checks.test_dataset


def _load_dataset(checks: CheckRun, source: Any, role: str) -> datasets.Dataset:
    from aworld_train.dataset import load_dataset

    return load_dataset(source, checks.job.columns, checks.job.base_dir, role)


def _describe_dataset(dataset: datasets.Dataset) -> str:
    form = "chat messages" if isinstance(dataset[0]["prompt"], list) else "text"
    return f"{len(dataset)} rows, prompts as {form}, columns: {', '.join(dataset.column_names)}"


def _lengths_comparable(checks: CheckRun) -> bool:
    """A local model folder (its tokenizer is read without running code) and a dataset."""
    model = checks.spec.model
    return model is not None and Path(model).is_dir() and checks.train_dataset is not None


def _check_lengths(checks: CheckRun) -> None:
    """The longest prompts, rendered as the model sees them, plus the completion fit the
    model's context."""
    from aworld_train.model import check_lengths

    spec, config = checks.spec, checks.config
    present = {role: dataset for role, dataset in (("train_dataset", checks.train_dataset),
                                                   ("test_dataset", checks.test_dataset))
               if dataset is not None}
    check_lengths(_model_folder(checks), present, spec.system_prompt,
                  checks.context.tools.schemas(),
                  config.max_completion_length or spec.llm_max_tokens, spec.max_turns,
                  config.trust_remote_code)


def _describe_lengths(_: None) -> str:
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        return "not compared: transformers is not installed here"
    return "the longest prompts plus the completion fit the model's context"


def _resolve_reward(checks: CheckRun) -> tuple[RewardSpec, Any]:
    """The reward resolved, and its scores on the ground truth of the training rows (all of
    them up to a budget), computed in a child process with a time limit (it is the user's
    code); a warning when the right answer scores below the maximum on some rows. An engine's
    own reward (``swift:accuracy``) is not scored here (the engine scores it while training,
    and checks it in its ``check_reward``), and refused on any other engine."""
    from aworld_train.reward import (
        check_reward_on_rows,
        engine_rewards_for,
        own_functions,
        resolve_reward,
    )

    checks.reward = resolve_reward(checks.job.reward_func, checks.job.base_dir)
    engine_rewards_for(checks.reward, checks.engine)
    scores = None
    own = own_functions(checks.reward)
    if checks.train_dataset is not None and own is not None:
        scores = check_reward_on_rows(own, checks.train_dataset,
                                      timeout=checks.config.reward_timeout)
        warning = scores.warning()
        if warning:
            logger.warning(warning)
    return checks.reward, scores


def _describe_reward(resolved: tuple[RewardSpec, Any]) -> str:
    reward, scores = resolved
    text = ", ".join(f"{f.ref if f.engine else f.name} x{f.weight:g}"
                     + (f" (scored by {f.engine})" if f.engine else "") for f in reward.functions)
    return text + (f"; {scores.describe()}" if scores is not None else "")


def _engine_check(key: str, core_form: Callable[[CheckRun], Any],
                  arguments: Callable[[CheckRun], dict[str, Any]]) -> Callable[[CheckRun], Any]:
    """The step that calls the engine's ``check_<key>`` with ``arguments`` and hands on its
    result under ``key``, or the core's form when it returned ``None``."""
    def run(checks: CheckRun) -> Any:
        result = checks.call_engine(f"check_{key}", **arguments(checks), ctx=checks.context)
        handed_on = core_form(checks) if result is None else result
        setattr(checks.hand_off, key, handed_on)
        return result
    return run


def _effective_settings(checks: CheckRun) -> list[Setting] | None:
    """The engine's answer to ``effective_settings``, checked.

    :raises PluginError: for an answer that is not a list of ``Setting`` with unique names,
        ``device`` and a resolved ``precision`` among them and JSON values (a bug in the
        engine).
    """
    from aworld_train.errors import PluginError
    from aworld_train.settings import Setting

    answer = checks.call_engine("effective_settings", config=checks.hand_off.config,
                                ctx=checks.context)
    if answer is None:
        return None
    problem = _settings_problem(answer, Setting)
    if problem:
        raise PluginError(f"{checks.engine_info.label} effective_settings {problem}")
    checks.settings = list(answer)
    return checks.settings


def _settings_problem(answer: Any, setting_type: type) -> str | None:
    """What is wrong with an ``effective_settings`` answer, or ``None``."""
    import json

    from aworld_train.settings import PRECISIONS

    if not isinstance(answer, list) or not all(isinstance(s, setting_type) for s in answer):
        return f"returned {type(answer).__name__}, not a list of Setting"
    values: dict[str, Any] = {}
    for setting in answer:
        if setting.name in values:
            return f"'{setting.name}' is reported twice"
        try:
            json.dumps(setting.value)
        except (TypeError, ValueError):
            return f"'{setting.name}' has a value that is not JSON: {setting.value!r}"
        values[setting.name] = setting.value
    missing = [name for name in ("device", "precision") if name not in values]
    if missing:
        return f"no {' or '.join(missing)} among the settings (every engine reports both)"
    if values["precision"] not in PRECISIONS[1:]:
        return (f"precision {values['precision']!r} is not the precision used (one of "
                f"{', '.join(PRECISIONS[1:])})")
    return None


def _describe_settings(settings: list[Setting] | None) -> str:
    if settings is None:
        return "not reported"
    values = {setting.name: setting.value for setting in settings}
    return f"{len(settings)} settings; device {values['device']}, precision {values['precision']}"


def _agent_runnable(checks: CheckRun) -> bool:
    """Whether the agent is code of its own (AWorld or Python) with a row to run on and a local
    model folder whose chat template renders its messages (a hub id has none offline), with
    transformers installed to render them."""
    import importlib.util

    model = checks.config.model or checks.spec.model
    return (checks.spec.runs_itself and checks.train_dataset is not None and bool(model)
            and Path(str(model)).is_dir()
            # where no engine is installed there is nothing to render with
            and importlib.util.find_spec("transformers") is not None)


def _estimate_memory(checks: CheckRun) -> MemoryEstimate | str:
    """The peak memory of one training step per GPU (:mod:`aworld_train.memory`), from the
    model built on the meta device and the engine's ``memory_plan`` (else the core's default
    plan); or why it was not estimated.

    :raises ConfigError: when the certain part (weights, gradients, optimizer states,
        reservations) does not fit the GPU; above that a warning is logged.
    :raises PluginError: for a ``memory_plan`` answer that is not a ``MemoryPlan`` or ``None``.
    """
    import importlib.util

    from aworld_train import memory
    from aworld_train.errors import PluginError

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec(
            "transformers") is None:
        return "not estimated: torch and transformers are not installed here"
    values = {setting.name: setting.value for setting in checks.settings or []}
    plan = memory.default_plan(checks.config, values, checks.spec.llm_max_tokens)
    answer = checks.call_engine("memory_plan", config=checks.hand_off.config, default=plan,
                                ctx=checks.context)
    if answer is not None and not isinstance(answer, memory.MemoryPlan):
        raise PluginError(f"{checks.engine_info.label} memory_plan returned "
                          f"{type(answer).__name__}, not a MemoryPlan or None")
    plan = answer or plan
    shape = memory.model_shape(_model_folder(checks), plan.lora, checks.config.trust_remote_code)
    if isinstance(shape, str):
        return f"not estimated: {shape}"
    capacity, gpu = memory.gpu_capacity(checks.config.resources.gpu_memory_gb,
                                        values.get("device"))
    checks.memory = memory.estimate(shape, plan, capacity, gpu)
    warning = memory.refuse_or_warn(checks.memory)
    if warning:
        logger.warning(warning)
    return checks.memory


def _describe_memory(estimated: MemoryEstimate | str) -> str:
    from aworld_train.memory import describe

    return estimated if isinstance(estimated, str) else describe(estimated)


def _run_agent_once(checks: CheckRun) -> Any:
    """The user's own agent (AWorld or Python) run once on the first row against a stand-in
    policy, its answer scored by the reward: see :mod:`aworld_train.runtime.standin`."""
    from aworld_train.model import load_tokenizer
    from aworld_train.runtime.standin import check_agent_once

    model = str(checks.config.model or checks.spec.model)
    tokenizer = load_tokenizer(model, checks.config.trust_remote_code)
    where = f"{checks.job.train_dataset} row 0" if isinstance(
        checks.job.train_dataset, (str, Path)) else "the train dataset's row 0"
    from aworld_train.reward import own_functions

    # An engine's own reward (swift:format) is scored by the engine alone, while training.
    reward = own_functions(checks.reward) if checks.reward is not None else None
    assert checks.train_dataset is not None  # _agent_runnable
    return check_agent_once(checks.spec, dict(checks.train_dataset[0]), tokenizer, reward,
                            where=where)


def _describe_agent_run(checked: Any) -> str:
    scored = "" if checked.score is None else f", reward {checked.score:g}"
    return (f"{checked.turns} model call(s) answered by a stand-in, answer "
            f"{checked.answer[:40]!r}{scored}")


def _describe_engine_result(result: Any) -> str:
    return "kept the core's form" if result is None else f"converted ({type(result).__name__})"


def _given(name: str) -> Callable[[CheckRun], bool]:
    """Whether the user gave the job's ``name`` (``None`` is not loaded)."""
    return lambda checks: getattr(checks.job, name) is not None


#: The checks, in the order they run. The engine's hooks come in AWorld Train's order (agent,
#: dataset, reward, config), each after the core's own check of that module; the core reads
#: the config first, since the model and the checks' limits come from it.
CHECKS: tuple[Step, ...] = (
    Step("engine", "core", _load_engine, None),
    Step("config layout", "engine", _config_layout, None),
    Step("config", "core", _load_config, _describe_config),
    Step("trackers", "core", _check_trackers, _describe_trackers,
         when=lambda checks: bool(checks.config.report_to)),
    Step("agent", "core", _load_agent, _describe_agent),
    Step("model", "core", _check_model, _describe_model),
    Step("weights", "core", _check_weights, str, when=_local_model),
    Step("lora", "core", _check_lora_targets, _describe_lora_targets,
         when=_lora_targets_checkable),
    Step("context", "core", _new_context, None),
    Step("tools", "core", _resolve_tools, _describe_tools,
         when=lambda checks: checks.spec.uses_tools),
    Step("agent", "engine", _engine_check(
        "agent", lambda c: c.spec,
        lambda c: {"agent": c.spec, "config": c.config, "tools": c.context.tools}),
        _describe_engine_result),
    Step("dataset", "core", _load_train_dataset, _describe_dataset,
         when=_given("train_dataset"), otherwise="none given"),
    Step("test dataset", "core", _load_test_dataset, _describe_dataset,
         when=_given("test_dataset")),
    Step("lengths", "core", _check_lengths, _describe_lengths, when=_lengths_comparable),
    Step("dataset", "engine", _engine_check(
        "dataset", lambda c: c.train_dataset,
        lambda c: {"train_dataset": c.train_dataset, "test_dataset": c.test_dataset,
                   "agent": c.hand_off.agent, "config": c.config}),
        _describe_engine_result),
    Step("reward", "core", _resolve_reward, _describe_reward,
         when=_given("reward_func"), otherwise="none given"),
    Step("agent run", "core", _run_agent_once, _describe_agent_run, when=_agent_runnable),
    Step("reward", "engine", _engine_check(
        "reward", lambda c: c.reward,
        lambda c: {"reward": c.reward, "agent": c.hand_off.agent, "dataset": c.hand_off.dataset,
                   "config": c.config}),
        _describe_engine_result),
    Step("config", "engine", _engine_check(
        "config", lambda c: c.config,
        lambda c: {"config": c.config, "agent": c.hand_off.agent, "dataset": c.hand_off.dataset,
                   "reward": c.hand_off.reward}),
        _describe_engine_result),
    Step("settings", "engine", _effective_settings, _describe_settings,
         when=lambda checks: bool(checks.manager.hook.effective_settings.get_hookimpls())),
    Step("resources", "core", _estimate_memory, _describe_memory, when=_local_model),
    Step("trackers", "core", _check_effective_trackers, _describe_effective_trackers,
         when=_new_trackers),
)


def _model_identity(model: str, base_dir: Path | None) -> str:
    """A model as it is compared with another: the absolute folder it names, looked up where
    the model check looks (the job's folder, then the current one), else its text."""
    from aworld_train.references import resolve_path

    for root in (base_dir, None):
        folder = resolve_path(model, root)
        if os.path.isdir(folder):
            return str(folder)
    return model


def _as_given(job: Job) -> Given:
    """The job's inputs as the user gave them, paths made absolute (``ctx.given``)."""
    from aworld_train.config import merge, parse_overrides, read_config
    from aworld_train.context import Given

    config = _absolute_path(job.config, job.base_dir)
    if job.overrides:
        config = merge(read_config(job.config, job.base_dir)[0], parse_overrides(job.overrides))
    return Given(
        agent=_absolute_path(job.agent, job.base_dir),
        train_dataset=_absolute_path(job.train_dataset, job.base_dir),
        test_dataset=_absolute_path(job.test_dataset, job.base_dir),
        reward=_absolute_reward(job.reward_func, job.base_dir),
        config=config,
        columns=job.columns or None,
    )


def _absolute_reward(reward: Any, base_dir: Path | None) -> Any:
    """A reward as given, each reference made absolute (in a list, in ``{name, weight}``)."""
    if isinstance(reward, list):
        return [_absolute_reward(item, base_dir) for item in reward]
    if isinstance(reward, dict) and "name" in reward:
        return {**reward, "name": _absolute_path(reward["name"], base_dir)}
    return _absolute_path(reward, base_dir)


def _absolute_path(value: Any, base_dir: Path | None) -> Any:
    """A path made an absolute string (relative to ``base_dir``), and the file of a
    ``file.py:name`` reference; anything else (a module reference, a built-in name, an
    object) as it is."""
    from aworld_train.references import resolve_path

    if not isinstance(value, (str, Path)):
        return value
    target, sep, name = str(value).rpartition(":")
    if sep and target.endswith(".py"):
        return f"{resolve_path(target, base_dir)}:{name}"
    path = resolve_path(value, base_dir)
    return str(path) if os.path.exists(path) else value
