"""`load_dataset` and the whole `aworld-train check` on Repeat-digit JSONL datasets of 10,000,
100,000 and 1,000,000 rows, and `check` on the same rows when the last one lacks its answer
(time to the error): wall time and peak memory (RSS) of each, so the growth with the number of
rows shows.

    python bench/core_check_1m.py [--rows 10000 100000 1000000] [--engine toy] [--core PATH]

Each figure is a fresh interpreter (imports included), so the rows are the only difference.
`--core` points the measured processes at another checkout's `core/` folder (through
PYTHONPATH), e.g. an older commit extracted with `git archive`, to compare before and after.
Run it in an environment with an engine installed (`.venvs/core` has the test engine `toy`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run in the measured interpreter: the work, then its own CPU time and peak RSS as the last
# stdout line. CPU time is what to compare on a machine whose cores are shared: wall time
# there grows with the other work.
CHILD = """
import json, resource, sys
what, path = sys.argv[1], sys.argv[2]
code = 0
if what == "load_dataset":
    from aworld_train.dataset.loading import load_dataset
    load_dataset(path)
else:
    from aworld_train.cli import main
    try:
        main(["check", path])
    except SystemExit as exc:
        code = exc.code or 0
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"exit_code": code, "cpu_seconds": usage.ru_utime + usage.ru_stime,
                  "peak_mb": usage.ru_maxrss / 1024}))
"""


def write_rows(path: Path, rows: int, faulty_last: bool = False) -> None:
    """Rows like examples/repeat_digit's: ``Repeat: <digit>`` answered by the digit; the last
    one without its answer when ``faulty_last``."""
    rng = random.Random(0)
    with path.open("w", encoding="utf-8") as handle:
        for index in range(rows):
            digit = str(rng.randrange(10))
            row = {
                "prompt": f"Repeat: {digit}",
                "ground_truth": digit,
                "data_source": "repeat_digit",
            }
            if faulty_last and index == rows - 1:
                del row["ground_truth"]
            handle.write(json.dumps(row) + "\n")


def measure(what: str, path: Path, core: Path | None, exit_code: int = 0) -> dict[str, float]:
    """Wall time and peak RSS of one fresh interpreter doing ``what``, which must end with
    ``exit_code``."""
    env = dict(os.environ)
    if core is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(core), env.get("PYTHONPATH")]))
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", CHILD, what, str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=path.parent,
    )
    seconds = time.perf_counter() - started
    if result.returncode != 0 or not result.stdout.strip():
        raise SystemExit(f"{what} on {path} failed:\n{result.stderr}")
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    if figures["exit_code"] != exit_code:
        raise SystemExit(f"{what} on {path} exited {figures['exit_code']}:\n{result.stderr}")
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(figures["cpu_seconds"], 2),
        "peak_mb": round(figures["peak_mb"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--engine", default="toy")
    parser.add_argument("--core", type=Path, help="another checkout's core/ folder to measure")
    args = parser.parse_args()
    core = args.core.resolve() if args.core else None
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for rows in args.rows:
            figures: dict[str, Any] = {"rows": rows}
            for name, faulty in (("check", False), ("error on last row", True)):
                data = Path(folder) / f"train_{rows}_{faulty}.jsonl"
                write_rows(data, rows, faulty)
                job = data.with_suffix(".yaml")
                job.write_text(
                    f"engine: {args.engine}\ntrain_dataset: {data.name}\n"
                    "reward: exact_match\nconfig: {max_steps: 1}\n"
                )
                if not faulty:
                    figures["load_dataset"] = measure("load_dataset", data, core)
                figures[name] = measure("check", job, core, 2 if faulty else 0)
                data.unlink()
            results.append(figures)
    kinds = ("load_dataset", "check", "error on last row")
    print("wall s / CPU s / peak MB")
    print(f"{'rows':>9}" + "".join(f"  {kind:>24}" for kind in kinds))
    for figures in results:
        print(f"{figures['rows']:>9,}" + "".join(f"  {_cell(figures[kind]):>24}" for kind in kinds))
    print(json.dumps(results))


def _cell(figures: dict[str, float]) -> str:
    return f"{figures['seconds']} / {figures['cpu_seconds']} / {figures['peak_mb']:.0f}"


if __name__ == "__main__":
    main()
