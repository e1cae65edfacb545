"""Helpers the engines' memory tests share: what torch really allocates for a training step of
a model, a small job to run ``check`` on, and the ``resources`` row of the check table.

Importing this module is cheap: torch and transformers are imported by the helper that uses
them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

ROWS = [{"prompt": f"Repeat: {digit}", "ground_truth": str(digit)} for digit in range(4)]


def allocated_after_one_step(folder: Path, lora: dict[str, Any] | None) -> int:
    """Bytes of the parameters, gradients and AdamW states torch holds after one optimizer
    step of the model in ``folder`` on the CPU (fp32), its storages counted once."""
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    if lora:
        import peft

        model = peft.get_peft_model(
            model,
            peft.LoraConfig(
                r=lora["rank"], lora_alpha=2 * lora["rank"], target_modules="all-linear"
            ),
        )
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-3)
    ids = torch.randint(0, model.config.vocab_size, (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    tensors = [*model.parameters(), *(p.grad for p in trainable)]
    tensors += [
        state
        for group in optimizer.state.values()
        for state in group.values()
        if torch.is_tensor(state) and state.dim() > 0
    ]  # not the scalar step count
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    return sum(storages.values())


def write_job(
    folder: Path, engine: str, model: Path, config: dict[str, Any], algorithm: str = "sft"
) -> Path:
    """``job.yaml`` in ``folder``: a one-step job of ``algorithm`` on ``engine`` over four
    "Repeat: <digit>" rows, prompts and completions of 512 tokens, and ``config`` on top.

    :returns: the job file's path.
    """
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    job = {
        "engine": engine,
        "agent": {"name": "repeater"},
        "train_dataset": "train.jsonl",
        "reward": "exact_match",
        "run_path": str(folder / "runs"),
        "config": {
            "algorithm": algorithm,
            "model": str(model),
            "max_steps": 1,
            "batch_size": 1,
            "max_prompt_length": 512,
            "max_completion_length": 512,
            **config,
        },
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def resources_row(out: str) -> str:
    """The ``resources`` row of the check table ``check`` printed."""
    return next(line for line in out.splitlines() if line.startswith("│ resources"))


def checked(job: Path) -> Any:
    """The :class:`~aworld_train.AgentTrainer` of the job file ``job``, its checks run, no
    training: its ``hand_off.config`` is what the engine's check returned."""
    from aworld_train.trainer import AgentTrainer
    from aworld_train.job.spec import load_job

    return AgentTrainer.from_job(load_job(job), check_only=True)


def check_memory(capsys: Any, job: Path, *overrides: str) -> str:
    """Run ``aworld-train check`` on ``job`` with ``-o`` ``overrides``: the ``resources`` row
    when the job passes, else the one ``error:`` line the refusal printed."""
    from aworld_train.testing.fixtures import run_cli

    code, out, err = run_cli(
        capsys, "check", job, *(part for override in overrides for part in ("-o", override))
    )
    if code == 0:
        return resources_row(out)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, out + err
    return lines[0]


def assert_plan_sizes_the_step(plan: Any, folder: Path) -> None:
    """The certain part ``plan`` estimates for the model in ``folder`` is, to the byte, what
    torch holds after one optimizer step of it on the CPU."""
    from aworld_train.model.memory import estimate, model_shape

    shape = model_shape(folder, None)
    assert not isinstance(shape, str), shape
    assert estimate(shape, plan).certain == allocated_after_one_step(folder, None)


def seven_b_on_one_gpu(
    capsys: Any,
    monkeypatch: Any,
    folder: Path,
    engine: str,
    tiny_model: Path,
    config: dict[str, Any],
) -> tuple[str, str]:
    """``check`` of a full fine-tune of a Qwen2.5-7B-shaped model (``config`` on top) on one
    80 GB GPU: the refusal line, which must name LoRA and more GPUs as fixes, then the
    ``resources`` row of the same job with ``lora.rank=16``."""
    from aworld_train.testing.shapes import write_shaped_model

    monkeypatch.setenv("COLUMNS", "400")  # the row whole, not cut to a terminal's width
    model = write_shaped_model(folder / "qwen2.5-7b", "qwen2.5-7b", tiny_model)
    job = write_job(folder, engine, model, {**config, "resources": {"gpu_memory_gb": 80}})
    refusal = check_memory(capsys, job)
    assert refusal.startswith("error: resources: the job does not fit a 80 GB GPU"), refusal
    assert "): use lora, more GPUs" in refusal, refusal
    return refusal, check_memory(capsys, job, "lora.rank=16")
