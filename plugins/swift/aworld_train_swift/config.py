"""check_config: the common keys and the ``swift:`` section become ms-swift's arguments.

The ``swift:`` section is validated against swift's own argument dataclass and registries
(:mod:`aworld_train_swift.schema`). For a local model the arguments are then built once, so
swift's own checks (template, batch sizes, ...) run now, offline: no hub login, no download,
no code from the model folder unless the job trusts it.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import (
    AWorldTrainError,
    ConfigError,
    TrainerConfig,
    arguments_class,
    scoped_environment,
)

from aworld_train_swift.logs import LOG_FILE
from aworld_train_swift.remote_code import model_code
from aworld_train_swift.schema import ARGUMENT_CLASSES, SECRETS, validate_section

if TYPE_CHECKING:
    from collections.abc import Iterator

    from aworld_train.engine import TrainConfig

    from aworld_train_swift.agent import SwiftAgent
    from aworld_train_swift.dataset import SwiftDatasets
    from aworld_train_swift.reward import SwiftReward

# Where swift's outputs and its caches go inside the run directory.
CHECKPOINTS = "checkpoints"
CACHE = "cache"
# Arguments whose only effect while swift builds its arguments is a network call (a hub
# download, a vLLM server connection): the check builds without them, after their values
# were validated.
_NETWORK_KEYS = ("adapters", "vllm_server_host", "vllm_server_base_url")


@dataclass(kw_only=True)
class SwiftConfig(TrainerConfig):
    """ms-swift's arguments for one run: ``arguments`` of ``SftArguments`` / ``RLHFArguments``
    (the rewards and the metrics callback they name are registered in the training process);
    several processes train through torchrun (``NPROC_PER_NODE``, ``NNODES``).

    :ivar cache_dir: ``MODELSCOPE_CACHE`` and ``HF_HOME`` point inside it during the run.
    :ivar log_file: where swift's log lines and per-step dicts go instead of the terminal.
    :ivar trust_remote_code: whether code from the model's folder may run.
    """

    cache_dir: str
    log_file: str
    trust_remote_code: bool = False


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

    arguments: dict[str, Any] = {
        "model": agent.model,
        "model_type": agent.model_type,
        "template": agent.template,
        "tuner_type": "full",
        "check_model": False,
        "add_version": False,
        "output_dir": str(run_dir / CHECKPOINTS),
        "report_to": ["none"],
        "seed": config.seed,
        "data_seed": config.seed,
        "dataloader_num_workers": 0,
        "dataset_num_proc": 1,
        "split_dataset_ratio": 0.0,
    }
    if agent.system is not None:
        arguments["system"] = agent.system
    if data is not None:
        arguments["dataset"] = [str(data.train)]
        if data.test is not None:
            arguments["val_dataset"] = [str(data.test)]
            if config.batch_size is not None:
                # swift's default of 1 cannot hold a GRPO group of num_generations.
                arguments["per_device_eval_batch_size"] = config.batch_size
    common = {
        "learning_rate": config.learning_rate,
        "max_steps": config.max_steps,
        "num_train_epochs": config.num_epochs,
        "per_device_train_batch_size": config.batch_size,
        "logging_steps": config.logging_steps,
        "save_steps": config.save_steps,
    }
    completion_length = config.max_completion_length or agent.max_tokens
    if algorithm == "grpo":
        common.update(
            num_generations=config.num_generations,
            max_completion_length=completion_length,
            # In GRPO swift's max_length bounds the encoded prompt.
            max_length=config.max_prompt_length,
            temperature=agent.temperature,
            top_p=agent.top_p,
        )
        if reward is not None:
            arguments["reward_funcs"] = list(reward.names)
            arguments["reward_weights"] = list(reward.weights)
    elif config.max_prompt_length and completion_length:  # SFT, DPO: prompt + reply
        common["max_length"] = config.max_prompt_length + completion_length
    arguments.update({key: value for key, value in common.items() if value is not None})
    if config.save_steps is None and config.max_steps is not None:
        arguments["save_steps"] = config.max_steps
    if not _gpu_visible():
        # Half precision on a CPU is slow and swift's default follows the GPU's support;
        # use_cpu is what makes torchrun's CPU processes one data-parallel group.
        arguments.update(torch_dtype="float32", use_cpu=True)
    arguments.update({key: value for key, value in section.items() if key not in SECRETS})

    if arguments.get("use_vllm"):
        check_vllm()
    nproc = config.resources.gpus_per_node or 1
    swift_config = SwiftConfig(
        algorithm=algorithm,
        arguments=arguments,
        cache_dir=str(run_dir / CACHE),
        log_file=str(run_dir / LOG_FILE),
        trust_remote_code=config.trust_remote_code,
        nproc_per_node=nproc,
        nnodes=config.resources.nnodes,
    )
    if agent.local and data is not None:
        check_arguments(swift_config)
    return swift_config


def check_arguments(config: SwiftConfig) -> None:
    """Build swift's arguments once, offline, so that swift's own checks run.

    No credential is in reach (swift logs in to ModelScope whenever it finds a token) and the
    arguments that would only make swift contact a server are left out.

    :raises ConfigError: with swift's message when it rejects the arguments.
    """
    arguments = {k: v for k, v in config.arguments.items() if k not in _NETWORK_KEYS}
    no_credentials: dict[str, str | None] = {
        name: None for names in SECRETS.values() for name in names
    }
    build_arguments(dataclasses.replace(config, arguments=arguments), environment=no_credentials)


def secret_environment(section: dict[str, Any], arguments: dict[str, Any]) -> dict[str, str]:
    """The environment variables through which training hands the section's credentials to
    swift (never its arguments, which swift writes to disk).

    :param section: the validated ``swift:`` section.
    :param arguments: swift's arguments; ``use_hf`` picks the Hugging Face Hub's variable.
    """
    use_hf = arguments.get("use_hf") or os.environ.get("USE_HF", "").lower() in ("1", "true")
    hub = 1 if use_hf else 0
    return {SECRETS[key][hub]: str(value) for key, value in section.items()
            if key in SECRETS and value}


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
    """Keep swift's caches inside the run directory for the duration of the block.

    :param environment: more variables to set for the block; ``None`` values unset one.
    """
    cache = Path(config.cache_dir)
    wanted: dict[str, str | None] = {
        "MODELSCOPE_CACHE": str(cache / "modelscope"),
        "HF_HOME": str(cache / "huggingface"),
        "HF_DATASETS_CACHE": str(cache / "huggingface" / "datasets"),
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
    with swift_environment(config, environment), model_code(config.trust_remote_code,
                                                            kwargs["model"]):
        try:
            return cls(**kwargs)
        except AWorldTrainError:
            raise
        except (ValueError, AssertionError, TypeError, KeyError) as error:
            message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            raise ConfigError(f"ms-swift rejects the config ({cls.__name__}): {message}") from None
