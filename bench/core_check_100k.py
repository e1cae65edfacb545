"""`aworld-train check` on a 100,000-row JSONL dataset whose last row is faulty: time to the
error and peak memory of the check process.

    python bench/core_check_100k.py [--rows 100000] [--engine toy]

Run it in an environment with an engine installed (`.venvs/core` has the test engine `toy`).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--engine", default="toy")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        with (folder / "train.jsonl").open("w") as handle:
            for i in range(args.rows - 1):
                handle.write(json.dumps({"question": f"Repeat: {i % 10} (#{i})", "answer": str(i % 10)}) + "\n")
            handle.write(json.dumps({"question": "the last row has no answer"}) + "\n")
        (folder / "job.yaml").write_text(
            f"engine: {args.engine}\ntrain_dataset: train.jsonl\nreward: exact_match\n"
            "columns: {prompt: question, ground_truth: answer}\nconfig: {max_steps: 1}\n"
        )
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "aworld_train.cli", "check",
                                 str(folder / "job.yaml")], capture_output=True, text=True)
        elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(json.dumps({
        "rows": args.rows,
        "exit_code": result.returncode,
        "error": result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "",
        "seconds_to_error": round(elapsed, 2),
        "peak_memory_mb": round(peak_mb, 1),
    }, indent=2))


if __name__ == "__main__":
    main()
