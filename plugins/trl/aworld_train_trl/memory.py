"""What one TRL training process holds on its GPU (the ``memory_plan`` hook): the core's plan
with the micro-batch, sequence budget, gradient checkpointing, FSDP/ZeRO sharding, a colocated
vLLM and the reference model as the resolved ``GRPOConfig`` / ``SFTConfig`` arguments decide."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aworld_train.engine import MemoryPlan, TrainConfig

    from aworld_train_trl.config import TrlConfig

# TRL's defaults for the keys the plan reads (GRPOConfig / SFTConfig in TRL 1.x), so that no
# TRL class is imported for a plan.
_DEFAULTS = {
    "per_device_train_batch_size": 8,
    "gradient_checkpointing": True,
    "max_completion_length": 512,
    "max_length": 1024,
    "beta": 0.0,
    "vllm_mode": "colocate",
    "vllm_gpu_memory_utilization": 0.3,
}


def trl_memory_plan(config: TrlConfig, default: MemoryPlan, common: TrainConfig) -> MemoryPlan:
    """The core's ``default`` plan with what TRL's arguments decide.

    GRPO trains on sequences of the prompt budget (TRL itself does not truncate prompts, so
    the common ``max_prompt_length`` or the core's default) plus ``max_completion_length``; SFT
    on ``max_length``. ``beta > 0`` without LoRA keeps a reference model; ``use_vllm`` in
    ``colocate`` mode on a GPU reserves ``vllm_gpu_memory_utilization`` of it.
    """
    from aworld_train.engine.settings import prompt_budget

    args = {**_DEFAULTS, **{k: v for k, v in config.arguments.items() if v is not None}}
    weight_dtype = _dtype((args.get("model_init_kwargs") or {}).get("dtype"))
    stage, offload = _sharding(args)
    if config.algorithm == "grpo":
        sequence = prompt_budget(common) + int(args["max_completion_length"])
    else:
        sequence = int(args["max_length"])
    colocated = bool(args.get("use_vllm")) and args["vllm_mode"] == "colocate" and config.use_gpu
    return dataclasses.replace(
        default,
        weight_dtype=weight_dtype,
        micro_batch=int(args["per_device_train_batch_size"]),
        sequence_length=sequence,
        notes=default.notes if config.algorithm == "grpo" else (),
        gradient_checkpointing=_checkpointing(args),
        shard_degree=config.world_size if stage else 1,
        zero_stage=stage,
        offload_optimizer=offload,
        reference_model=(
            config.algorithm == "grpo" and float(args["beta"]) > 0 and not config.lora
        ),
        rollout_fraction=float(args["vllm_gpu_memory_utilization"]) if colocated else 0.0,
    )


def _checkpointing(args: dict[str, Any]) -> bool:
    """Whether activations are recomputed: transformers 5's ``activation_checkpointing`` when
    set (the engine turns it off on CPU), else ``gradient_checkpointing`` (TRL's default on)."""
    if args.get("activation_checkpointing") is not None:
        return bool(args["activation_checkpointing"])
    return bool(args["gradient_checkpointing"])


def _dtype(name: Any) -> str | None:
    """``model_init_kwargs.dtype`` as a common precision name: TRL loads the model in fp32
    when it is unset (unlike ``from_pretrained``); ``None`` for ``auto`` (the dtype
    ``config.json`` names)."""
    if name is None:
        return "fp32"
    names = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
    return names.get(str(name).removeprefix("torch."))


def _sharding(args: dict[str, Any]) -> tuple[int, bool]:
    """The ZeRO stage the arguments ask for and whether the optimizer states are offloaded."""
    from aworld_train.engine.settings import trainer_sharding

    return trainer_sharding(args.get("fsdp"), args.get("deepspeed"))
