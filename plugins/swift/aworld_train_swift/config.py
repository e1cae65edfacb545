"""check_config: the common keys and the ``swift:`` section become ms-swift's arguments.

The ``swift:`` section is validated against swift's own argument dataclass and registries
(:mod:`aworld_train_swift.schema`). For a local model the arguments are then built once, so
swift's own checks (template, batch sizes, ...) run now, offline: no hub login, no download,
no code from the model folder unless the job trusts it.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import CHECKPOINTS, AWorldTrainError, ConfigError
from aworld_train.engine.hf import TrainerConfig, arguments_class
from aworld_train.engine.launch import scoped_environment
from aworld_train.engine.runtime import refuse_sharded_episodes
from aworld_train.engine.settings import TRACKERS, check_trackers, require_package

from aworld_train_swift.declaration import SETTINGS
from aworld_train_swift.logs import LOG_FILE
from aworld_train_swift.remote_code import model_code
from aworld_train_swift.schema import ARGUMENT_CLASSES, SECRETS, validate_section
from aworld_train_swift.settings import common_arguments, end_only_eval, samples_per_step

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig

    from aworld_train_swift.agent import SwiftAgent
    from aworld_train_swift.dataset import SwiftDatasets
    from aworld_train_swift.reward import SwiftReward

# Where swift's caches go inside the run directory (its outputs: the run's CHECKPOINTS).
CACHE = "cache"
# Arguments whose only effect while swift builds its arguments is a network call (a hub
# download, a vLLM server connection): the check builds without them, after their values
# were validated.
_NETWORK_KEYS = ("adapters", "vllm_server_host", "vllm_server_base_url")

#: ms-swift's default completions per prompt (RLHFArguments.num_generations).
NUM_GENERATIONS = 8


@dataclass(kw_only=True)
class SwiftConfig(TrainerConfig):
    """ms-swift's arguments for one run: ``arguments`` of ``SftArguments`` / ``RLHFArguments``
    (the rewards and the metrics callback they name are registered in the training process);
    several processes train through torchrun (``NPROC_PER_NODE``, ``NNODES``).

    :ivar run_dir: the run directory (rollout samples go to its ``samples.jsonl``).
    :ivar cache_dir: ``MODELSCOPE_CACHE`` and ``HF_HOME`` point inside it during the run.
    :ivar log_file: where swift's log lines and per-step dicts go instead of the terminal.
    :ivar trust_remote_code: whether code from the model's folder may run.
    :ivar log_samples: GRPO rollout samples kept per logged step.
    :ivar end_only_eval: evaluate the test set once, after the last step.
    :ivar eval_max_tokens: SFT's and DPO's evaluation: the most tokens of each test completion
        the job's reward scores (``None``: ``aworld-train eval``'s default).
    """

    run_dir: str
    cache_dir: str
    log_file: str
    trust_remote_code: bool = False
    log_samples: int = 0
    end_only_eval: bool = False
    eval_max_tokens: int | None = None


def config_to_swift(
    config: TrainConfig,
    agent: SwiftAgent,
    data: SwiftDatasets | None,
    reward: SwiftReward | None,
    run_dir: Path,
) -> SwiftConfig:
    """Map ``config`` onto swift's arguments and validate them.

    :param config: the job's config; its ``swift:`` section wins over the mapped keys.
    :param agent: the checked agent (model, template, system prompt, sampling).
    :param data: the converted datasets, or ``None``.
    :param reward: the registered rewards, or ``None``.
    :param run_dir: where swift's outputs, caches and log file go.
    :raises ConfigError: naming the key that is wrong.
    """
    algorithm = config.algorithm
    section = validate_section(config.engine_section(), algorithm)
    arguments = _run_arguments(config, agent, data, run_dir)
    arguments.update(_common_values(config, agent, reward, arguments))
    use_gpu = _gpu_visible() and not section.get("use_cpu") and config.resources.device != "cpu"
    if not use_gpu:
        # use_cpu is also what makes torchrun's CPU processes one data-parallel group.
        arguments["use_cpu"] = True
    has_test = data is not None and data.test is not None
    settings = common_arguments(config, section, run_dir, use_gpu, has_test)
    arguments.update(settings)
    # A section key left null keeps what the common settings made of it.
    arguments.update(
        {
            key: value
            for key, value in section.items()
            if key not in SECRETS and not (value is None and key in settings)
        }
    )

    check_trackers(tuple(t for t in arguments["report_to"] if t in TRACKERS))
    if agent.runtime is not None:
        arguments.update(agent_arguments(agent.runtime.name, config, section, arguments))
    if arguments.get("use_vllm"):
        check_vllm()
    swift_config = SwiftConfig(
        algorithm=algorithm,
        arguments=arguments,
        run_dir=str(run_dir),
        cache_dir=str(run_dir / CACHE),
        log_file=str(run_dir / LOG_FILE),
        trust_remote_code=config.trust_remote_code,
        log_samples=samples_per_step(config),
        end_only_eval=end_only_eval(config, section, has_test),
        eval_max_tokens=config.max_completion_length or agent.max_tokens,
        nproc_per_node=config.resources.gpus_per_node or 1,
        nnodes=config.resources.nnodes,
    )
    if agent.local and data is not None:
        check_arguments(swift_config)
    return swift_config


def _run_arguments(
    config: TrainConfig, agent: SwiftAgent, data: SwiftDatasets | None, run_dir: Path
) -> dict[str, Any]:
    """swift's arguments for the run itself: the agent's model and template, the datasets and
    where the outputs go."""
    arguments: dict[str, Any] = {
        "model": agent.model,
        "model_type": agent.model_type,
        "template": agent.template,
        "check_model": False,
        "add_version": False,
        "output_dir": str(run_dir / CHECKPOINTS),
        "seed": config.seed,
        "data_seed": config.seed,
        "dataloader_num_workers": 0,
        "dataset_num_proc": 1,
        "split_dataset_ratio": 0.0,
    }
    if agent.system is not None:
        arguments["system"] = agent.system
    if data is None:
        return arguments
    arguments["dataset"] = [str(data.train)]
    if data.test is not None:
        arguments["val_dataset"] = [str(data.test)]
        if config.algorithm == "grpo":
            # One completion per test row, decoded greedily (patches.greedy_evaluation).
            arguments["num_generations_eval"] = 1
        if config.batch_size is not None:
            # Batches of the training size, or the whole test set where it is smaller
            # (swift refuses an evaluation batch larger than the test set).
            arguments["per_device_eval_batch_size"] = min(config.batch_size, data.test_rows)
    return arguments


def _common_values(
    config: TrainConfig, agent: SwiftAgent, reward: SwiftReward | None, arguments: dict[str, Any]
) -> dict[str, Any]:
    """The common keys swift takes as they are, each under its declared key (unset ones left
    to swift), with the agent's sampling and the rewards for GRPO."""
    values: dict[str, Any] = {}
    completion_length = config.max_completion_length or agent.max_tokens
    if config.algorithm == "grpo":
        values.update(
            num_generations=config.num_generations,
            max_completion_length=completion_length,
            max_prompt_length=config.max_prompt_length,
        )
        if config.batch_size is None:
            # swift's own default, one completion per device and step, is no multiple of its
            # num_generations: a step takes one prompt's whole group, as TRL's defaults do.
            values["batch_size"] = config.num_generations or NUM_GENERATIONS
        if reward is not None:
            arguments["reward_funcs"] = list(reward.names)
            arguments["reward_weights"] = list(reward.weights)
    elif config.max_prompt_length and completion_length:  # SFT, DPO: prompt + reply
        values["max_prompt_length"] = config.max_prompt_length + completion_length
    own = SETTINGS.plain_arguments(config)
    own.update({SETTINGS[name].key: value for name, value in values.items()})
    if config.algorithm == "grpo":
        own.update(temperature=agent.temperature, top_p=agent.top_p)
    if config.save_steps is None and config.max_steps is not None:
        own[SETTINGS["save_steps"].key] = config.max_steps
    return {key: value for key, value in own.items() if value is not None}


