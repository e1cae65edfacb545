"""The core's own checks of a job, each a step of :data:`aworld_train.checks.CHECKS`: the config
(with the engine's layout), the agent and its one model (its weights, LoRA's targets, the
prompts' lengths, the memory of a training step), the tools, the datasets, the reward, and the
agent run once against a stand-in. Each takes the pipeline's state and returns what its row
describes; the state it sets is new values (the job's own config and agent stay as given)."""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train import memory, plugins
from aworld_train.agent import load_agent
from aworld_train.check_settings import other_sections_warnings
from aworld_train.config import (
    ConfigLayout,
    describe_value,
    load_config,
    merge,
    parse_overrides,
    read_config,
    without_section_key,
)
from aworld_train.context import RunContext
from aworld_train.declaration import installed_declarations
from aworld_train.dataset import load_dataset
from aworld_train.errors import ConfigError, PluginError
from aworld_train.job import Job, absolute_paths
from aworld_train.metrics import MetricsReporter, read_metrics
from aworld_train.model import (
    check_lengths,
    check_lora_targets,
    check_weights,
    load_tokenizer,
    preflight_model,
)
from aworld_train.redaction import remember_secrets
from aworld_train.references import resolve_path
from aworld_train.reward import engine_rewards_for, own_functions, resolve_reward
from aworld_train.reward_check import check_reward_on_rows
from aworld_train.settings import ALL_LINEAR

if TYPE_CHECKING:
    import datasets

    from aworld_train.agent import AgentSpec
    from aworld_train.checks import CheckRun
    from aworld_train.config import TrainConfig
    from aworld_train.memory import MemoryEstimate
    from aworld_train.reward import RewardSpec
    from aworld_train.tools import ToolSet

logger = logging.getLogger("aworld_train")


def load_engine(checks: CheckRun) -> None:
    """The plugin manager holding the engine and the extension plugins."""
    checks.manager = plugins.create_manager(checks.engine, checks.run_dir.path)


def read_layout(checks: CheckRun) -> None:
    """The engine's answer to ``config_layout``. :raises PluginError: for an answer that is
    neither a ``ConfigLayout`` nor ``None`` (a bug in the engine)."""
    layout = checks.call_engine("config_layout")
    if layout is not None and not isinstance(layout, ConfigLayout):
        raise PluginError(
            f"{checks.engine_info.label} config_layout returned "
            f"{type(layout).__name__}, not a ConfigLayout or None"
        )
    checks.layout = layout


def load_job_config(checks: CheckRun) -> TrainConfig:

    job = checks.job
    declarations = installed_declarations()
    checks.config = load_config(
        job.config,
        job.overrides,
        tuple(plugins.installed_engine_names()),
        job.base_dir,
        engine=checks.engine,
        layout=checks.layout,
        declarations=declarations,
    )
    for line in other_sections_warnings(checks.config, checks.engine, declarations):
        logger.warning(line)
    _check_evaluation(checks.config, job)
    return checks.config


def _check_evaluation(config: TrainConfig, job: Job) -> None:
    """``eval_steps`` and ``eval_limit`` need a test set, on every engine.

    :raises ConfigError: one line naming the key, for a job without ``test_dataset``.
    """
    if job.test_dataset is not None:
        return
    for key in ("eval_steps", "eval_limit"):
        if getattr(config, key) is not None:
            raise ConfigError(
                f"config {key}: the job has no test_dataset to evaluate; add one or remove {key}"
            )


def describe_config(config: TrainConfig) -> str:
    keys = ", ".join(
        f"{k} {v}"
        for k, v in config.to_dict().items()
        if k not in ("resources",) and not isinstance(v, dict)
    )
    sections = [name for name in config.sections]
    return keys + (f"; sections: {', '.join(sections)}" if sections else "")


def load_job_agent(checks: CheckRun) -> tuple[AgentSpec, str | None]:

    checks.spec = load_agent(checks.job.agent, checks.job.base_dir)
    remember_secrets({"agent": checks.spec.to_dict(), "config": checks.config.to_dict()})
    return checks.spec, checks.config.model or checks.spec.model


def describe_agent(loaded: tuple[AgentSpec, str | None]) -> str:
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


