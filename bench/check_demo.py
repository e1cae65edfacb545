"""Wall time and peak memory of `aworld-train check` on the demo job, in the engine's own
environment, and where the seconds go (the check table's per-check times).

    .venvs/trl/bin/python bench/check_demo.py [--engine trl] [--repeats 3]

Each run is a fresh `aworld-train` process, imports included, as a user meets it. Build the
demo's model and data first: `python examples/repeat_digit/prepare.py`.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

JOB = Path(__file__).resolve().parents[1] / "examples" / "repeat_digit" / "job.yaml"
# A row of the check table: "│ module │ checked by │ result │ 1.23s │".
ROW = re.compile(r"^│ (\w[\w ]*?)\s+│ (\w+)\s+│.*│\s+([\d.]+)s │$")


def one_check(engine: str) -> dict:
    command = [
        str(Path(sys.executable).with_name("aworld-train")),
        "check",
        str(JOB),
        "--engine",
        engine,
    ]
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%M", *command],
        capture_output=True,
        text=True,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"check failed: {done.stderr.strip().splitlines()[-2:]}")
    rows = [ROW.match(line) for line in done.stdout.splitlines()]
    steps = {f"{row[1]} ({row[2]})": float(row[3]) for row in rows if row}
    return {
        "seconds": round(seconds, 2),
        "peak_mb": round(int(done.stderr.split()[-1]) / 1024),
        "steps": steps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="trl")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs = [one_check(args.engine) for _ in range(args.repeats)]
    best = min(runs, key=lambda run: run["seconds"])
    print(
        json.dumps(
            {
                "engine": args.engine,
                "seconds": [run["seconds"] for run in runs],
                "median_seconds": statistics.median(run["seconds"] for run in runs),
                "peak_mb": best["peak_mb"],
                "steps_of_the_fastest": best["steps"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
