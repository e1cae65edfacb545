"""Is a plain ``aworld-train train`` on a CPU as fast as ``make demo``'s environment?

``make demo`` used to start training with ``OMP_WAIT_POLICY=PASSIVE`` (idle OpenMP threads
sleep); aworld-train now sets that itself on a CPU when the user has not. This trains the demo
job (``examples/repeat_digit/job.yaml``, cut to ``--steps`` steps, no checkpoint) in fresh
processes, interleaved, ``--repeats`` times each:

- ``plain``: ``aworld-train train`` with no OpenMP variable set, as a user runs it;
- ``make demo``: the same with ``OMP_WAIT_POLICY=PASSIVE`` in the environment, as ``make demo``
  ran it;
- ``openmp default``: the same CLI with its thread policy bypassed (``cli.cli.main`` instead of
  the console entry point ``cli.main``), which is what ``aworld-train train`` did before.

    .venvs/trl/bin/python bench/cpu_threads.py --steps 30 --repeats 3

For each run: wall seconds, CPU seconds (the run's processes), the training's own seconds
(``train_runtime`` as TRL reports it), seconds per step between the first and the last logged
step (every 5 steps) and the 1-minute load average before it started. A run still going after
``--timeout`` seconds is stopped and counts with the steps it made. Prints
JSON with every run and the medians per arm. The example is copied to ``--work`` (default
``.bench/cpu_threads``) and built there, so the repository's tree is not written to.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "repeat_digit"
BIN = Path(sys.executable).parent
# The console entry point, and the same CLI without the entry point's thread policy.
PLAIN = [str(BIN / "aworld-train")]
BYPASS = [
    sys.executable,
    "-c",
    "import sys; from aworld_train.cli import cli; "
    "cli.main(args=sys.argv[1:], prog_name='aworld-train')",
]
ARMS: dict[str, tuple[list[str], dict[str, str]]] = {
    "plain": (PLAIN, {}),
    "make demo": (PLAIN, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "openmp default": (BYPASS, {}),
}
_RUNTIME = re.compile(r"train_runtime (\d+(?:\.\d+)?)")


def prepare(work: Path) -> Path:
    """Copy the demo example into ``work`` and build its model and data there; the job file."""
    example = work / "repeat_digit"
    if not (example / "build" / "model").is_dir():
        shutil.rmtree(example, ignore_errors=True)
        shutil.copytree(EXAMPLE, example, ignore=shutil.ignore_patterns("build", "runs"))
        subprocess.run([sys.executable, str(example / "prepare.py")], check=True)
    return example / "job.yaml"


def environment(extra: dict[str, str]) -> dict[str, str]:
    """This environment without the OpenMP wait policy, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    return {**env, **extra}


def train_once(arm: str, job: Path, steps: int, run_path: Path, timeout: float) -> dict[str, Any]:
    """Train the job for ``steps`` steps in a fresh process of ``arm``, stopped after
    ``timeout`` seconds; its figures."""
    command, extra = ARMS[arm]
    shutil.rmtree(run_path, ignore_errors=True)
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(
        [
            *command,
            "train",
            str(job),
            "--run-path",
            str(run_path),
            "-o",
            f"max_steps={steps}",
            "-o",
            f"save_steps={steps * 10}",
            "-o",
            "logging_steps=5",
        ],
        env=environment(extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:  # a run this slow is stopped; its steps so far count
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    finished = process.returncode == 0
    if not finished and process.returncode != -signal.SIGKILL:
        raise SystemExit(f"{arm} failed:\n{stderr[-3000:]}")
    runtime = _RUNTIME.search(stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "arm": arm,
        "finished": finished,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "train_runtime_s": float(runtime.group(1)) if runtime else None,
        "s_per_step": seconds_per_step(run_path),
        "load_1m": round(load, 2),
    }


def seconds_per_step(run_path: Path) -> float | None:
    """Seconds a training step took, between the first and the last step the run logged (so
    model loading and the final evaluation are left out, and a stopped run still counts)."""
    logged = [
        json.loads(line)
        for path in run_path.glob("*/metrics.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    timed = [(row["step"], row["time"]) for row in logged if "time" in row and "step" in row]
    if len(timed) < 2:
        return None
    (first, t0), (last, t1) = timed[0], timed[-1]
    return round((t1 - t0) / (last - first), 3) if last > first else None


def medians(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The median of each figure per arm."""
    table: dict[str, dict[str, float]] = {}
    for arm in ARMS:
        mine = [run for run in runs if run["arm"] == arm]
        table[arm] = {
            key: round(statistics.median(run[key] for run in mine), 2)
            for key in ("wall_s", "cpu_s", "train_runtime_s", "s_per_step", "load_1m")
            if mine and all(run[key] is not None for run in mine)
        }
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--timeout",
        type=float,
        default=600,
        help="Stop a run after this many seconds (OpenMP's default can be slow).",
    )
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--work", type=Path, default=ROOT / ".bench" / "cpu_threads")
    args = parser.parse_args()
    job = prepare(args.work)
    runs = []
    for repeat in range(args.repeats):  # interleaved: a change of load hits every arm
        for arm in args.arms:
            run = train_once(arm, job, args.steps, args.work / "runs", args.timeout)
            runs.append({"repeat": repeat, **run})
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    print(
        json.dumps(
            {"steps": args.steps, "cores": os.cpu_count(), "runs": runs, "medians": medians(runs)},
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