def check_model(checks: CheckRun) -> str | None:
    """Check the one model of the job without running code from its folder, and give it to
    both places engines read (``config.model``, ``agent.model``) in its checked form (a local
    folder made absolute). The engine's own model key leaves its section, so the engine maps
    ``config.model`` onto it and trains the model checked here.

    The config and the agent become new values: the job's own stay as it gave them."""
    section_model, config = _without_engine_model_key(checks)
    model = preflight_model(
        _one_model(checks, section_model), checks.job.base_dir, config.trust_remote_code
    )
    checks.config = dataclasses.replace(config, model=model)
    checks.spec = dataclasses.replace(checks.spec, model=model)
    return model


def _without_engine_model_key(checks: CheckRun) -> tuple[tuple[str, str] | None, TrainConfig]:
    """Where the engine's own model key names a model and which (``None`` when its section
    names none), and the config without that key in the section.

    :raises ConfigError: for a model key that is not a string.
    """
    config, layout = checks.config, checks.layout
    section = config.sections.get(checks.engine)
    if layout is None or not layout.model_key or section is None:
        return None, config
    place = f"config key '{checks.engine}.{layout.model_key}'"
    _, value, rest = without_section_key(section, layout.model_key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(
            f"{place} must be a model folder or hub id (a string), got {describe_value(value)}"
        )
    sections = {**config.sections, checks.engine: rest}
    return (place, value) if value else None, dataclasses.replace(config, sections=sections)


def _one_model(checks: CheckRun, section_model: tuple[str, str] | None) -> str | None:
    """The model the common ``model``, the agent and the engine's model key
    (``section_model``: where, and which) name (``None`` when none does). ``-o model=...``
    replaces the model the job names: the command line says which model to train this time.

    An AWorld ``Agent``'s ``llm_model_name`` is the name it calls its LLM server by, which
    AWorld Train itself sets aside when it trains: it is the policy only when nothing else
    names one, and never disagrees.

    :raises ConfigError: when two of them name different models, naming both places.
    """
    spec, config, job = checks.spec, checks.config, checks.job
    named = [("config key 'model'", config.model)]
    if spec.source is None:  # an agent file or mapping: its ``model`` is the policy
        named.append((f"agent '{spec.name}' model", spec.model))
    if section_model is not None:
        named.append(section_model)
    if config.model and any(item.partition("=")[0].strip() == "model" for item in job.overrides):
        return config.model
    given: list[tuple[str, str]] = [(place, value) for place, value in named if value]
    if not given and spec.source is not None and spec.model:
        given = [(f"AWorld agent '{spec.name}' llm_model_name", spec.model)]
    for place, value in given[1:]:
        first_place, first = given[0]
        if _model_identity(value, job.base_dir) != _model_identity(first, job.base_dir):
            raise ConfigError(
                f"{first_place} names {first} but {place} names {value}: name the model once"
            )
    return given[0][1] if given else None


def _model_identity(model: str, base_dir: Path | None) -> str:
    """A model as it is compared with another: the absolute folder it names, looked up where
    the model check looks (the job's folder, then the current one), else its text."""
    for root in (base_dir, None):
        folder = resolve_path(model, root)
        if folder.is_dir():
            return str(folder)
    return model


def describe_model(model: str | None) -> str:
    if model is None:
        return "none named"
    if Path(model).is_dir():
        return f"local folder {model}, checked without running code from it"
    return f"hub id {model} (not contacted during the checks)"


def local_model(checks: CheckRun) -> bool:
    return checks.spec.model is not None and Path(checks.spec.model).is_dir()


def _model_folder(checks: CheckRun) -> str:
    """The model folder of a step that runs only for a local one (:func:`local_model`)."""
    model = checks.spec.model
    assert model is not None, "a step for a local model folder ran without one"
    return model


def check_model_weights(checks: CheckRun) -> str:
    """The tensors in the model folder's safetensors headers against the architecture its
    ``config.json`` builds on the meta device: what was compared, or why not."""
    return check_weights(_model_folder(checks))


def lora_targets_checkable(checks: CheckRun) -> bool:
    return checks.config.lora is not None and local_model(checks)


def check_lora(checks: CheckRun) -> str | None:
    """LoRA's ``target_modules`` name modules of the local model (built on the meta device),
    or why they were not compared; ``None`` when they were."""
    lora = checks.config.lora
    assert lora is not None
    if lora.target_modules == ALL_LINEAR:
        return f"target_modules {ALL_LINEAR}: every linear layer but the output head"
    return check_lora_targets(
        _model_folder(checks), lora.target_modules, checks.config.trust_remote_code
    )


def describe_lora_targets(skipped: str | None) -> str:
    return skipped or "lora.target_modules name modules of the model"


def new_context(checks: CheckRun) -> RunContext:
    """The run context the engine's hooks receive, with its metrics reporter."""
    checks.metrics = MetricsReporter(
        None if checks.check_only else checks.run_dir.metrics_path,
        on_log=checks.report_metrics,
        show_progress=checks.progress,
        inherited=read_metrics(checks.resume_from) if checks.resume_from else None,
    )
    context = RunContext(
        engine=checks.engine,
        run_dir=checks.run_dir.path,
        config=checks.config,
        metrics=checks.metrics,
        check_only=checks.check_only,
        resume_from=checks.resume_from,
        given=_as_given(checks.job),
    )
    # An agent without tools keeps the context's own empty set.
    return context if checks.tools is None else dataclasses.replace(context, tools=checks.tools)


def _as_given(job: Job) -> Job:
    """The job as ``ctx.given`` shows it: its paths absolute, so an engine that starts
    processes elsewhere still finds the files; with ``-o`` overrides, the config as the mapping
    with them merged in."""
    given = absolute_paths(job)
    if not job.overrides:
        return given
    config = merge(read_config(job.config, job.base_dir)[0], parse_overrides(job.overrides))
    return dataclasses.replace(given, config=config, overrides=())


def resolve_job_tools(checks: CheckRun) -> ToolSet:
    """The agent's tools resolved (its Python functions and its MCP servers' tools), which the
    run context then holds."""
    # Imported here: the tools bring asyncio and the MCP client, which ``import aworld_train``
    # leaves out.
    from aworld_train.tools import resolve_tools

    checks.tools = resolve_tools(checks.spec, checks.job.base_dir)
    return checks.tools


def describe_tools(tools: ToolSet) -> str:
    servers = ", ".join(f"MCP server '{server.name}'" for server in tools.servers)
    return f"{len(tools)} tools ({', '.join(tools.names) or 'none'})" + (
        f" from {servers}" if servers else ""
    )


def load_train_dataset(checks: CheckRun) -> datasets.Dataset:
    checks.train_dataset = _load_dataset(checks, checks.job.train_dataset, "train_dataset")
    return checks.train_dataset


def load_test_dataset(checks: CheckRun) -> datasets.Dataset:
    checks.test_dataset = _load_dataset(checks, checks.job.test_dataset, "test_dataset")
    return checks.test_dataset


def _load_dataset(checks: CheckRun, source: Any, role: str) -> datasets.Dataset:

    return load_dataset(source, checks.job.columns, checks.job.base_dir, role)


def describe_dataset(dataset: datasets.Dataset) -> str:
    form = "chat messages" if isinstance(dataset[0]["prompt"], list) else "text"
    return f"{len(dataset)} rows, prompts as {form}, columns: {', '.join(dataset.column_names)}"


def lengths_comparable(checks: CheckRun) -> bool:
    """A local model folder (its tokenizer is read without running code) and a dataset."""
    model = checks.spec.model
    return model is not None and Path(model).is_dir() and checks.train_dataset is not None


def check_prompt_lengths(checks: CheckRun) -> None:
    """The longest prompts, rendered as the model sees them, plus the completion fit the
    model's context."""
    spec, config = checks.spec, checks.config
    present = {
        role: dataset
        for role, dataset in (
            ("train_dataset", checks.train_dataset),
            ("test_dataset", checks.test_dataset),
        )
        if dataset is not None
    }
    check_lengths(
        _model_folder(checks),
        present,
        spec.system_prompt,
        checks.context.tools.schemas(),
        config.max_completion_length or spec.llm_max_tokens,
        spec.max_turns,
        config.trust_remote_code,
    )


def describe_lengths(_: None) -> str:

    if importlib.util.find_spec("transformers") is None:
        return "not compared: transformers is not installed here"
    return "the longest prompts plus the completion fit the model's context"


def resolve_job_reward(checks: CheckRun) -> tuple[RewardSpec, Any]:
    """The reward resolved, and its scores on the ground truth of the training rows (all of
    them up to a budget), computed in a child process with a time limit (it is the user's
    code); a warning when the right answer scores below the maximum on some rows. An engine's
    own reward (``swift:accuracy``) is not scored here (the engine scores it while training,
    and checks it in its ``check_reward``), and refused on any other engine."""
    checks.reward = resolve_reward(checks.job.reward, checks.job.base_dir)
    engine_rewards_for(checks.reward, checks.engine)
    scores = None
    own = own_functions(checks.reward)
    if checks.train_dataset is not None and own is not None:
        scores = check_reward_on_rows(
            own, checks.train_dataset, timeout=checks.config.reward_timeout
        )
        warning = scores.warning()
        if warning:
            logger.warning(warning)
    return checks.reward, scores


def describe_reward(resolved: tuple[RewardSpec, Any]) -> str:
    reward, scores = resolved
    text = ", ".join(
        f"{f.ref if f.engine else f.name} x{f.weight:g}"
        + (f" (scored by {f.engine})" if f.engine else "")
        for f in reward.functions
    )
    return text + (f"; {scores.describe()}" if scores is not None else "")


def agent_runnable(checks: CheckRun) -> bool:
    """Whether the agent is code of its own (AWorld or Python) with a row to run on and a local
    model folder whose chat template renders its messages (a hub id has none offline), with
    transformers installed to render them."""
    model = checks.config.model or checks.spec.model
    return (
        checks.spec.runs_itself
        and checks.train_dataset is not None
        and bool(model)
        and Path(str(model)).is_dir()
        # where no engine is installed there is nothing to render with
        and importlib.util.find_spec("transformers") is not None
    )


def run_agent_once(checks: CheckRun) -> Any:
    """The user's own agent (AWorld or Python) run once on the first row against a stand-in
    policy, its answer scored by the reward: see :mod:`aworld_train.runtime.standin`."""
    # Imported here: the runtime package (its OpenAI-style endpoint, asyncio) is for agents
    # that run their own code only.
    from aworld_train.runtime.standin import check_agent_once

    model = str(checks.config.model or checks.spec.model)
    tokenizer = load_tokenizer(model, checks.config.trust_remote_code)
    where = (
        f"{checks.job.train_dataset} row 0"
        if isinstance(checks.job.train_dataset, (str, Path))
        else "the train dataset's row 0"
    )

    # An engine's own reward (swift:format) is scored by the engine alone, while training.
    reward = own_functions(checks.reward) if checks.reward is not None else None
    assert checks.train_dataset is not None  # agent_runnable
    # An engine that trains an episode as one sequence refuses an agent that rewrites it.
    one_sequence = "" if checks.manager.hook.trains_segments() else checks.engine
    return check_agent_once(
        checks.spec,
        dict(checks.train_dataset[0]),
        tokenizer,
        reward,
        where=where,
        one_sequence=one_sequence,
        segment_engines=tuple(plugins.segment_engines()) if one_sequence else (),
    )


def describe_agent_run(checked: Any) -> str:
    scored = "" if checked.score is None else f", reward {checked.score:g}"
    segments = f", {checked.segments} segments" if checked.segments > 1 else ""
    return (
        f"{checked.turns} model call(s) answered by a stand-in{segments}, answer "
        f"{checked.answer[:40]!r}{scored}"
    )


def estimate_memory(checks: CheckRun) -> MemoryEstimate | str:
    """The peak memory of one training step per GPU (:mod:`aworld_train.memory`), from the
    model built on the meta device and the engine's ``memory_plan`` (else the core's default
    plan); or why it was not estimated.

    :raises ConfigError: when the certain part (weights, gradients, optimizer states,
        reservations) does not fit the GPU; above that a warning is logged.
    :raises PluginError: for a ``memory_plan`` answer that is not a ``MemoryPlan`` or ``None``.
    """
    if (
        importlib.util.find_spec("torch") is None
        or importlib.util.find_spec("transformers") is None
    ):
        return "not estimated: torch and transformers are not installed here"
    values = {setting.name: setting.value for setting in checks.settings or []}
    plan = memory.default_plan(checks.config, values, checks.spec.llm_max_tokens)
    answer = checks.call_engine(
        "memory_plan", config=checks.hand_off.config, default=plan, ctx=checks.context
    )
    if answer is not None and not isinstance(answer, memory.MemoryPlan):
        raise PluginError(
            f"{checks.engine_info.label} memory_plan returned "
            f"{type(answer).__name__}, not a MemoryPlan or None"
        )
    plan = answer or plan
    shape = memory.model_shape(_model_folder(checks), plan.lora, checks.config.trust_remote_code)
    if isinstance(shape, str):
        return f"not estimated: {shape}"
    capacity, gpu = memory.gpu_capacity(checks.config.resources.gpu_memory_gb, values.get("device"))
    checks.memory = memory.estimate(shape, plan, capacity, gpu)
    warning = memory.refuse_or_warn(checks.memory)
    if warning:
        logger.warning(warning)
    return checks.memory


def describe_memory(estimated: MemoryEstimate | str) -> str:
    return estimated if isinstance(estimated, str) else memory.describe(estimated)
