"""Memory before launch: the ``resources`` row of ``check`` on the trl engine.

The estimate's certain part is held to what torch allocates after one AdamW step on the CPU;
real shapes (Qwen2.5 configs, no weights) are refused or passed against
``resources.gpu_memory_gb`` through the real CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aworld_train.model.memory import MemoryPlan, estimate, model_shape
from aworld_train.testing.fixtures import manifest, run_cli
from aworld_train.testing.memory import (
    allocated_after_one_step,
    resources_row,
    seven_b_on_one_gpu,
    write_job,
)
from aworld_train.testing.shapes import write_shaped_model


@pytest.mark.parametrize(
    "lora", [None, {"rank": 4, "target_modules": "all-linear"}], ids=["full", "lora"]
)
def test_the_certain_part_is_what_torch_allocates(
    tiny_model: Path, lora: dict[str, Any] | None
) -> None:
    shape = model_shape(tiny_model, lora)
    assert not isinstance(shape, str), shape
    plan = MemoryPlan(precision="fp32", weight_dtype="fp32", lora=lora)
    estimated = estimate(shape, plan)
    measured = allocated_after_one_step(tiny_model, lora)
    assert estimated.certain == measured
    if lora is None:  # AdamW fp32: params + grads + 2 states, 16 bytes a parameter
        assert estimated.certain == 16 * shape.parameters


@pytest.mark.slow
def test_a_7b_full_fine_tune_is_refused_on_one_80_gb_gpu_and_passes_with_lora(
    tmp_path: Path,
    tiny_model: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refusal, row = seven_b_on_one_gpu(capsys, monkeypatch, tmp_path, "trl", tiny_model, {})
    # TRL loads the weights in fp32: 7.62B parameters × 16 bytes of weights, gradients, AdamW.
    assert (
        "121.85 GB per GPU before activations (optimizer 60.92 GB, weights 30.46 GB, "
        "gradients 30.46 GB): use lora, more GPUs with FSDP/ZeRO sharding or optimizer "
        "offload"
    ) in refusal
    assert "weights 30.62 GB, gradients 0.16 GB, optimizer 0.32 GB, activations" in row
    assert "LoRA fp32" in row and "fits on a 80 GB GPU (resources.gpu_memory_gb)" in row


@pytest.mark.slow
def test_without_a_gpu_the_estimate_has_no_verdict_and_goes_into_the_manifest(
    tmp_path: Path,
    tiny_model: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    job = write_job(tmp_path, "trl", tiny_model, {})
    code, out, err = run_cli(capsys, "check", job)
    assert code == 0, err
    row = resources_row(out)
    assert "weights" in row and "optimizer" in row and "activations" in row
    assert "no GPU to compare with (set resources.gpu_memory_gb)" in row

    code, out, err = run_cli(capsys, "train", job)
    assert code == 0, err
    run = next((tmp_path / "runs").iterdir())
    memory = manifest(run)["memory"]
    shape = model_shape(tiny_model, None)
    assert not isinstance(shape, str)
    assert memory["verdict"] == "unknown" and memory["gpu"] is None
    assert (
        memory["certain_bytes"]
        == 16 * shape.parameters
        == sum(memory["per_gpu_bytes"][part] for part in ("weights", "gradients", "optimizer"))
    )
    assert memory["plan"]["micro_batch"] == 1 and memory["plan"]["sequence_length"] == 1024


def test_a_step_that_fits_only_without_its_activations_warns(
    tmp_path: Path,
    tiny_model: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "400")
    model = write_shaped_model(tmp_path / "qwen2.5-0.5b", "qwen2.5-0.5b", tiny_model)
    # 0.49B fp32 weights, gradients and AdamW: 7.9 GB certain, activations of 8 × 1024
    # tokens far more.
    job = write_job(tmp_path, "trl", model, {"batch_size": 8, "resources": {"gpu_memory_gb": 12}})
    code, out, err = run_cli(capsys, "check", job)
    assert code == 0, err
    assert "may not fit on a 12 GB GPU" in resources_row(out)
    assert (
        "resources: the step may not fit a 12 GB GPU (resources.gpu_memory_gb): 7.90 GB is "
        "certain" in caplog.text
    )
