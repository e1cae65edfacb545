"""Does the repeat-digit demo learn on every seed, thread count and precision?

Trains ``examples/repeat_digit/job.yaml`` once per seed and setting, each in a fresh
``aworld-train train`` process, and summarises every run: mean reward over the first and last
tenth of the logged steps, the trained model's greedy answers to ``Repeat: 0`` .. ``Repeat: 9``
(exact out of 10), wall and CPU seconds. A run passes with a last tenth >= 0.9 and 10 of 10.

    .venvs/trl/bin/python bench/demo_seeds.py --seeds 0 1 2 3 4 --settings 2:fp32 1:fp32 2:bf16

A setting is ``THREADS[:PRECISION]``: the child's torch threads (``OMP_NUM_THREADS``) and, when
given, ``-o precision=PRECISION``. Runs go to ``--work`` (default ``.bench/demo_seeds``; their
checkpoints are removed once summarised); the figures are merged into
``bench/results/demo_seeds.json`` (a run replaces the one of the same label, setting and seed)
and the whole table is rewritten to ``bench/results/demo_seeds.md``. The OpenMP threads wait
asleep (``OMP_WAIT_POLICY=PASSIVE``), as the machine's cores are shared.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "repeat_digit"
RESULTS = ROOT / "bench" / "results"
PASS_REWARD = 0.9
# OpenMP threads that wait asleep rather than spinning: the cores are shared, and a spinning
# 2-thread run under load slows itself and every other process down several times over.
THREAD_ENVIRONMENT = {"OMP_WAIT_POLICY": "PASSIVE"}
RUNNING: set[subprocess.Popen] = set()

sys.path.insert(0, str(EXAMPLE))
from summarize import greedy_answers, reward_tenths  # noqa: E402  (the example's own summary)


def parse_setting(text: str) -> tuple[int, str | None]:
    """``"2:bf16"`` -> ``(2, "bf16")``; ``"1"`` -> ``(1, None)`` (the job's precision)."""
    threads, _, precision = text.partition(":")
    return int(threads), precision or None


def train(label: str, setting: str, seed: int, overrides: list[str], work: Path) -> dict[str, Any]:
    """Train one seed under one setting in a fresh process and summarise the run."""
    threads, precision = parse_setting(setting)
    run_path = work / label / f"{setting.replace(':', '-')}-seed{seed}"
    run_path.mkdir(parents=True, exist_ok=True)
    command = [
        str(Path(sys.executable).parent / "aworld-train"),
        "train",
        str(EXAMPLE / "job.yaml"),
        "--run-path",
        str(run_path),
        "-o",
        f"seed={seed}",
    ]
    if precision:
        command += ["-o", f"precision={precision}"]
    for override in overrides:
        command += ["-o", override]
    environment = dict(
        os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads), **THREAD_ENVIRONMENT
    )
    log = run_path / "train.log"
    started = time.perf_counter()
    with log.open("w") as handle:
        process = subprocess.Popen(
            command, stdout=handle, stderr=subprocess.STDOUT, env=environment
        )
        RUNNING.add(process)
        _, status, usage = os.wait4(process.pid, 0)
        RUNNING.discard(process)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    record: dict[str, Any] = {
        "label": label,
        "setting": setting,
        "threads": threads,
        "precision": precision or "job",
        "seed": seed,
        "overrides": overrides,
        "environment": THREAD_ENVIRONMENT,
        "exit_code": code,
        "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }
    runs = sorted(p for p in run_path.iterdir() if (p / "metrics.jsonl").is_file())
    if code != 0 or not runs:
        record["error"] = log.read_text()[-2000:]
        return record
    run = runs[-1]
    # A sweep keeps what it reports (metrics, manifest, model), not 3 checkpoints a run.
    shutil.rmtree(run / "checkpoints", ignore_errors=True)
    first, last = reward_tenths(run)
    answers = greedy_answers(run / "model")
    manifest = run / "manifest.json"
    recorded = json.loads(manifest.read_text()) if manifest.is_file() else {}
    record.update(
        run=str(run),
        first_tenth=round(first, 3),
        last_tenth=round(last, 3),
        exact=sum(answer == str(digit) for digit, answer in answers),
        answers=[answer for _, answer in answers],
        manifest_device=recorded.get("device"),
        manifest_precision=recorded.get("precision"),
    )
    record["passed"] = record["last_tenth"] >= PASS_REWARD and record["exact"] == len(answers)
    return record


def merge(records: list[dict[str, Any]], path: Path) -> list[dict[str, Any]]:
    """The stored records with these added, each replacing one of its label, setting and seed."""
    stored = json.loads(path.read_text()) if path.is_file() else []
    key = lambda r: (r["label"], r["setting"], r["seed"])  # noqa: E731
    fresh = {key(r) for r in records}
    merged = [r for r in stored if key(r) not in fresh] + records
    return sorted(merged, key=lambda r: (r["label"], r["setting"], r["seed"]))


def markdown(records: list[dict[str, Any]]) -> str:
    """One row per run, then per label and setting how many seeds passed."""
    lines = [
        "| recipe | threads | precision | seed | first tenth | last tenth | greedy exact | "
        "passed | wall s | CPU s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in records:
        if "error" in r:
            lines.append(
                f"| {r['label']} | {r['threads']} | {r['precision']} | {r['seed']} | "
                f"failed (exit {r['exit_code']}) | | | no | {r['wall_s']} | {r['cpu_s']} |"
            )
            continue
        lines.append(
            f"| {r['label']} | {r['threads']} | {r['precision']} | {r['seed']} | "
            f"{r['first_tenth']:.3f} | {r['last_tenth']:.3f} | {r['exact']}/10 | "
            f"{'yes' if r['passed'] else 'no'} | {r['wall_s']} | {r['cpu_s']} |"
        )
    lines += [
        "",
        "| recipe | threads | precision | seeds passed | wall s (min-max) |",
        "| --- | --- | --- | --- | --- |",
    ]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["label"], r["setting"]), []).append(r)
    for (label, _), group in groups.items():
        passed = sum(bool(r.get("passed")) for r in group)
        walls = [r["wall_s"] for r in group]
        lines.append(
            f"| {label} | {group[0]['threads']} | {group[0]['precision']} | "
            f"{passed} of {len(group)} | {min(walls):.0f}-{max(walls):.0f} |"
        )
    return "\n".join(lines) + "\n"