def agent_arguments(
    name: str, config: TrainConfig, section: dict[str, Any], arguments: dict[str, Any]
) -> dict[str, Any]:
    """swift's arguments for agent ``name``, whose episodes run through the agent runtime: the
    scheduler that runs them (registered when training starts) and the template that encodes
    them (registered now, for swift's own checks of its arguments;
    :mod:`aworld_train_swift.rollout`).

    :raises ConfigError: for what such a job cannot have: weights sharded over several
        processes (each generates for its own episodes), vLLM rollouts (the runtime generates
        with the trainer's model) or a scheduler of the section's own.
    """
    from aworld_train_swift.deepspeed import swift_deepspeed
    from aworld_train_swift.rollout import AGENT_SCHEDULER, agent_template

    refuse_sharded_episodes(
        name,
        "swift",
        arguments.get("fsdp"),
        swift_deepspeed(arguments.get("deepspeed")),
        (config.resources.gpus_per_node or 1) * config.resources.nnodes,
    )
    for key in ("use_vllm", "multi_turn_scheduler"):
        if section.get(key):
            raise ConfigError(
                f"config key 'swift.{key}' is set, but agent '{name}' runs its episodes "
                "through aworld-train's agent runtime, which generates with the trainer's "
                f"model and schedules every turn itself: remove swift.{key}"
            )
    return {
        "multi_turn_scheduler": AGENT_SCHEDULER,
        "template": agent_template(arguments["template"]),
    }


