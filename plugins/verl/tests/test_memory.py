"""Memory before launch: the ``resources`` row of ``check`` on the verl engine.

The plan read from the composed VeRL config sizes the tiny model's update as torch allocates it;
real shapes (Qwen2.5 configs, no weights) are refused or passed against
``resources.gpu_memory_gb`` through the real CLI; the rollout engine's share and the actor's
offload flags are weighed phase by phase.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from aworld_train.model.memory import default_plan, estimate, model_shape
from aworld_train.testing.memory import (
    assert_plan_sizes_the_step,
    checked,
    seven_b_on_one_gpu,
    write_job,
)
from aworld_train_verl.memory import verl_memory_plan

GRPO = {"algorithm": "grpo", "num_generations": 2, "batch_size": 2}


def test_the_planned_certain_part_of_a_full_fine_tune_is_what_torch_allocates(
    tmp_path: Path, tiny_model: Path
) -> None:
    trainer = checked(write_job(tmp_path, "verl", tiny_model, GRPO))
    plan = verl_memory_plan(trainer.hand_off.config, default_plan(trainer.context.config, {}))
    # VeRL's actor keeps fp32 weights (model_dtype), no KL term: no reference model.
    assert plan.weight_dtype == "fp32" and not plan.reference_model
    assert plan.sequence_length == 1024 and plan.zero_stage == 3
    assert_plan_sizes_the_step(plan, tiny_model)


def test_a_7b_full_fine_tune_is_refused_on_one_80_gb_gpu_and_passes_with_lora(
    tmp_path: Path,
    tiny_model: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusal, row = seven_b_on_one_gpu(
        capsys, monkeypatch, tmp_path, "verl", tiny_model, {**GRPO, "kl_coef": 0.001}
    )
    # fp32 actor and reference (7.62B × 4 bytes each), AdamW twice that; vLLM's 40 GB (0.5 of
    # the GPU) less what the update holds and generating does not (the gradients).
    assert (
        "161.85 GB per GPU before activations (optimizer 60.92 GB, weights 30.46 GB, "
        "gradients 30.46 GB, reference 30.46 GB, rollout 9.54 GB)" in refusal
    )
    # Offloading the optimizer through the update is VeRL's offload_policy, named as the job
    # writes it (its optimizer_offload moves the states only while it generates).
    assert "verl.actor_rollout_ref.actor.fsdp_config.offload_policy" in refusal, refusal
    # LoRA: the actor with its adapter off is the reference; while vLLM generates, the frozen
    # weights and the adapter's optimizer states stay on the GPU beside its 40 GB.
    assert "weights 30.62 GB, gradients 0.16 GB, optimizer 0.32 GB, rollout 39.84 GB" in row, row
    assert "reference" not in row and "fits on a 80 GB GPU (resources.gpu_memory_gb)" in row


def test_sharding_offload_and_the_rollout_phase(tmp_path: Path, tiny_model: Path) -> None:
    from omegaconf import OmegaConf

    trainer = checked(write_job(tmp_path, "verl", tiny_model, GRPO))
    config = trainer.hand_off.config
    default = default_plan(trainer.context.config, {})
    shape = model_shape(tiny_model, None)
    assert not isinstance(shape, str), shape
    capacity = 10**9

    def parts(**dotted: Any) -> dict[str, int]:
        # vLLM frees its cache for the update, as on a GPU (the CPU configuration keeps it).
        dotted = {"actor_rollout_ref.rollout.free_cache_engine": True, **dotted}
        changed = OmegaConf.merge(
            config.config,
            OmegaConf.from_dotlist([f"{key}={value}" for key, value in dotted.items()]),
        )
        plan = verl_memory_plan(dataclasses.replace(config, config=changed), default)
        return estimate(shape, plan, capacity).parts

    actor = "actor_rollout_ref.actor."
    whole = parts(**{"actor_rollout_ref.rollout.gpu_memory_utilization": 0.5})
    weights = 4 * shape.parameters
    assert whole["weights"] == weights and whole["optimizer"] == 2 * weights
    # Generating holds vLLM's share, the weights and the optimizer states (not the gradients).
    assert whole["rollout"] == 5 * 10**8 - weights
    offloaded = parts(
        **{
            "actor_rollout_ref.rollout.gpu_memory_utilization": 0.5,
            actor + "fsdp_config.param_offload": True,
            actor + "fsdp_config.optimizer_offload": True,
        }
    )
    assert offloaded["rollout"] == 5 * 10**8 - 4 * weights  # vLLM's share beyond the update
    sharded = parts(
        **{
            "trainer.n_gpus_per_node": 4,
            actor + "use_dynamic_bsz": True,
            actor + "ppo_max_token_len_per_gpu": 4096,
        }
    )
    assert sharded["weights"] == weights // 4 and sharded["optimizer"] == 2 * weights // 4
    plan = verl_memory_plan(
        dataclasses.replace(
            config,
            config=OmegaConf.merge(
                config.config, OmegaConf.from_dotlist([f"{actor}use_dynamic_bsz=true"])
            ),
        ),
        default,
    )
    assert plan.micro_batch == 16384 // 1024  # ppo_max_token_len_per_gpu's default
