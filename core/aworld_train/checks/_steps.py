"""The core's own checks of a job, each a step of :data:`aworld_train.checks.CHECKS`: the engine,
the config (with the engine's layout), the agent, the tools, the run context, the datasets, the
reward, and the agent run once against a stand-in; the checks of its one model are in
:mod:`aworld_train.checks._model_steps`. Each is given by name what it needs and returns what it
found (:class:`~aworld_train.checks._pipeline.Found`): what its row describes, and the new values
it keeps for the later steps (the job's own config and agent stay as given)."""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train import plugins
from aworld_train.agent import load_agent
from aworld_train.checks._pipeline import EngineHooks, Found, HandOff
from aworld_train.checks._settings import other_sections_warnings
from aworld_train.job.config import ConfigLayout, load_config
from aworld_train.plugins.context import RunContext
from aworld_train.dataset.loading import load_dataset
from aworld_train.plugins import installed_declarations
from aworld_train.run.resume import RESUME_SUPPORT
from aworld_train.errors import ConfigError, PluginError, RunDirectoryError
from aworld_train.job.spec import Job
from aworld_train.run.metrics import MetricsReporter, read_metrics
from aworld_train.model import (
    load_tokenizer,
)
from aworld_train.run.redaction import remember_secrets
from aworld_train.reward import engine_rewards_for, own_functions, resolve_reward
from aworld_train.checks._reward import check_reward_on_rows

if TYPE_CHECKING:
    import datasets

    from aworld_train.agent import AgentSpec
    from aworld_train.job.config import TrainConfig
    from aworld_train.reward import RewardSpec
    from aworld_train.run.directory import RunDirectory
    from aworld_train.tools import ToolSet

logger = logging.getLogger("aworld_train")


def load_engine(engine_info: plugins.EngineInfo, run_dir: RunDirectory) -> Found:
    """The engine's hooks, in a plugin manager with the extension plugins."""
    manager = plugins.create_manager(engine_info.name, run_dir.path)
    return Found(hooks=EngineHooks(engine_info, manager))


def read_layout(hooks: EngineHooks) -> Found:
    """The engine's answer to ``config_layout``. :raises PluginError: for an answer that is
    neither a ``ConfigLayout`` nor ``None`` (a bug in the engine)."""
    layout = hooks.call("config_layout")
    if layout is not None and not isinstance(layout, ConfigLayout):
        raise PluginError(
            f"{hooks.info.label} config_layout returned "
            f"{type(layout).__name__}, not a ConfigLayout or None"
        )
    return Found(layout=layout)


def load_job_config(job: Job, engine: str, layout: ConfigLayout | None) -> Found:
    """The config as the job wrote it with its ``-o`` overrides, each read with the engine's
    layout, checked key by key."""
    assert job.written_config is not None, "the trainer resolves the job before the checks"
    written, where = job.written_config
    declarations = installed_declarations()
    config = load_config(
        written,
        job.overrides,
        tuple(plugins.installed_engine_names()),
        job.base_dir,
        engine=engine,
        layout=layout,
        declarations=declarations,
        where=where,
    )
    for line in other_sections_warnings(config, engine, declarations):
        logger.warning(line)
    _check_evaluation(config, job)
    return Found(config, config=config)


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


def load_job_agent(job: Job, config: TrainConfig) -> Found:
    """The agent, shown with the model that trains."""
    spec = load_agent(job.agent, job.base_dir)
    remember_secrets({"agent": spec.to_dict(), "config": config.to_dict()})
    return Found((spec, config.model or spec.model), spec=spec)


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


def new_context(
    job: Job,
    hooks: EngineHooks,
    run_dir: RunDirectory,
    config: TrainConfig,
    tools: ToolSet | None,
    check_only: bool,
    resume_from: Path | None,
    progress: bool,
) -> Found:
    """The run context the engine's hooks receive, with its metrics reporter, and the hand-off
    that starts with its tools."""
    failed_reporters: set[str] = set()

    def report_metrics(step: int, metrics: dict[str, float]) -> None:
        plugins.report_metrics(
            hooks.manager, hooks.name, failed_reporters, step=step, metrics=metrics, ctx=context
        )

    reporter = MetricsReporter(
        None if check_only else run_dir.metrics_path,
        on_log=report_metrics,
        show_progress=progress,
        inherited=read_metrics(resume_from) if resume_from else None,
    )
    context = RunContext(
        engine=hooks.name,
        run_dir=run_dir.path,
        config=config,
        metrics=reporter,
        check_only=check_only,
        resume_from=resume_from,
        given=job,
    )
    # An agent without tools keeps the context's own empty set.
    if tools is not None:
        context = dataclasses.replace(context, tools=tools)
    return Found(context=context, hand_off=HandOff(tools=context.tools))


def resolve_job_tools(job: Job, spec: AgentSpec) -> Found:
    """The agent's tools resolved (its Python functions and its MCP servers' tools), which the
    run context then holds."""
    # Imported here: the tools bring asyncio and the MCP client, which ``import aworld_train``
    # leaves out.
    from aworld_train.tools import resolve_tools

    tools = resolve_tools(spec, job.base_dir)
    return Found(tools, tools=tools)