def check_arguments(config: SwiftConfig) -> None:
    """Build swift's arguments once, offline, so that swift's own checks run.

    No credential is in reach (swift logs in to ModelScope whenever it finds a token) and the
    arguments that would only make swift contact a server are left out.

    :raises ConfigError: with swift's message when it rejects the arguments.
    """
    arguments = {k: v for k, v in config.arguments.items() if k not in _NETWORK_KEYS}
    require_packages(arguments)
    no_credentials: dict[str, str | None] = {
        name: None for names in SECRETS.values() for name in names
    }
    with world_size(config.nproc_per_node * config.nnodes), own_process_group():
        build_arguments(config.with_arguments(arguments), environment=no_credentials)


# Attention implementations (swift's attn_impl) and the package each loads.
_ATTENTION_PACKAGES = {
    "flash_attn": "flash_attn",
    "flash_attention_2": "flash_attn",
    "flash_attention_3": "flash_attn",
}


def require_packages(arguments: dict[str, Any]) -> None:
    """Refuse in one line a setting whose package swift imports when it starts (found, not
    imported): DeepSpeed, Liger kernels, flash-attn."""
    if arguments.get("deepspeed"):
        require_package("deepspeed", "swift.deepspeed", str(arguments["deepspeed"]))
    if arguments.get("use_liger_kernel"):
        require_package("liger_kernel", "swift.use_liger_kernel")
    attention = arguments.get("attn_impl")
    if attention in _ATTENTION_PACKAGES:
        require_package(_ATTENTION_PACKAGES[attention], "swift.attn_impl", attention)


@contextmanager
def world_size(processes: int) -> Iterator[None]:
    """Build swift's arguments as each of ``processes`` training processes will: swift checks
    the GRPO generation batch (per-device batch x processes x steps) against
    ``num_generations`` with transformers' ``TrainingArguments.world_size``, which is 1 in this
    one check process."""
    from transformers import TrainingArguments

    if processes <= 1:
        yield
        return
    original = TrainingArguments.__dict__["world_size"]
    TrainingArguments.world_size = property(lambda self: processes)  # type: ignore[assignment]
    try:
        yield
    finally:
        TrainingArguments.world_size = original  # type: ignore[assignment]


