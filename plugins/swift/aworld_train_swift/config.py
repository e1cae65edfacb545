"""check_config: the common keys and the ``swift:`` section become ms-swift's arguments.

The ``swift:`` section is validated against the fields of the argument dataclass swift itself
parses (``SftArguments`` for SFT, ``RLHFArguments`` for GRPO): an unknown key is an error with a
suggestion, a value of the wrong type or outside a ``Literal``'s choices is an error naming the
key. For a local model the arguments are then built once, so swift's own checks (template,
batch sizes, ...) run now; nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
import types
import typing
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import ConfigError, did_you_mean

if TYPE_CHECKING:
    from collections.abc import Iterator

    from aworld_train.config import TrainConfig

    from aworld_train_swift.agent import SwiftAgent
    from aworld_train_swift.dataset import SwiftDatasets
    from aworld_train_swift.rewards import SwiftReward

ALGORITHMS = ("sft", "grpo", "dpo")
# Where the converted data, swift's outputs and swift's caches go inside the run directory.
CHECKPOINTS = "checkpoints"
CACHE = "cache"

# Arguments this engine sets from the job itself; the section may not set them.
_MANAGED = {
    "model": "the config's `model` key or the agent's model",
    "dataset": "the job's train_dataset",
    "val_dataset": "the job's test_dataset",
    "output_dir": "the run directory (checkpoints/)",
    "rlhf_type": "the config's `algorithm` key",
    "reward_funcs": "the job's reward",
    "reward_weights": "the weights of the job's reward",
    "resume_from_checkpoint": "`aworld-train train --resume RUN`",
}


@dataclass
class SwiftConfig:
    """ms-swift's arguments for one run.

    :ivar algorithm: ``sft``, ``grpo`` or ``dpo``.
    :ivar arguments: keyword arguments of ``SftArguments`` / ``RLHFArguments``; the rewards
        and the metrics callback they name are registered in the training process.
    :ivar cache_dir: ``MODELSCOPE_CACHE`` and ``HF_HOME`` point inside it during the run.
    :ivar nproc_per_node: processes per node (``NPROC_PER_NODE``).
    :ivar nnodes: nodes (``NNODES``).
    """

    algorithm: str
    arguments: dict[str, Any]
    cache_dir: str
    nproc_per_node: int = 1
    nnodes: int = 1

    @property
    def distributed(self) -> bool:
        """Whether training runs in several processes, launched through torchrun."""
        return self.nproc_per_node * self.nnodes > 1


def arguments_class(algorithm: str) -> type:
    """The swift argument dataclass that ``algorithm`` is parsed into."""
    if algorithm == "sft":
        from swift.arguments import SftArguments

        return SftArguments
    from swift.arguments import RLHFArguments

    return RLHFArguments


def config_to_swift(
    config: TrainConfig,
    agent: SwiftAgent,
    data: SwiftDatasets | None,
    reward: SwiftReward | None,
    run_dir: Path,
) -> SwiftConfig:
    """Map ``config`` onto swift's arguments and validate them.

    :raises ConfigError: naming the key that is wrong.
    """
    algorithm = config.algorithm
    if algorithm not in ALGORITHMS:
        raise ConfigError(
            f"config key 'algorithm': the swift engine trains {list(ALGORITHMS)}, not "
            f"'{algorithm}'" + did_you_mean(algorithm, ALGORITHMS)
        )
    cls = arguments_class(algorithm)
    section = validate_section(config.engine_section("swift"), cls)

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
    arguments.update(section)

    if arguments.get("use_vllm"):
        check_vllm()
    nproc = config.resources.gpus_per_node or 1
    swift_config = SwiftConfig(
        algorithm=algorithm,
        arguments=arguments,
        cache_dir=str(run_dir / CACHE),
        nproc_per_node=nproc,
        nnodes=config.resources.nnodes,
    )
    if agent.local and data is not None:
        build_arguments(swift_config)
    return swift_config


def validate_section(section: dict[str, Any], cls: type) -> dict[str, Any]:
    """Check each key of the ``swift:`` section against ``cls``'s fields and their types.

    :returns: the section, with numbers YAML read as strings (``1e-4``) turned into numbers
        where the field is a number, as swift's own command line parser would.
    :raises ConfigError: naming the key, with a suggestion for an unknown one.
    """
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = typing.get_type_hints(cls)
    section = dict(section)
    for key, value in section.items():
        if key in _MANAGED:
            raise ConfigError(
                f"config key 'swift.{key}' is set by aworld-train from {_MANAGED[key]}"
            )
        if key not in fields:
            raise ConfigError(
                f"config key 'swift.{key}' is not an argument of ms-swift's {cls.__name__}"
                + did_you_mean(key, fields)
            )
        hint = hints.get(key, Any)
        if isinstance(value, str) and _accepts(hint, float):
            try:
                section[key] = value = float(value)
            except ValueError:
                pass
        problem = _type_problem(value, hint)
        if problem:
            raise ConfigError(f"config key 'swift.{key}': {problem}, got {value!r}")
    return section


def _accepts(hint: Any, kind: type) -> bool:
    """Whether ``hint`` is ``kind`` or an optional ``kind``."""
    if hint is kind:
        return True
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return kind in typing.get_args(hint) and str not in typing.get_args(hint)
    return False


def _type_problem(value: Any, hint: Any) -> str | None:
    """Why ``value`` does not fit ``hint``, or ``None`` when it fits (or cannot be told)."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = typing.get_args(hint)
        problems = [_type_problem(value, option) for option in options]
        if any(problem is None for problem in problems):
            return None
        return " or ".join(p for p in problems if p)
    if hint is type(None):
        return None if value is None else "must be null"
    if origin is typing.Literal:
        choices = typing.get_args(hint)
        return None if value in choices else f"must be one of {list(choices)}"
    if origin in (list, tuple) or hint in (list, tuple):
        if isinstance(value, (list, tuple)):
            return None
        # swift's own parser accepts one item where a list is expected.
        (item,) = typing.get_args(hint)[:1] or (Any,)
        return None if _type_problem(value, item) is None else "must be a list"
    if hint is bool:
        return None if isinstance(value, bool) else "must be true or false"
    if hint is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "must be an integer"
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return None if ok else "must be a number"
    if hint is str:
        return None if isinstance(value, str) else "must be a string"
    return None


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


