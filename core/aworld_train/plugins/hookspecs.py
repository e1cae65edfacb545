"""The hooks an engine implements.

Before it reads the job's config, the core asks the selected engine how its own config files
look (``config_layout``). It then calls the five card hooks in AWorld Train's order:
``check_agent``, ``check_dataset``, ``check_reward``, ``check_config``, then, once the trainer
has marked itself initialised, ``train``. The order is kept because processors written for
AWorld Train rely on it, and because an engine's config assembles from the other three.

Each hook receives, as named arguments, what the core resolved and validated (the generic
layer: ``agent``, ``train_dataset``/``test_dataset``, ``reward``, ``config``, ``tools``) and
what the earlier hooks returned, plus ``ctx``, the :class:`~aworld_train.plugins.context.RunContext`.
An implementation takes any subset of a spec's arguments, by name. Each check returns the
engine-ready form of its input, or ``None`` to keep the core's form, and later hooks receive
that form under the same name:

=================  ==========================================================================
hook               receives
=================  ==========================================================================
``check_agent``    ``agent`` (the core's AgentSpec), ``config`` (the core's TrainConfig),
                   ``tools``, ``ctx``
``check_dataset``  ``train_dataset``, ``test_dataset`` (the core's), ``agent`` (check_agent's),
                   ``config`` (the core's), ``ctx``
``check_reward``   ``reward`` (the core's RewardSpec), ``agent``, ``dataset`` (check_dataset's),
                   ``config`` (the core's), ``ctx``
``check_config``   ``config`` (the core's), ``agent``, ``dataset``, ``reward`` (the checks'),
                   ``ctx``
``train``          ``agent``, ``dataset``, ``reward``, ``engine_config`` (check_config's),
                   ``ctx``
=================  ==========================================================================

``config`` is always the core's ``TrainConfig``; what ``check_config`` returned (the engine's
own config) reaches ``train``, ``effective_settings`` and ``memory_plan`` as ``engine_config``.
Right after ``check_config`` the core asks ``effective_settings`` for the settings the engine will train with under their common names, which ``check`` prints
and the manifest keeps; then ``memory_plan`` for what one training process holds on its GPU,
which sizes the ``resources`` row.

Check hooks must be cheap: they must not start training, Ray, a GPU, or a model download.
They raise a subclass of :class:`~aworld_train.errors.AWorldTrainError` for bad input; anything
else a hook raises is reported as a bug in the engine, in one line naming the engine, its
distribution and the hook. An engine must implement ``train``; the checks are optional.

Extension plugins (entry-point group ``aworld_train.plugins``) implement the same hooks, usually
as wrappers (``@hookimpl(wrapper=True)``), plus ``report_metrics`` to receive every logged step;
an extension plugin's ``report_metrics`` that raises is logged, naming it, and the run goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    import datasets

    from aworld_train.agent import AgentSpec
    from aworld_train.job.config import ConfigLayout, TrainConfig
    from aworld_train.plugins.context import RunContext
    from aworld_train.model.memory import MemoryPlan
    from aworld_train.reward import RewardSpec
    from aworld_train.job.settings import Setting
    from aworld_train.tools import ToolSet

PROJECT_NAME = "aworld_train"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec(firstresult=True)
def config_layout() -> ConfigLayout | None:
    """Say how the engine's own config files look, so that one given whole is its section.

    Called once per job, before the config is read (and before any check hook). With the
    layout, a top-level config key the core does not know that the layout claims moves into the
    engine's section, as if the user had written it under ``<engine>:``, and the section's
    ``model_key`` is one model with the common ``model`` and the agent's (the core takes it out
    of the section and puts the checked model in ``config.model``). It must be cheap: it may
    read a cached schema, never start a GPU, a model or Ray.

    :returns: a :class:`~aworld_train.job.config.ConfigLayout`, or ``None`` when the engine has no
        config files of its own (its keys are written under ``<engine>:`` only).
    """


@hookspec(firstresult=True)
def check_agent(
    agent: AgentSpec, config: TrainConfig, tools: ToolSet, ctx: RunContext
) -> Any | None:
    """Check the agent and turn it into the engine's form.

    Called first, after the core has read the config, normalised the user's agent (an AWorld
    ``Agent``, a YAML or JSON file, a dict or a ``module:factory``) into an
    :class:`~aworld_train.agent.AgentSpec` (the default spec when the user gave none), checked
    the job's one model (in both ``agent.model`` and ``config.model``) and resolved the agent's
    tools (:func:`aworld_train.tools.resolve_tools`): it imported the Python tools, connected to
    each MCP server the agent uses and listed its tools, failing on the server or tool that is
    wrong.

    :param agent: the normalised agent spec (``name``, ``model``, ``system_prompt``, ``tools``,
        ``mcp_config``, ``mcp_servers``, ``max_turns``, LLM settings).
    :param config: the common training config as the core validated it (``check_config`` has
        not run yet: read the engine-neutral keys, such as ``max_completion_length``).
    :param tools: the agent's resolved :class:`~aworld_train.tools.ToolSet` (empty for an agent
        without tools), also ``ctx.tools``: each tool has ``name``, ``description``,
        ``parameters`` (JSON schema), ``schema`` (OpenAI style) and ``call(**arguments) -> str``.
    :param ctx: the run context.
    :returns: the engine-ready agent, or ``None`` to keep ``agent``.
    :raises AgentError: for an agent feature the engine does not support.
    """


@hookspec(firstresult=True)
def check_dataset(
    train_dataset: datasets.Dataset | None,
    test_dataset: datasets.Dataset | None,
    agent: Any,
    config: TrainConfig,
    ctx: RunContext,
) -> Any | None:
    """Check the datasets and convert them to the engine's format.

    Called second, after the core has loaded both datasets, applied the ``columns:`` mapping and
    validated every row: each has a ``prompt`` (a string or a list of chat messages) and a
    ``ground_truth``; ``data_source`` and ``extra_info`` (a dict) are present, other columns pass
    through.

    :param train_dataset: the canonical training dataset, or ``None`` when the user gave none
        (an engine that needs one raises ``DatasetError``).
    :param test_dataset: the canonical test dataset, or ``None``.
    :param agent: what ``check_agent`` returned (the core's ``AgentSpec`` when it returned
        ``None``).
    :param config: the common training config as the core validated it.
    :param ctx: the run context; converted files belong in ``ctx.run_dir``.
    :returns: the engine-ready datasets (any form), or ``None`` to keep the canonical ones.
    :raises DatasetError: for rows the engine cannot use, naming the row.
    """


@hookspec(firstresult=True)
def check_reward(
    reward: RewardSpec | None, agent: Any, dataset: Any, config: TrainConfig, ctx: RunContext
) -> Any | None:
    """Check the reward and wrap it in the engine's reward interface.

    Called third. The core has already resolved every reward function, checked its signature
    ``reward(data_source, solution_str, ground_truth, extra_info=None) -> float | dict`` and
    scored the training rows with it (each row's ground truth as the completion, every row up to
    a budget), in a child process with a time limit per call.

    :param reward: the resolved reward functions with their weights, or ``None`` when the user
        gave none (an engine that needs one raises ``RewardError``).
    :param agent: what ``check_agent`` returned (the core's ``AgentSpec`` when ``None``).
    :param dataset: what ``check_dataset`` returned (the core's training ``datasets.Dataset``,
        or ``None``, when it returned ``None``).
    :param config: the common training config as the core validated it.
    :param ctx: the run context.
    :returns: the engine-ready reward, or ``None`` to keep ``reward``.
    :raises RewardError: when the engine's own reward path fails on a sample.
    """


@hookspec(firstresult=True)
def check_config(
    config: TrainConfig, agent: Any, dataset: Any, reward: Any, ctx: RunContext
) -> Any | None:
    """Map the common config onto the engine's own and validate it with the engine's schema.

    Called fourth, so that the engine's config assembles from what the other three checks
    returned. ``config`` holds the validated engine-neutral keys and, in
    ``config.engine_section()`` (no argument), the section named after the entry point the
    engine was selected by, which the hook validates against the engine's own schema.

    :param config: the common training config.
    :param agent: what ``check_agent`` returned (the core's ``AgentSpec`` when ``None``).
    :param dataset: what ``check_dataset`` returned (the core's training dataset when ``None``).
    :param reward: what ``check_reward`` returned (the core's ``RewardSpec`` when ``None``).
    :param ctx: the run context.
    :returns: the engine's resolved config, or ``None`` to keep ``config``.
    :raises ConfigError: for an unknown key (with a suggestion) or a bad value.
    """


@hookspec(firstresult=True)
def effective_settings(engine_config: Any, ctx: RunContext) -> list[Setting] | None:
    """Say which value of each common setting the engine will train with, and under which of
    its own keys.

    Called right after ``check_config``, in ``check`` too; cheap like the checks (the device is
    described, not opened: :func:`~aworld_train.job.settings.describe_device`). ``check`` prints
    the answer as a table; the manifest records ``device``, ``precision`` and ``settings``
    (``{name: value}``).

    :param engine_config: the engine's own config: what ``check_config`` returned (the
        core's ``TrainConfig`` when ``None``); ``ctx.config`` is the common ``TrainConfig``.
    :param ctx: the run context.
    :returns: one :class:`~aworld_train.job.settings.Setting` per common name that applies to the
        job's algorithm, always including ``device`` and ``precision`` (resolved, never
        ``auto``), with ``source="default"`` and the engine's own default for a setting the job
        leaves unset; or ``None`` when the engine does not report its settings.
    """


@hookspec(firstresult=True)
def memory_plan(engine_config: Any, default: MemoryPlan, ctx: RunContext) -> MemoryPlan | None:
    """Say what one training process will hold on its GPU, for the memory estimate of
    ``check``'s ``resources`` row.

    Called after ``effective_settings``, in ``check`` too, when the job's model is a local
    folder; cheap like the checks (no GPU is opened, no model loaded: the core builds the model
    from ``config.json`` on the meta device itself).

    :param engine_config: the engine's own config: what ``check_config`` returned (the core's
        ``TrainConfig`` when ``None``).
    :param default: the plan the core derives from the common config and the effective
        settings (precision, LoRA, ``kl_coef``, ``batch_size``, the sequence budget; no
        checkpointing, no sharding); an engine usually returns
        ``dataclasses.replace(default, ...)`` with what its own settings decide.
    :param ctx: the run context.
    :returns: a :class:`~aworld_train.model.memory.MemoryPlan` (micro-batch, sequence length,
        gradient checkpointing, FSDP/ZeRO degree and stage, offload, reference model, a
        colocated vLLM's ``gpu_memory_utilization``), or ``None`` to keep ``default``.
    """


@hookspec(firstresult=True)
def train(
    agent: Any, dataset: Any, reward: Any, engine_config: Any, ctx: RunContext
) -> dict[str, Any] | None:
    """Train, reporting each logged step through ``ctx.metrics.log(step, metrics)``.

    Called only after every check passed and the trainer marked itself initialised; never in a
    check-only run. Checkpoints and the final model belong in ``ctx.run_dir``;
    ``ctx.resume_from`` is the run directory of an interrupted run to continue, or ``None``.
    An engine whose checkpoints do not load as they are names each one it completes, with the
    command that converts it into ``model/``, in the run's export note
    (:func:`~aworld_train.run.export.note_export`), which ``eval`` and ``show`` print for a run
    that stopped before its final model.

    :param agent: what ``check_agent`` returned (the core's ``AgentSpec`` when ``None``).
    :param dataset: what ``check_dataset`` returned (the core's training dataset when ``None``).
    :param reward: what ``check_reward`` returned (the core's ``RewardSpec`` when ``None``).
    :param engine_config: the engine's own config: what ``check_config`` returned (the core's
        ``TrainConfig`` when ``None``).
    :param ctx: the run context.
    :returns: the final metrics, or ``None``.
    :raises TrainingError: when the engine cannot train on this machine.
    """


@hookspec(firstresult=True)
def engine_versions() -> dict[str, str] | None:
    """Name the engine libraries this engine drives and their installed versions.

    Called when a run starts, for ``manifest.json``. It may import nothing heavy: read versions
    with ``importlib.metadata.version``.

    :returns: a mapping such as ``{"trl": "1.16.0"}``, or ``None``.
    """


@hookspec(firstresult=True)
def trains_segments() -> bool | None:
    """Say whether the engine trains an episode the agent cut into segments.

    An agent that rewrites the conversation it had sent (smolagents re-renders its memory on
    every call) makes an episode of several token sequences, its *segments*
    (:attr:`~aworld_train.runtime.EpisodeResult.segments`). An engine that trains each segment
    as a row of its own, with the episode's reward, answers ``True``; otherwise ``check`` and
    the runtime refuse such an agent in one line naming the engine.

    Called by ``check`` before it runs the agent once; it must be cheap.

    :returns: ``True`` when the engine trains every segment; ``None`` (the default) when not.
    """


@hookspec(firstresult=True)
def resume_support() -> str | None:
    """Say how a run the engine resumes (``--resume``) continues the run it resumes.

    ``"exact"``: the resumed run trains on the same samples in the same order with the same
    random draws, and ends where the run would have ended without the stop (on a deterministic
    device, to the bit); the conformance suite holds the engine to it. ``"continued"``: it goes
    on from the last checkpoint, but some state is not restored (the engine's README says
    which), and ``show`` marks such a resumed run "continued, not bit-exact". ``"none"``: the
    engine cannot resume, and ``--resume`` is refused in one line naming the engine.

    Called when a run resumes another (``train --resume``, ``AgentTrainer(resume=...)``),
    before any check of the job; it must be cheap.

    :returns: ``"exact"``, ``"continued"`` or ``"none"``; ``None`` (the default) counts as
        ``"exact"``.
    """


@hookspec
def report_metrics(step: int, metrics: dict[str, float], ctx: RunContext) -> None:
    """Receive one logged step of metrics, after it was written to ``metrics.jsonl``.

    Called by ``ctx.metrics.log`` for every step an engine reports; meant for extension plugins
    that forward metrics elsewhere (a tracker, a dashboard). Each implementation is called on
    its own: an extension plugin's that raises is logged, naming the plugin, and the run goes
    on; the engine's own raises as any engine code does.

    :param step: the global training step.
    :param metrics: the metric values of that step.
    :param ctx: the run context.
    :returns: nothing; every implementation is called and return values are ignored.
    """