def describe_tools(tools: ToolSet) -> str:
    servers = ", ".join(f"MCP server '{server.name}'" for server in tools.servers)
    return f"{len(tools)} tools ({', '.join(tools.names) or 'none'})" + (
        f" from {servers}" if servers else ""
    )


def load_train_dataset(job: Job) -> Found:
    dataset = load_dataset(job.train_dataset, job.columns, job.base_dir, "train_dataset")
    return Found(dataset, train_dataset=dataset)


def load_test_dataset(job: Job) -> Found:
    dataset = load_dataset(job.test_dataset, job.columns, job.base_dir, "test_dataset")
    return Found(dataset, test_dataset=dataset)


def describe_dataset(dataset: datasets.Dataset) -> str:
    form = "chat messages" if isinstance(dataset[0]["prompt"], list) else "text"
    return f"{len(dataset)} rows, prompts as {form}, columns: {', '.join(dataset.column_names)}"


def resolve_job_reward(
    job: Job, engine: str, config: TrainConfig, train_dataset: datasets.Dataset | None
) -> Found:
    """The reward resolved, and its scores on the ground truth of the training rows (all of
    them up to a budget), computed in a child process with a time limit (it is the user's
    code); a warning when the right answer scores below the maximum on some rows. An engine's
    own reward (``swift:accuracy``) is not scored here (the engine scores it while training,
    and checks it in its ``check_reward``), and refused on any other engine."""
    reward = resolve_reward(job.reward, job.base_dir, plugins.installed_engine_names())
    engine_rewards_for(reward, engine)
    scores = None
    own = own_functions(reward)
    if train_dataset is not None and own is not None:
        scores = check_reward_on_rows(own, train_dataset, timeout=config.reward_timeout)
        warning = scores.warning()
        if warning:
            logger.warning(warning)
    return Found((reward, scores), reward=reward)


def describe_reward(resolved: tuple[RewardSpec, Any]) -> str:
    reward, scores = resolved
    text = ", ".join(
        f"{f.ref if f.engine else f.name} x{f.weight:g}"
        + (f" (scored by {f.engine})" if f.engine else "")
        for f in reward.functions
    )
    return text + (f"; {scores.describe()}" if scores is not None else "")


def agent_runnable(
    config: TrainConfig, spec: AgentSpec, train_dataset: datasets.Dataset | None
) -> bool:
    """Whether the agent is code of its own (AWorld or Python) with a row to run on and a local
    model folder whose chat template renders its messages (a hub id has none offline), with
    transformers installed to render them."""
    model = config.model or spec.model
    return (
        spec.runs_itself
        and train_dataset is not None
        and bool(model)
        and Path(str(model)).is_dir()
        # where no engine is installed there is nothing to render with
        and importlib.util.find_spec("transformers") is not None
    )


def run_agent_once(
    job: Job,
    hooks: EngineHooks,
    config: TrainConfig,
    spec: AgentSpec,
    reward: RewardSpec | None,
    train_dataset: datasets.Dataset | None,
) -> Any:
    """The user's own agent (AWorld or Python) run once on the first row against a stand-in
    policy, its answer scored by the reward: see :mod:`aworld_train.runtime.standin`."""
    # Imported here: the runtime package (its OpenAI-style endpoint, asyncio) is for agents
    # that run their own code only.
    from aworld_train.runtime.standin import check_agent_once

    model = str(config.model or spec.model)
    tokenizer = load_tokenizer(model, config.trust_remote_code)
    written = job.as_written or job  # the dataset named as the user wrote it
    where = (
        f"{written.train_dataset} row 0"
        if isinstance(written.train_dataset, (str, Path))
        else "the train dataset's row 0"
    )

    # An engine's own reward (swift:format) is scored by the engine alone, while training.
    scored_here = own_functions(reward) if reward is not None else None
    assert train_dataset is not None  # agent_runnable
    # An engine that trains an episode as one sequence refuses an agent that rewrites it.
    one_sequence = "" if hooks.manager.hook.trains_segments() else hooks.name
    return check_agent_once(
        spec,
        dict(train_dataset[0]),
        tokenizer,
        scored_here,
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


def check_resume_support(hooks: EngineHooks) -> Found:
    """The engine's answer to ``resume_support`` (``None`` counts as ``"exact"``), kept as
    ``resume_support`` for the manifest.

    :raises RunDirectoryError: when the engine cannot resume (``"none"``).
    :raises PluginError: for an answer that is none of :data:`RESUME_SUPPORT`.
    """
    support = hooks.call("resume_support") or "exact"
    if support not in RESUME_SUPPORT:
        raise PluginError(
            f"{hooks.info.label} resume_support returned {support!r}, not one of "
            f"{', '.join(RESUME_SUPPORT)} or None"
        )
    if support == "none":
        raise RunDirectoryError(
            f"engine {hooks.name} cannot resume a run (its resume_support is 'none'): "
            "train the job again without --resume"
        )
    return Found(str(support), resume_support=str(support))


def describe_resume_support(support: str) -> str:
    if support == "exact":
        return "resumes exactly: the same samples, order and random draws"
    return "continues from the last checkpoint, not bit-exact (see the engine's README)"
