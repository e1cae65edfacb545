"""The values a ``trl:`` key accepts: the type of its ``GRPOConfig`` / ``SFTConfig`` field, the
choices TRL accepts, and a range where TRL would fail or train something else than asked.

Types come from TRL's own dataclass annotations, validated with pydantic in strict mode (no
``"1"`` for 1, no ``true`` for 1, no NaN). Choices come from the field's ``choices`` metadata
or its enum (``SchedulerType``, ``OptimizerNames``, ...), and, for the fields that TRL checks
only inside its trainer, from :data:`GRPO_CHOICES` and :data:`ARGUMENT_CHOICES`.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from typing import Any

from aworld_train.engine import ConfigError, did_you_mean
from aworld_train.engine.settings import field_types, union_members
from aworld_train.engine import (
    check_value as check_strictly,
)

# GRPOConfig fields typed ``str`` whose values TRL 1.16 compares against a fixed set only inside
# GRPOTrainer (``__init__``, ``_compute_loss``, ``_calculate_rewards``), so a typo fails once the
# model is loaded. The values are those the fields' help text lists.
GRPO_CHOICES: dict[str, tuple[Any, ...]] = {
    "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none", True, False),
    "multi_objective_aggregation": ("sum_then_normalize", "normalize_then_sum"),
    "importance_sampling_level": ("token", "sequence"),
    "vllm_mode": ("server", "colocate"),
    "vllm_model_impl": ("transformers", "vllm"),
    "vllm_importance_sampling_mode": (
        "token_truncate",
        "token_mask",
        "sequence_truncate",
        "sequence_mask",
    ),
}
# The same for a TrainingArguments field (GRPO and SFT) that transformers' Trainer compares.
ARGUMENT_CHOICES: dict[str, tuple[Any, ...]] = {
    "include_num_input_tokens_seen": ("all", "non_padding", "no", True, False),
}

_SEED: dict[str, float] = {
    "ge": 0,
    "le": 2**32 - 1,
}  # numpy's seed range, which transformers' set_seed uses
_PROBABILITY: dict[str, float] = {"ge": 0, "le": 1}
_PORT: dict[str, float] = {"ge": 1, "le": 65535}

# Where a value outside the range makes TRL fail mid-run or quietly train something else
# (a count of 0 divides by zero; max_steps -5 trains for epochs instead).
RANGES: dict[str, dict[str, float]] = {
    **dict.fromkeys(
        (
            "per_device_train_batch_size",
            "per_device_eval_batch_size",
            "gradient_accumulation_steps",
            "num_iterations",
            "generation_batch_size",
            "steps_per_generation",
            "num_generations_eval",
            "max_completion_length",
            "max_length",
            "max_steps",
            "ref_model_sync_steps",
            "eval_accumulation_steps",
            "torch_empty_cache_steps",
            "dataloader_prefetch_factor",
            "vllm_tensor_parallel_size",
            "vllm_max_model_length",
            "ddp_timeout",
        ),
        {"ge": 1},
    ),
    **dict.fromkeys(
        (
            "dataloader_num_workers",
            "top_k",
            "save_total_limit",
            "max_tool_calling_iterations",
            "num_completions_to_print",
            "learning_rate",
            "weight_decay",
            "adam_epsilon",
            "max_grad_norm",
            "warmup_steps",
            "beta",
            "epsilon",
            "epsilon_high",
            "eval_delay",
            "neftune_noise_alpha",
        ),
        {"ge": 0},
    ),
    **dict.fromkeys(
        (
            "num_train_epochs",
            "logging_steps",
            "save_steps",
            "eval_steps",
            "temperature",
            "repetition_penalty",
            "vllm_server_timeout",
            "sapo_temperature_neg",
            "sapo_temperature_pos",
            "delta",
        ),
        {"gt": 0},
    ),
    **dict.fromkeys(
        (
            "min_p",
            "top_entropy_quantile",
            "ref_model_mixup_alpha",
            "entropy_coef_min",
            "entropy_coef_max",
        ),
        _PROBABILITY,
    ),
    "top_p": {"gt": 0, "le": 1},
    "vllm_gpu_memory_utilization": {"gt": 0, "le": 1},
    "adam_beta1": {"ge": 0, "lt": 1},
    "adam_beta2": {"ge": 0, "lt": 1},
    "label_smoothing_factor": {"ge": 0, "lt": 1},
    "seed": _SEED,
    "data_seed": _SEED,
    "vllm_server_port": _PORT,
    "vllm_group_port": _PORT,
}


def check_value(args_class: type, key: str, value: Any) -> None:
    """Check the value of ``trl.<key>`` against the field ``key`` of ``args_class``.

    :param args_class: ``GRPOConfig`` or ``SFTConfig``; ``key`` is one of its fields.
    :raises ConfigError: one line naming the key, the value and what the field accepts.
    """
    where = f"config trl.{key}"
    choices = field_choices(args_class, key)
    if choices and any(value == c and type(value) is type(c) for c in choices):
        return
    if choices and isinstance(value, str):
        shown = ", ".join(str(c) for c in choices if isinstance(c, str))
        names = [c for c in choices if isinstance(c, str)]
        raise ConfigError(f"{where}: '{value}' is not one of {shown}{did_you_mean(value, names)}")
    check_strictly(field_types(args_class)[key], value, where, bounds=RANGES.get(key))


@functools.cache
def field_metadata(args_class: type) -> dict[str, Any]:
    """The metadata (``help``, ``choices``) of every field of ``args_class``."""
    return {field.name: field.metadata for field in dataclasses.fields(args_class)}


def field_choices(args_class: type, key: str) -> tuple[Any, ...]:
    """The values ``key`` accepts when TRL accepts only a fixed set, else ``()``."""
    metadata = field_metadata(args_class)[key]
    grpo = GRPO_CHOICES if args_class.__name__ == "GRPOConfig" else {}
    choices = metadata.get("choices") or grpo.get(key) or ARGUMENT_CHOICES.get(key)
    if choices:
        return tuple(choices)
    members = union_members(field_types(args_class)[key])
    enums = [m for m in members if isinstance(m, type) and issubclass(m, enum.Enum)]
    # `SchedulerType | str`: the string is how a job names the enum's value.
    if len(enums) == 1 and set(members) - {type(None)} <= {enums[0], str}:
        return tuple(member.value for member in enums[0])
    return ()
