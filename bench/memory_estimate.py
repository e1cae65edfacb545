"""The memory estimate of ``check`` against what torch allocates, on a Qwen2.5-0.5B-shaped
random model on the CPU.

For each run: the estimate's certain part (weights, gradients, AdamW states) against the bytes
of the parameters, gradients and optimizer states torch holds after one optimizer step, and the
estimated total against the peak torch's ``MemTracker`` records during that step (forward,
backward, optimizer step). Prints one JSON object per run. Needs the TRL venv (torch,
transformers, peft) and about 10 GB of memory:

    .venvs/trl/bin/python bench/memory_estimate.py [--shape qwen2.5-0.5b] [--seq 128]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any


def measure(
    model: Any, trainable: list[Any], batch: int, seq: int, checkpointing: bool
) -> tuple[int, int]:
    """One AdamW step: the bytes of parameters, gradients and optimizer states afterwards,
    and the peak MemTracker saw on the CPU during the step."""
    import torch
    from torch.distributed._tools.mem_tracker import MemTracker

    if checkpointing:
        model.gradient_checkpointing_enable()
    else:
        model.gradient_checkpointing_disable()
    model.train()
    optimizer = torch.optim.AdamW(trainable, lr=1e-5)
    ids = torch.randint(0, model.config.vocab_size, (batch, seq))
    tracker = MemTracker()
    tracker.track_external(model, optimizer)
    with tracker:
        model(input_ids=ids, labels=ids).loss.backward()
        optimizer.step()
    peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
    tensors = [*model.parameters(), *(p.grad for p in trainable)]
    tensors += [
        s
        for state in optimizer.state.values()
        for s in state.values()
        if torch.is_tensor(s) and s.dim() > 0
    ]
    certain = sum(
        {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}.values()
    )
    optimizer.zero_grad(set_to_none=True)
    del optimizer
    return certain, peak


def main() -> None:
    import torch
    import transformers
    from aworld_train.model.memory import MemoryPlan, estimate, model_shape
    from aworld_train.testing import build_tiny_model
    from aworld_train.testing.shapes import write_shaped_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="qwen2.5-0.5b")
    parser.add_argument("--seq", type=int, default=128)
    arguments = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as scratch:
        tiny = build_tiny_model(Path(scratch) / "tiny")
        folder = write_shaped_model(Path(scratch) / arguments.shape, arguments.shape, tiny)
        config = transformers.AutoConfig.from_pretrained(folder)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.config.use_cache = False
        runs: list[dict[str, Any]] = [
            {"lora": None, "micro_batch": 1, "checkpointing": False},
            {"lora": None, "micro_batch": 2, "checkpointing": True},
            # A LoRA run is not measured here: MemTracker hooks every parameter's gradient and
            # refuses frozen ones (tests/test_memory.py holds LoRA's certain part to torch's).
        ]
        for run in runs:
            trainable = list(model.parameters())
            if run["lora"]:
                import peft

                model = peft.get_peft_model(
                    model,
                    peft.LoraConfig(
                        r=run["lora"]["rank"], lora_alpha=32, target_modules="all-linear"
                    ),
                )
                trainable = [p for p in model.parameters() if p.requires_grad]
            shape = model_shape(folder, run["lora"])
            assert not isinstance(shape, str), shape
            plan = MemoryPlan(
                precision="fp32",
                weight_dtype="fp32",
                lora=run["lora"],
                micro_batch=run["micro_batch"],
                sequence_length=arguments.seq,
                gradient_checkpointing=run["checkpointing"],
            )
            estimated = estimate(shape, plan)
            started = time.perf_counter()
            certain, peak = measure(
                model, trainable, run["micro_batch"], arguments.seq, run["checkpointing"]
            )
            print(
                json.dumps(
                    {
                        "shape": arguments.shape,
                        "lora": bool(run["lora"]),
                        "micro_batch": run["micro_batch"],
                        "sequence": arguments.seq,
                        "checkpointing": run["checkpointing"],
                        "certain_estimated_gb": round(estimated.certain / 1e9, 4),
                        "certain_measured_gb": round(certain / 1e9, 4),
                        "certain_equal": estimated.certain == certain,
                        "peak_estimated_gb": round(estimated.total / 1e9, 3),
                        "peak_measured_gb": round(peak / 1e9, 3),
                        "peak_ratio": round(estimated.total / peak, 3),
                        "step_s": round(time.perf_counter() - started, 1),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
