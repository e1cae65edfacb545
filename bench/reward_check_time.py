"""Time to the first error for a reward that fails on a late row, against the engine's own
``check`` time on the same job with a reward that works.

``check`` scores the reward on every training row up to a budget (1,000 rows, 1 s of
scoring: ``aworld_train.checks._reward.CHECK_ROWS`` and ``CHECK_SECONDS``), with each row's
ground truth as the completion, in one child process. Four jobs on 1,000 "Repeat: n" rows, each a fresh
``aworld-train check`` process (imports included, as a user meets it):

- ``valid``: a reward that scores every row (the engine's check time);
- ``fails on row 997``: the same reward, raising on the 998th row of 1,000;
- ``returns None on row 997``: the same, returning ``None`` there;
- ``slow valid``: a reward taking 10 ms a row (10 s for all rows): the time budget stops it.

Besides the wall times, the check table's ``reward (core)`` row gives the seconds the core's
reward check itself took. Run it in an engine's environment::

    .venvs/trl/bin/python bench/reward_check_time.py --engine trl [--repeats 3]
    .venvs/core/bin/python bench/reward_check_time.py --engine toy

Work files go to ``.bench/reward_check_time/``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORK = Path(".bench/reward_check_time")
ROWS = 1000
LATE_ROW = 997
REWARD_FILE = f'''
import time


def score(data_source, solution_str, ground_truth, extra_info=None):
    return float(solution_str.strip() == ground_truth)


def fails_late(data_source, solution_str, ground_truth, extra_info=None):
    if ground_truth == "{LATE_ROW}":
        raise ValueError("cannot parse the answer " + ground_truth)
    return float(solution_str.strip() == ground_truth)


def none_late(data_source, solution_str, ground_truth, extra_info=None):
    if ground_truth == "{LATE_ROW}":
        return None
    return float(solution_str.strip() == ground_truth)


def slow(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(0.01)
    return float(solution_str.strip() == ground_truth)
'''
JOBS = {
    "valid": "score",
    f"fails on row {LATE_ROW}": "fails_late",
    f"returns None on row {LATE_ROW}": "none_late",
    "slow valid (10 ms a row)": "slow",
}
# A row of the check table: "│ module │ checked by │ result │ 1.23s │".
TABLE_ROW = re.compile(r"^│ (\w[\w ]*?)\s+│ (\w+)\s+│(.*)│\s+([\d.]+)s │$")


def prepare(work: Path, engine: str) -> dict[str, Path]:
    """The job files, one per reward, sharing the dataset, the reward file and the model."""
    work.mkdir(parents=True, exist_ok=True)
    model = None
    if engine != "toy":
        from aworld_train.testing import build_tiny_model

        if not (work / "model" / "config.json").is_file():
            build_tiny_model(work / "model")
        model = str((work / "model").resolve())
    (work / "train.jsonl").write_text(
        "".join(
            json.dumps({"prompt": f"Repeat: {n}", "ground_truth": str(n)}) + "\n"
            for n in range(ROWS)
        )
    )
    (work / "rewards.py").write_text(REWARD_FILE)
    jobs = {}
    for name, function in JOBS.items():
        config = {
            "algorithm": "grpo",
            "max_steps": 1,
            "batch_size": 8,
            "num_generations": 8,
            "max_completion_length": 8,
            "seed": 0,
        }
        if model:
            config["model"] = model
        if engine == "swift":
            config["swift"] = {"template": "qwen"}
        job = {
            "engine": engine,
            "agent": {"name": "bench"},
            "train_dataset": "train.jsonl",
            "reward": f"rewards.py:{function}",
            "config": config,
        }
        path = work / f"job-{function}.yaml"
        path.write_text(json.dumps(job, indent=2))  # JSON is YAML
        jobs[name] = path
    return jobs


def one_check(job: Path) -> dict:
    command = [str(Path(sys.executable).with_name("aworld-train")), "check", str(job)]
    started = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"}
    )
    seconds = time.perf_counter() - started
    reward_row = [
        m
        for m in map(TABLE_ROW.match, done.stdout.splitlines())
        if m and m[1] == "reward" and m[2] == "core"
    ]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    return {
        "seconds": round(seconds, 2),
        "exit": done.returncode,
        "reward_check_seconds": float(reward_row[0][4]) if reward_row else None,
        "reward_row": reward_row[0][3].strip() if reward_row else None,
        "error": errors[-1] if errors else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="trl")
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    jobs = prepare(WORK, options.engine)
    runs: dict[str, list[dict]] = {name: [] for name in jobs}
    for _ in range(options.repeats):  # interleaved, so the machine's load hits each alike
        for name, job in jobs.items():
            runs[name].append(one_check(job))
    summary = {}
    for name, results in runs.items():
        last = results[-1]
        summary[name] = {
            "seconds": [r["seconds"] for r in results],
            "median_seconds": statistics.median(r["seconds"] for r in results),
            "exit": last["exit"],
            "reward_check_seconds": [r["reward_check_seconds"] for r in results],
            "reward_row": last["reward_row"],
            "error": last["error"],
        }
    print(json.dumps({"engine": options.engine, "rows": ROWS, "jobs": summary}, indent=2))


if __name__ == "__main__":
    main()
