"""Adapter faithfulness and overhead of the ms-swift engine.

The same SFT job runs through ``aworld-train train JOB --engine swift`` and through ``swift sft``
directly with the same arguments, each as a fresh command. The logged loss sequences must match,
and the wall time of the aworld-train command should be within 5% of the ``swift sft`` one.

    .venvs/swift/bin/python bench/swift_faithfulness.py [--steps 200] [--repeats 2]

Work files go to ``.bench/swift_faithfulness/``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

WORK = Path(".bench/swift_faithfulness")
BIN = Path(sys.executable).parent
SEED = 0
# The job's settings in aworld-train's common keys, and the swift arguments they map onto.
COMMON = {
    "algorithm": "sft",
    "learning_rate": 1e-3,
    "batch_size": 16,
    "logging_steps": 1,
    "save_steps": 100_000,
    "seed": SEED,
}
SECTION = {"template": "qwen"}


def swift_arguments(work: Path, steps: int) -> list[str]:
    """``swift sft`` flags equal to what aworld-train gives ms-swift for the job."""
    flags = {
        "model": work / "model",
        "model_type": "qwen2",
        "template": "qwen",
        "tuner_type": "full",
        "dataset": work / "swift_train.jsonl",
        "output_dir": work / "plain",
        "add_version": False,
        "check_model": False,
        "report_to": "none",
        "seed": SEED,
        "data_seed": SEED,
        "dataloader_num_workers": 0,
        "dataset_num_proc": 1,
        "split_dataset_ratio": 0.0,
        "learning_rate": COMMON["learning_rate"],
        "max_steps": steps,
        "per_device_train_batch_size": COMMON["batch_size"],
        "logging_steps": 1,
        "save_steps": COMMON["save_steps"],
        "torch_dtype": "float32",
        "use_cpu": True,
    }
    return [item for key, value in flags.items() for item in (f"--{key}", str(value))]


def prepare(work: Path, steps: int) -> None:
    from aworld_train.testing import build_tiny_model

    work.mkdir(parents=True, exist_ok=True)
    if not (work / "model" / "config.json").is_file():
        build_tiny_model(work / "model")
    rng = random.Random(0)
    digits = [str(rng.randrange(10)) for _ in range(2000)]
    canonical = [{"prompt": f"Repeat: {d}", "ground_truth": d} for d in digits]
    (work / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in canonical))
    messages = [
        {
            "messages": [
                {"role": "user", "content": f"Repeat: {d}"},
                {"role": "assistant", "content": d},
            ]
        }
        for d in digits
    ]
    (work / "swift_train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in messages))
    job = {
        "engine": "swift",
        "agent": {"name": "bench", "model": str((work / "model").resolve())},
        "train_dataset": "train.jsonl",
        "reward": "exact_match",
        "config": dict(COMMON, max_steps=steps, swift=SECTION),
        "run_path": "runs",
    }
    (work / "job.yaml").write_text(yaml.safe_dump(job, sort_keys=False))


def run(mode: str, work: Path, steps: int) -> dict[str, Any]:
    env = dict(os.environ, MODELSCOPE_CACHE=str(work / "cache"), HF_HOME=str(work / "cache" / "hf"))
    if mode == "aworld":
        command = [str(BIN / "aworld-train"), "train", str(work / "job.yaml")]
    else:
        shutil.rmtree(work / "plain", ignore_errors=True)
        command = [str(BIN / "swift"), "sft", *swift_arguments(work, steps)]
    started = time.perf_counter()
    subprocess.run(
        command, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    wall = time.perf_counter() - started
    if mode == "aworld":
        run_dir = max((work / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
        logged = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    else:
        logged = [
            json.loads(line) for line in (work / "plain" / "logging.jsonl").read_text().splitlines()
        ]
    losses = [entry["loss"] for entry in logged if "loss" in entry]
    return {"loss": losses, "wall_seconds": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    options = parser.parse_args()
    work = WORK.resolve()
    prepare(work, options.steps)
    results: dict[str, list[dict[str, Any]]] = {"aworld": [], "plain": []}
    for _ in range(options.repeats):
        for mode in ("plain", "aworld"):  # interleaved so machine load hits both alike
            results[mode].append(run(mode, work, options.steps))
    aworld_loss, plain_loss = results["aworld"][-1]["loss"], results["plain"][-1]["loss"]
    largest_gap = max((abs(a - p) for a, p in zip(aworld_loss, plain_loss)), default=float("nan"))
    wall = {
        mode: statistics.median(r["wall_seconds"] for r in runs) for mode, runs in results.items()
    }
    print(
        json.dumps(
            {
                "steps": options.steps,
                "logged_steps": {"aworld": len(aworld_loss), "plain": len(plain_loss)},
                "loss_sequences_equal": len(aworld_loss) == len(plain_loss) and largest_gap <= 1e-6,
                "largest_loss_gap": largest_gap,
                "first_last_loss": [aworld_loss[0], aworld_loss[-1]] if aworld_loss else None,
                "wall_seconds": {mode: round(value, 2) for mode, value in wall.items()},
                "all_wall_seconds": {
                    m: [round(r["wall_seconds"], 2) for r in runs] for m, runs in results.items()
                },
                "wall_ratio": round(wall["aworld"] / wall["plain"], 3),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
