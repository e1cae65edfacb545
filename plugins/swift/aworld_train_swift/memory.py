"""What one ms-swift training process holds on its GPU (the ``memory_plan`` hook): the core's
plan with the tuner, weight dtype, micro-batch, sequence budget, gradient checkpointing,
DeepSpeed/FSDP sharding, reference model and a colocated vLLM as swift's arguments decide."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from aworld_train_swift.deepspeed import swift_deepspeed

if TYPE_CHECKING:
    from aworld_train.engine import MemoryPlan, TrainConfig

    from aworld_train_swift.config import SwiftConfig

# swift's torch_dtype names -> the common precision names; None keeps config.json's dtype,
# as swift loads the model in it.
_DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def swift_memory_plan(config: SwiftConfig, default: MemoryPlan, common: TrainConfig) -> MemoryPlan:
    """The core's ``default`` plan with what swift's arguments decide.

    A tuner other than LoRA is sized as a full fine-tune (an upper bound). GRPO's sequences are
    the prompt budget (swift's ``max_length``) plus ``max_completion_length``; SFT's and DPO's
    ``max_length``, a DPO pair being two sequences. The reference model is kept without LoRA
    for DPO and for GRPO with ``beta > 0``. A colocated vLLM reserves
    ``vllm_gpu_memory_utilization`` of the GPU; with ``sleep_level`` it sleeps through the
    update, and ``offload_model`` / ``offload_optimizer`` leave the GPU while it generates.
    """
    from aworld_train.engine.settings import prompt_budget, trainer_sharding

    from aworld_train_swift.settings import swift_defaults

    defaults = swift_defaults(config.algorithm)
    args = {**defaults, **{k: v for k, v in config.arguments.items() if v is not None}}
    tuner = args.get("tuner_type")
    notes = list(default.notes)
    if tuner not in ("full", "lora"):
        notes.append(f"tuner {tuner} sized as a full fine-tune")
    lora = default.lora if tuner == "lora" and isinstance(default.lora, dict) else None
    stage, offload = trainer_sharding(args.get("fsdp"), swift_deepspeed(args.get("deepspeed")))
    micro_batch = int(args.get("per_device_train_batch_size") or 1)
    if config.algorithm == "grpo":
        prompt = int(args.get("max_length") or prompt_budget(common))
        sequence = prompt + int(args.get("max_completion_length") or 0)
        reference = float(args.get("beta") or 0) > 0 and not lora
    else:
        sequence = int(args.get("max_length") or default.sequence_length)
        if not args.get("max_length"):
            notes.append(f"sequences of {sequence} tokens assumed")
        reference = config.algorithm == "dpo" and not lora
        micro_batch *= 2 if config.algorithm == "dpo" else 1
    rollout_fraction, alongside = _colocated_vllm(args)
    return dataclasses.replace(
        default,
        weight_dtype=_DTYPES.get(str(args.get("torch_dtype"))),
        lora=lora,
        micro_batch=micro_batch,
        sequence_length=sequence,
        gradient_checkpointing=bool(args.get("gradient_checkpointing")),
        shard_degree=config.world_size if stage else 1,
        zero_stage=stage,
        offload_optimizer=offload,
        reference_model=reference,
        rollout_fraction=rollout_fraction,
        rollout_alongside=alongside,
        notes=tuple(notes),
    )


def _colocated_vllm(args: dict[str, Any]) -> tuple[float, tuple[str, ...] | None]:
    """The share of the GPU a vLLM colocated with training reserves (0 without one), and what
    of the trainer's stays on the GPU while it sleeps through the update (``None``: it does not
    sleep)."""
    colocated = (
        bool(args.get("use_vllm"))
        and args.get("vllm_mode") != "server"
        and not args.get("vllm_server_host")
        and not args.get("vllm_server_base_url")
        and not args.get("use_cpu")
    )
    if not colocated:
        return 0.0, None
    alongside = None
    if int(args.get("sleep_level") or 0) > 0:
        alongside = tuple(
            part
            for part, offloaded in (
                ("weights", args.get("offload_model")),
                ("reference", args.get("offload_model")),
                ("optimizer", args.get("offload_optimizer")),
            )
            if not offloaded
        )
    return float(args.get("vllm_gpu_memory_utilization") or 0), alongside