def quiet_swift() -> None:
    """Keep ms-swift's INFO lines out of aworld-train's output unless ``LOG_LEVEL`` asks for them.

    Call after importing swift: its logger sets its own level when first created.
    """
    if not os.environ.get("LOG_LEVEL"):
        logging.getLogger("swift").setLevel(logging.WARNING)


def _gpu_visible() -> bool:
    import torch

    return torch.cuda.is_available()


@contextmanager
def swift_environment(config: SwiftConfig) -> Iterator[None]:
    """Keep swift's caches inside the run directory for the duration of the block."""
    cache = Path(config.cache_dir)
    wanted = {
        "MODELSCOPE_CACHE": str(cache / "modelscope"),
        "HF_HOME": str(cache / "huggingface"),
        "HF_DATASETS_CACHE": str(cache / "huggingface" / "datasets"),
    }
    saved = {key: os.environ.get(key) for key in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def build_arguments(config: SwiftConfig, **extra: Any) -> Any:
    """Build swift's argument object, running swift's own checks.

    :raises ConfigError: with swift's message when it rejects the arguments.
    """
    cls = arguments_class(config.algorithm)
    quiet_swift()
    kwargs = dict(config.arguments, **extra)
    if config.algorithm != "sft":
        kwargs["rlhf_type"] = config.algorithm
    with swift_environment(config):
        try:
            return cls(**kwargs)
        except (ValueError, AssertionError, TypeError, KeyError) as error:
            message = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
            raise ConfigError(f"ms-swift rejects the config ({cls.__name__}): {message}") from None
