"""`aworld-train engines` with the three engine distributions installed: wall time as a ratio to
`python -c "import pluggy, importlib.metadata"`, and which heavy modules it imported (none).

The three plugin distributions are installed with --no-deps into a scratch folder put on
PYTHONPATH: listing reads their metadata only, so their engine libraries need not be present.

    python bench/core_engines_listing.py [--runs 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("torch", "transformers", "datasets", "ray", "verl", "swift", "trl", "aworld")


def timed(command: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as site:
        for engine in ("trl", "swift", "verl"):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "install",
                    "-q",
                    "--no-deps",
                    "--target",
                    site,
                    str(ROOT / "plugins" / engine),
                ],
                check=True,
            )
        env = {**os.environ, "PYTHONPATH": site, "AWORLD_TRAIN_DISABLE_PLUGINS": ""}
        listing = [sys.executable, "-m", "aworld_train.cli", "engines"]
        shown = subprocess.run(listing, env=env, capture_output=True, text=True, check=True).stdout
        probe = (
            "import sys; from aworld_train.cli import main\n"
            "try:\n    main(['engines', '--json'])\nexcept SystemExit:\n    pass\n"
            f"print([m for m in sys.modules if m.split('.')[0] in {HEAVY!r}])"
        )
        imported = (
            subprocess.run(
                [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        baseline = timed(
            [sys.executable, "-c", "import pluggy, importlib.metadata"], env, args.runs
        )
        ours = timed(listing, env, args.runs)
    print(shown)
    print(
        json.dumps(
            {
                "engines_listed_s": round(ours, 4),
                "pluggy_import_s": round(baseline, 4),
                "ratio": round(ours / baseline, 2),
                "heavy_modules_imported": imported,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
