"""What one VeRL worker holds on its GPU (the ``memory_plan`` hook), read from the composed
config: the FSDP actor sharded over the job's GPUs, its micro-batch and lengths, the reference
model the KL term needs, and the colocated rollout engine's reservation.

VeRL's hybrid engine generates and trains on the same GPUs in turns: the rollout engine frees
its cache and sleeps through the update, and the actor's ``param_offload`` /
``optimizer_offload`` move its weights and optimizer states to the CPU while it generates
(they are back on the GPU for the update). The step's peak is the larger of the two phases.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aworld_train.engine import MemoryPlan

    from aworld_train_verl.config import VerlConfig

# VeRL's dtype names -> the common precision names.
_DTYPES = {
    "fp32": "fp32",
    "float32": "fp32",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
}
# Rollout engines that reserve a share of the GPU (gpu_memory_utilization).
_RESERVING_ROLLOUTS = ("vllm", "sglang")


def verl_memory_plan(config: VerlConfig, default: MemoryPlan) -> MemoryPlan:
    """The core's ``default`` plan with what the composed VeRL config decides.

    The actor's weights are stored in ``fsdp_config.model_dtype`` and, under FSDP, sharded with
    their gradients and optimizer states over ``fsdp_size`` GPUs (all of the job's when -1);
    ``offload_policy`` keeps them on the CPU through the update. A micro-batch is
    ``ppo_micro_batch_size_per_gpu`` sequences of ``max_prompt_length + max_response_length``
    tokens, or with ``use_dynamic_bsz`` ``ppo_max_token_len_per_gpu`` tokens. The reference
    model is kept for ``use_kl_loss`` or ``use_kl_in_reward`` without LoRA (with LoRA the actor
    with its adapter off is the reference) unless its ``param_offload`` moves it off the GPU
    for the update. A colocated vLLM or SGLang reserves ``gpu_memory_utilization``.
    """
    get = _config_reader(config)
    actor = "actor_rollout_ref.actor."
    notes: list[str] = []  # the lengths are VeRL's own, never assumed
    gpus = int(get("trainer.n_gpus_per_node", 1)) * int(get("trainer.nnodes", 1))
    strategy = str(get(actor + "strategy", "fsdp"))
    if strategy not in ("fsdp", "fsdp2"):
        notes.append(f"{strategy} sized as FSDP")
    fsdp_size = int(get(actor + "fsdp_config.fsdp_size", -1))
    shard = fsdp_size if 0 < fsdp_size < gpus else gpus
    lora = default.lora if int(get("actor_rollout_ref.model.lora_rank", 0)) else None
    sequence = int(get("data.max_prompt_length", 0)) + int(get("data.max_response_length", 0))
    sequence = sequence or default.sequence_length
    micro_batch = int(get(actor + "ppo_micro_batch_size_per_gpu", default.micro_batch))
    if get(actor + "use_dynamic_bsz", False):
        tokens = int(get(actor + "ppo_max_token_len_per_gpu", sequence))
        micro_batch = max(1, tokens // sequence)
        notes.append(f"dynamic micro-batches of {tokens} tokens")
    uses_kl = bool(get(actor + "use_kl_loss", False)) or bool(
        get("algorithm.use_kl_in_reward", False)
    )
    reference = (
        uses_kl and not lora and not get("actor_rollout_ref.ref.fsdp_config.param_offload", False)
    )
    rollout_fraction, alongside = _colocated_rollout(get)
    return dataclasses.replace(
        default,
        weight_dtype=_DTYPES.get(str(get(actor + "fsdp_config.model_dtype", "fp32"))),
        lora=lora,
        micro_batch=micro_batch,
        sequence_length=sequence,
        gradient_checkpointing=bool(
            get("actor_rollout_ref.model.enable_gradient_checkpointing", False)
        ),
        shard_degree=shard,
        zero_stage=3,
        offload_optimizer=bool(get(actor + "fsdp_config.offload_policy", False)),
        # VeRL's optimizer_offload only moves the states while it generates: through the update
        # they stay on the GPU unless offload_policy keeps them on the CPU.
        offload_fix="verl." + actor + "fsdp_config.offload_policy",
        reference_model=reference,
        rollout_fraction=rollout_fraction,
        rollout_alongside=alongside,
        notes=tuple(notes),
    )


def _config_reader(config: VerlConfig) -> Callable[..., Any]:
    """``get(key, fallback)``: the composed config's value at the dotted ``key``, the fallback
    where it is missing or null."""
    from omegaconf import OmegaConf

    def get(key: str, fallback: Any = None) -> Any:
        value = OmegaConf.select(config.config, key, default=fallback)
        return fallback if value is None else value

    return get


def _colocated_rollout(get: Callable[..., Any]) -> tuple[float, tuple[str, ...] | None]:
    """The share of the GPU a vLLM or SGLang rollout on the actor's GPUs reserves (0 for
    another engine, or one on nodes of its own), and what of the actor's stays on the GPU while
    it generates (``None``: its cache is kept through the update).

    :param get: reads a key of the composed config, with a fallback.
    """
    actor = "actor_rollout_ref.actor."
    rollout = "actor_rollout_ref.rollout."
    reserves = str(get(rollout + "name", "")) in _RESERVING_ROLLOUTS and not int(
        get(rollout + "nnodes", 0)
    )  # 0: on the actor's GPUs
    if not reserves:
        return 0.0, None
    alongside = None
    if get(rollout + "free_cache_engine", True):
        alongside = tuple(
            part
            for part, offloaded in (
                ("weights", get(actor + "fsdp_config.param_offload", False)),
                ("optimizer", get(actor + "fsdp_config.optimizer_offload", False)),
                ("reference", False),
            )
            if not offloaded
        )
    return float(get(rollout + "gpu_memory_utilization", 0.0)), alongside
