"""The core's checks of the job's one model, each a step of :data:`aworld_train.checks.CHECKS`:
the model the config, the agent and the engine's section name, checked without running code
from its folder; for a local folder its weights, LoRA's targets, the prompts' lengths and the
memory of a training step. Each is given by name what it needs and returns what it found
(:class:`~aworld_train.checks._pipeline.Found`)."""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from aworld_train.model import memory
from aworld_train.checks._pipeline import EngineHooks, Found, HandOff
from aworld_train.job.config import ConfigLayout, describe_value, without_section_key
from aworld_train.errors import ConfigError, PluginError
from aworld_train.job.spec import Job
from aworld_train.model import check_lengths, check_lora_targets, check_weights, preflight_model
from aworld_train.job.references import resolve_path
from aworld_train.job.settings import ALL_LINEAR, Setting

if TYPE_CHECKING:
    import datasets

    from aworld_train.agent import AgentSpec
    from aworld_train.job.config import TrainConfig
    from aworld_train.plugins.context import RunContext
    from aworld_train.model.memory import MemoryEstimate

logger = logging.getLogger("aworld_train")


def check_model(
    job: Job, engine: str, config: TrainConfig, spec: AgentSpec, layout: ConfigLayout | None
) -> Found:
    """Check the one model of the job without running code from its folder, and give it to
    both places engines read (``config.model``, ``agent.model``) in its checked form (a local
    folder made absolute). The engine's own model key leaves its section, so the engine maps
    ``config.model`` onto it and trains the model checked here.

    The config and the agent become new values: the job's own stay as it gave them."""
    section_model, without_key = _without_engine_model_key(config, layout, engine)
    one_model = _one_model(job, config, spec, section_model)
    model = preflight_model(one_model, job.base_dir, without_key.trust_remote_code)
    return Found(
        model,
        config=dataclasses.replace(without_key, model=model),
        spec=dataclasses.replace(spec, model=model),
    )


def _without_engine_model_key(
    config: TrainConfig, layout: ConfigLayout | None, engine: str
) -> tuple[tuple[str, str] | None, TrainConfig]:
    """Where the engine's own model key names a model and which (``None`` when its section
    names none), and the config without that key in the section.

    :raises ConfigError: for a model key that is not a string.
    """
    section = config.sections.get(engine)
    if layout is None or not layout.model_key or section is None:
        return None, config
    place = f"config key '{engine}.{layout.model_key}'"
    _, value, rest = without_section_key(section, layout.model_key)
    if value is not None and not isinstance(value, str):
        raise ConfigError(
            f"{place} must be a model folder or hub id (a string), got {describe_value(value)}"
        )
    sections = {**config.sections, engine: rest}
    return (place, value) if value else None, dataclasses.replace(config, sections=sections)


def _one_model(
    job: Job, config: TrainConfig, spec: AgentSpec, section_model: tuple[str, str] | None
) -> str | None:
    """The model the common ``model``, the agent and the engine's model key
    (``section_model``: where, and which) name (``None`` when none does). ``-o model=...``
    replaces the model the job names: the command line says which model to train this time.

    An AWorld ``Agent``'s ``llm_model_name`` is the name it calls its LLM server by, which
    AWorld Train itself sets aside when it trains: it is the policy only when nothing else
    names one, and never disagrees.

    :raises ConfigError: when two of them name different models, naming both places.
    """
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


def local_model(spec: AgentSpec) -> bool:
    return spec.model is not None and Path(spec.model).is_dir()


def _model_folder(spec: AgentSpec) -> str:
    """The model folder of a step that runs only for a local one (:func:`local_model`)."""
    model = spec.model
    assert model is not None, "a step for a local model folder ran without one"
    return model


def check_model_weights(spec: AgentSpec) -> str:
    """The tensors in the model folder's safetensors headers against the architecture its
    ``config.json`` builds on the meta device: what was compared, or why not."""
    return check_weights(_model_folder(spec))


