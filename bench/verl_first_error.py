"""Time to the first error for three planted faults in a VeRL job: `aworld-train check --engine
verl` versus VeRL's own `python -m verl.trainer.main_ppo` on the same job.

    .venvs/verl/bin/python bench/verl_first_error.py [--timeout 300]

The faults: a misspelled VeRL key (`trainer.total_epoch`), a reward that raises, and a prompt
longer than `max_prompt_length`. main_ppo runs each job through the run directory's own
`launch.sh` (the saved config plus one override per fault), so both sides see the same job.
Prints one JSON object; each main_ppo result records how far VeRL got (its last error line).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REWARDS = """
def score(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if solution_str.strip() == ground_truth else 0.0


def broken(data_source, solution_str, ground_truth, extra_info=None):
    raise ZeroDivisionError("planted failure")
"""

JOB = """engine: verl
agent: {{name: repeat, system_prompt: "Answer with the digit."}}
train_dataset: {dataset}
reward: rewards.py:{reward}
config:
  model: {model}
  algorithm: grpo
  max_steps: 2
  batch_size: 4
  num_generations: 2
  max_prompt_length: 64
  max_completion_length: 8
  verl:
    reward: {{num_workers: 1}}
{extra}"""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR_LINE = re.compile(r"(Error|error:|Exception|Could not|not in struct|less than)")


def run(command: list[str], cwd: Path, timeout: float) -> dict[str, Any]:
    """Run ``command`` in its own session; on timeout kill the whole group (Ray included)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = child.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        output, _ = child.communicate()
        timed_out = True
    elapsed = time.perf_counter() - started
    lines = [_ANSI.sub("", line).strip() for line in output.splitlines()]
    lines = [
        line for line in lines if line and "warnings.warn" not in line and "UserWarning" not in line
    ]
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    return {
        "seconds": round(elapsed, 1),
        "exit_code": None if timed_out else child.returncode,
        "timed_out": timed_out,
        "first_error": (errors[0] if errors else (lines[-1] if lines else ""))[:300],
        "last_error": (errors[-1] if errors else "")[:300],
        "last_line": (lines[-1] if lines else "")[:300],
    }


def write_job(
    folder: Path, model: Path, dataset: str = "train.jsonl", reward: str = "score", extra: str = ""
) -> Path:
    path = folder / f"job-{reward}-{dataset.split('.')[0]}{'-typo' if extra else ''}.yaml"
    path.write_text(JOB.format(dataset=dataset, reward=reward, model=model, extra=extra))
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    from aworld_train.testing import build_tiny_model

    cli = [sys.executable, "-m", "aworld_train.cli"]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="verl-bench-") as tmp:
        folder = Path(tmp)
        model = build_tiny_model(folder / "model")
        (folder / "rewards.py").write_text(REWARDS)
        rows = [
            {
                "prompt": [{"role": "user", "content": f"Repeat: {i % 10}"}],
                "ground_truth": str(i % 10),
            }
            for i in range(32)
        ]
        (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        long_rows = rows[:-1] + [
            {"prompt": [{"role": "user", "content": "Repeat: " + "7" * 300}], "ground_truth": "7"}
        ]
        (folder / "long.jsonl").write_text("".join(json.dumps(r) + "\n" for r in long_rows))

        jobs = {
            "valid job": write_job(folder, model),
            "misspelled VeRL key": write_job(
                folder, model, extra="    trainer: {total_epoch: 2}\n"
            ),
            "reward that raises": write_job(folder, model, reward="broken"),
            "prompt longer than max_prompt_length": write_job(folder, model, dataset="long.jsonl"),
        }
        for fault, job in jobs.items():
            results.setdefault(fault, {})["check"] = run(
                [*cli, "check", str(job), "--engine", "verl"], folder, args.timeout
            )

        # The same job for VeRL itself: `train` saves the config, data and launch.sh, then stops at
        # the GPU preflight on a machine without one; each fault becomes one override on top.
        train = run(
            [
                *cli,
                "train",
                str(jobs["valid job"]),
                "--engine",
                "verl",
                "--run-path",
                str(folder / "runs"),
            ],
            folder,
            args.timeout,
        )
        results["valid job"]["train (preflight)"] = train
        run_dir = next((folder / "runs").iterdir())

        import datasets
        from aworld_train_verl.dataset import verl_rows, write_parquet

        long_parquet = write_parquet(
            verl_rows(datasets.Dataset.from_list(long_rows), "train", "Answer with the digit."),
            folder / "long.parquet",
        )
        main_ppo_faults = {
            "valid job": [],
            "misspelled VeRL key": ["trainer.total_epoch=2"],
            "reward that raises": ["reward.custom_reward_function.name=broken"],
            "prompt longer than max_prompt_length": [f"data.train_files={long_parquet}"],
        }
        for fault, overrides in main_ppo_faults.items():
            results[fault]["main_ppo"] = run(
                ["bash", str(run_dir / "launch.sh"), *overrides], run_dir, args.timeout
            )
    print(json.dumps({"cpu_count": os.cpu_count(), "results": results}, indent=2))


if __name__ == "__main__":
    main()
