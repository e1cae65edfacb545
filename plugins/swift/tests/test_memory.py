"""Memory before launch: the ``resources`` row of ``check`` on the swift engine.

The plan read from swift's arguments sizes the tiny model's step as torch allocates it; real
shapes (Qwen2.5 configs, no weights) are refused or passed against ``resources.gpu_memory_gb``
through the real CLI.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from aworld_train.model.memory import MemoryPlan, default_plan, estimate, model_shape
from aworld_train.testing.memory import (
    assert_plan_sizes_the_step,
    checked,
    seven_b_on_one_gpu,
    write_job,
)
from aworld_train_swift.memory import swift_memory_plan


def test_the_planned_certain_part_of_a_full_fine_tune_is_what_torch_allocates(
    tmp_path: Path, tiny_model: Path
) -> None:
    job = write_job(tmp_path, "swift", tiny_model, {"swift": {"template": "qwen"}})
    trainer = checked(job)
    common = trainer.context.config
    plan = swift_memory_plan(trainer.hand_off.config, default_plan(common, {}), common)
    # On the CPU swift loads and trains the weights in fp32: 16 bytes a parameter.
    assert plan.weight_dtype == "fp32" and plan.lora is None and plan.sequence_length == 1024
    assert_plan_sizes_the_step(plan, tiny_model)


def test_a_7b_full_fine_tune_is_refused_on_one_80_gb_gpu_and_passes_with_lora(
    tmp_path: Path,
    tiny_model: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # fp32 weights (precision fp32), and the reference model GRPO's beta needs.
    refusal, row = seven_b_on_one_gpu(
        capsys,
        monkeypatch,
        tmp_path,
        "swift",
        tiny_model,
        {
            "algorithm": "grpo",
            "kl_coef": 0.04,
            "num_generations": 2,
            "batch_size": 2,
            "precision": "fp32",
            "swift": {"template": "qwen"},
        },
    )
    # 7.62B parameters × 4 bytes: weights, gradients, reference 30.46 GB each, AdamW twice that.
    assert (
        "152.31 GB per GPU before activations (optimizer 60.92 GB, weights 30.46 GB, "
        "gradients 30.46 GB, reference 30.46 GB)" in refusal
    )
    # LoRA: no reference model (the adapter off is the reference), an fp32 adapter.
    assert "weights 30.62 GB, gradients 0.16 GB, optimizer 0.32 GB, activations" in row, row
    assert "reference" not in row
    assert "LoRA fp32" in row and "on a 80 GB GPU (resources.gpu_memory_gb)" in row


def test_swift_s_named_deepspeed_configs_and_a_colocated_vllm_shape_the_plan(
    tmp_path: Path, tiny_model: Path
) -> None:
    job = write_job(
        tmp_path,
        "swift",
        tiny_model,
        {
            "algorithm": "grpo",
            "kl_coef": 0.0,
            "num_generations": 2,
            "batch_size": 2,
            "swift": {"template": "qwen"},
        },
    )
    trainer = checked(job)
    common = trainer.context.config
    config = trainer.hand_off.config
    shape = model_shape(tiny_model, None)
    assert not isinstance(shape, str), shape
    capacity = 80 * 10**9

    def plan(processes: int = 1, **arguments: object) -> MemoryPlan:
        # As on a GPU machine: vLLM is colocated only where the trainer is on a GPU.
        on_gpu = {**config.arguments, "use_cpu": False, **arguments}
        changed = dataclasses.replace(config, arguments=on_gpu, nproc_per_node=processes)
        return swift_memory_plan(changed, default_plan(common, {}), common)

    def rollout(**arguments: object) -> int:
        return estimate(shape, plan(**arguments), capacity).parts["rollout"]

    assert rollout() == 0
    awake = rollout(use_vllm=True, vllm_gpu_memory_utilization=0.4)
    assert awake == 32 * 10**9
    # Asleep through the update, the weights and optimizer offloaded while it generates: the
    # 32 GB it reserves come on top of nothing that stays, less the update's own certain part.
    asleep = rollout(
        use_vllm=True,
        vllm_gpu_memory_utilization=0.4,
        sleep_level=1,
        offload_model=True,
        offload_optimizer=True,
    )
    assert asleep == awake - 16 * shape.parameters

    # swift's own zero3_offload.json: ZeRO-3 with the optimizer states on the CPU.
    sharded = plan(processes=2, deepspeed="zero3_offload")
    assert (sharded.zero_stage, sharded.offload_optimizer, sharded.shard_degree) == (3, True, 2)
    parts = estimate(shape, sharded).parts
    assert parts["optimizer"] == 0 and parts["weights"] == 4 * shape.parameters // 2
    assert plan(processes=2, deepspeed="zero2").zero_stage == 2