def stop(signum: int, frame: Any) -> None:
    """Stop the trainings under way with the sweep (each saves nothing more) and exit."""
    for process in list(RUNNING):
        process.terminate()
    os._exit(128 + signum)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["2:fp32", "1:fp32", "2:bf16"],
        help="THREADS[:PRECISION] per setting",
    )
    parser.add_argument("--label", default="demo", help="names the recipe in the results")
    parser.add_argument(
        "-o",
        "--override",
        action="append",
        default=[],
        help="extra KEY=VALUE passed to aworld-train train",
    )
    parser.add_argument("--jobs", type=int, default=1, help="trainings at once (at most 2)")
    parser.add_argument("--work", type=Path, default=ROOT / ".bench" / "demo_seeds")
    parser.add_argument("--results", type=Path, default=RESULTS / "demo_seeds.json")
    options = parser.parse_args()
    if not 1 <= options.jobs <= 2:
        parser.error("--jobs: 1 or 2 (the machine's cores are shared)")

    subprocess.run([sys.executable, str(EXAMPLE / "prepare.py")], check=True)
    # The parent only reads results and runs ten greedy generations; leave the cores to the runs.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import torch

    torch.set_num_threads(1)
    options.results.parent.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, stop)
    # Seed by seed, so that an interrupted sweep has figures for every setting.
    jobs = [(setting, seed) for seed in options.seeds for setting in options.settings]
    with concurrent.futures.ThreadPoolExecutor(options.jobs) as pool:
        futures = [
            pool.submit(
                train, options.label, setting, seed, options.override, options.work.resolve()
            )
            for setting, seed in jobs
        ]
        for future in concurrent.futures.as_completed(futures):
            record = future.result()
            records = merge([record], options.results)
            options.results.write_text(json.dumps(records, indent=1) + "\n")
            options.results.with_suffix(".md").write_text(markdown(records))
            print(json.dumps({k: v for k, v in record.items() if k != "error"}), flush=True)
            if "error" in record:
                print(record["error"], file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