def secret_environment(section: dict[str, Any], arguments: dict[str, Any]) -> dict[str, str]:
    """The environment variables through which training hands the section's credentials to
    swift (never its arguments, which swift writes to disk).

    :param section: the validated ``swift:`` section.
    :param arguments: swift's arguments; ``use_hf`` picks the Hugging Face Hub's variable.
    """
    use_hf = arguments.get("use_hf") or os.environ.get("USE_HF", "").lower() in ("1", "true")
    hub = 1 if use_hf else 0
    return {
        SECRETS[key][hub]: str(value) for key, value in section.items() if key in SECRETS and value
    }


def check_vllm() -> None:
    """:raises ConfigError: when vLLM rollouts are asked for but cannot run here."""
    if importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "config key 'swift.use_vllm' is true but vLLM is not installed: pip install vllm, "
            "or set swift.use_vllm to false"
        )
    if not _gpu_visible():
        raise ConfigError(
            "config key 'swift.use_vllm' is true but no GPU is visible: vLLM rollouts need one; "
            "set swift.use_vllm to false to generate with transformers"
        )


def _gpu_visible() -> bool:
    import torch

    return torch.cuda.is_available()


@contextmanager
def swift_environment(
    config: SwiftConfig, environment: dict[str, str | None] | None = None
) -> Iterator[None]:
    """Keep swift's caches and TensorBoard's event files inside the run directory for the
    duration of the block.

    :param environment: more variables to set for the block; ``None`` values unset one.
    """
    cache = Path(config.cache_dir)
    wanted: dict[str, str | None] = {
        "MODELSCOPE_CACHE": str(cache / "modelscope"),
        "HF_HOME": str(cache / "huggingface"),
        "HF_DATASETS_CACHE": str(cache / "huggingface" / "datasets"),
        # transformers' TensorBoard callback reads its folder from here; swift only sets it
        # where it is unset, which would keep an earlier run's folder in this process.
        "TENSORBOARD_LOGGING_DIR": config.arguments.get("logging_dir"),
        **(environment or {}),
    }
    with scoped_environment(wanted):
        yield


def build_arguments(
    config: SwiftConfig, environment: dict[str, str | None] | None = None, **extra: Any
) -> Any:
    """Build swift's argument object, running swift's own checks.

    :param environment: variables to set while swift builds them (see :func:`swift_environment`).
    :param extra: more arguments.
    :raises ConfigError: with swift's message when it rejects the arguments.
    :raises ModelError: when the model needs code from its folder the job does not trust.
    """
    cls = arguments_class(ARGUMENT_CLASSES, config.algorithm)
    kwargs = dict(config.arguments, **extra)
    if config.algorithm != "sft":
        kwargs["rlhf_type"] = config.algorithm
    with (
        swift_environment(config, environment),
        model_code(config.trust_remote_code, kwargs["model"]),
    ):
        try:
            return cls(**kwargs)
        except AWorldTrainError:
            raise
        except (importlib.metadata.PackageNotFoundError, ModuleNotFoundError) as error:
            # A setting swift honours only with an optional package (deepspeed, ...).
            package = getattr(error, "name", None) or str(error).strip("'\" ")
            raise ConfigError(
                f"ms-swift needs {package} for this config, which is not "
                f"installed here: pip install {package}"
            ) from None
        except (ValueError, AssertionError, TypeError, KeyError) as error:
            message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            raise ConfigError(f"ms-swift rejects the config ({cls.__name__}): {message}") from None


@contextmanager
def own_process_group() -> Iterator[None]:
    """Leave this process as the block found it: ms-swift sets ``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR`` and ``MASTER_PORT`` in the environment and may start a process group when it
    builds its arguments for one process. Left behind, the group holds its rendezvous port
    (29500) and the variables make the next run in the process (a test, a notebook) train as
    one of several processes. Under torchrun the launcher owns both, which the block leaves
    alone."""
    import torch.distributed as dist

    ours = "RANK" not in os.environ
    saved = dict(os.environ)
    started = dist.is_available() and not dist.is_initialized()
    try:
        yield
    finally:
        if ours:
            os.environ.clear()
            os.environ.update(saved)
            if started and dist.is_initialized():
                dist.destroy_process_group()