def lora_targets_checkable(config: TrainConfig, spec: AgentSpec) -> bool:
    return config.lora is not None and local_model(spec)


def check_lora(config: TrainConfig, spec: AgentSpec) -> str | None:
    """LoRA's ``target_modules`` name modules of the local model (built on the meta device),
    or why they were not compared; ``None`` when they were."""
    lora = config.lora
    assert lora is not None
    if lora.target_modules == ALL_LINEAR:
        return f"target_modules {ALL_LINEAR}: every linear layer but the output head"
    return check_lora_targets(_model_folder(spec), lora.target_modules, config.trust_remote_code)


def describe_lora_targets(skipped: str | None) -> str:
    return skipped or "lora.target_modules name modules of the model"


def lengths_comparable(spec: AgentSpec, train_dataset: datasets.Dataset | None) -> bool:
    """A local model folder (its tokenizer is read without running code) and a dataset."""
    return local_model(spec) and train_dataset is not None


def check_prompt_lengths(
    spec: AgentSpec,
    config: TrainConfig,
    context: RunContext,
    train_dataset: datasets.Dataset | None,
    test_dataset: datasets.Dataset | None,
) -> None:
    """The longest prompts, rendered as the model sees them, plus the completion fit the
    model's context."""
    present = {
        role: dataset
        for role, dataset in (("train_dataset", train_dataset), ("test_dataset", test_dataset))
        if dataset is not None
    }
    check_lengths(
        _model_folder(spec),
        present,
        spec.system_prompt,
        context.tools.schemas(),
        config.max_completion_length or spec.llm_max_tokens,
        spec.max_turns,
        config.trust_remote_code,
    )


def describe_lengths(_: None) -> str:

    if importlib.util.find_spec("transformers") is None:
        return "not compared: transformers is not installed here"
    return "the longest prompts plus the completion fit the model's context"


def estimate_memory(
    hooks: EngineHooks,
    config: TrainConfig,
    spec: AgentSpec,
    settings: list[Setting] | None,
    hand_off: HandOff,
    context: RunContext,
) -> Found:
    """The peak memory of one training step per GPU (:mod:`aworld_train.model.memory`), from the
    model built on the meta device and the engine's ``memory_plan`` (else the core's default
    plan); or why it was not estimated. Keeps the estimate as ``memory`` (``None`` when there is
    none) for the manifest.

    :raises ConfigError: when the certain part (weights, gradients, optimizer states,
        reservations) does not fit the GPU; above that a warning is logged.
    :raises PluginError: for a ``memory_plan`` answer that is not a ``MemoryPlan`` or ``None``.
    """
    if (
        importlib.util.find_spec("torch") is None
        or importlib.util.find_spec("transformers") is None
    ):
        return Found("not estimated: torch and transformers are not installed here", memory=None)
    values = {setting.name: setting.value for setting in settings or []}
    plan = memory.default_plan(config, values, spec.llm_max_tokens)
    answer = hooks.call("memory_plan", engine_config=hand_off.config, default=plan, ctx=context)
    if answer is not None and not isinstance(answer, memory.MemoryPlan):
        raise PluginError(
            f"{hooks.info.label} memory_plan returned "
            f"{type(answer).__name__}, not a MemoryPlan or None"
        )
    plan = answer or plan
    shape = memory.model_shape(_model_folder(spec), plan.lora, config.trust_remote_code)
    if isinstance(shape, str):
        return Found(f"not estimated: {shape}", memory=None)
    capacity, gpu = memory.gpu_capacity(config.resources.gpu_memory_gb, values.get("device"))
    estimated = memory.estimate(shape, plan, capacity, gpu)
    warning = memory.refuse_or_warn(estimated)
    if warning:
        logger.warning(warning)
    return Found(estimated, memory=estimated)


def describe_memory(estimated: MemoryEstimate | str) -> str:
    return estimated if isinstance(estimated, str) else memory.describe(estimated)
