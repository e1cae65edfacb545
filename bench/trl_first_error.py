"""Time to the first error for a reward function that raises on row 1.

``aworld-train check`` (engine ``trl``) against a plain TRL script that trains until its reward
function meets the same row. Both run as fresh processes; the figure is wall time from start to
exit, with the error message each prints.

    .venvs/trl/bin/python bench/trl_first_error.py [--repeats 3]

Work files go to ``.bench/trl_first_error/``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

WORK = Path(".bench/trl_first_error")
REWARD_FILE = """
def score(data_source, solution_str, ground_truth, extra_info=None):
    if extra_info["index"] == 1:
        raise ValueError("cannot parse the answer of row 1")
    return float(solution_str.strip() == ground_truth)
"""
PLAIN_SCRIPT = """
import json, sys
from pathlib import Path

import datasets
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

work = Path(sys.argv[1])
namespace = {}
exec((work / "reward.py").read_text(), namespace)


def score(prompts, completions, ground_truth, extra_info, **kwargs):
    return [namespace["score"]("", c[0]["content"], g, e)
            for c, g, e in zip(completions, ground_truth, extra_info)]


rows = [json.loads(line) for line in (work / "train.jsonl").read_text().splitlines()]
dataset = datasets.Dataset.from_list([
    {"prompt": [{"role": "user", "content": r["prompt"]}], "ground_truth": r["ground_truth"],
     "extra_info": {"index": i}} for i, r in enumerate(rows)
])
args = GRPOConfig(output_dir=str(work / "plain"), report_to="none", use_cpu=True, bf16=False,
                  activation_checkpointing=False, max_steps=50, per_device_train_batch_size=64,
                  num_generations=8, max_completion_length=8, logging_steps=1, seed=0)
GRPOTrainer(model=str(work / "model"), reward_funcs=[score], args=args, train_dataset=dataset,
            processing_class=AutoTokenizer.from_pretrained(work / "model")).train()
"""


def prepare(work: Path) -> Path:
    from aworld_train.testing import build_tiny_model

    work.mkdir(parents=True, exist_ok=True)
    if not (work / "model" / "config.json").is_file():
        build_tiny_model(work / "model")
    rng = random.Random(0)
    rows = [
        {"prompt": f"Repeat: {d}", "ground_truth": str(d)}
        for d in (rng.randrange(10) for _ in range(64))
    ]
    (work / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (work / "reward.py").write_text(REWARD_FILE)
    (work / "plain.py").write_text(PLAIN_SCRIPT)
    job = {
        "engine": "trl",
        "agent": {"name": "bench", "model": str((work / "model").resolve())},
        "train_dataset": "train.jsonl",
        "reward": "reward.py:score",
        "config": {
            "algorithm": "grpo",
            "max_steps": 50,
            "batch_size": 64,
            "num_generations": 8,
            "max_completion_length": 8,
            "seed": 0,
        },
    }
    job_file = work / "job.yaml"
    job_file.write_text(json.dumps(job, indent=2))  # JSON is YAML
    return job_file


def timed(command: list[str]) -> tuple[float, int, str]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - started
    lines = [line for line in done.stderr.splitlines() if "row 1" in line]
    return wall, done.returncode, (lines[-1] if lines else done.stderr.strip()[-300:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    job_file = prepare(WORK)
    cli = str(Path(sys.executable).parent / "aworld-train")
    runs: dict[str, list[float]] = {"aworld-train check": [], "plain TRL": []}
    messages: dict[str, str] = {}
    for _ in range(options.repeats):
        wall, code, message = timed([cli, "check", str(job_file)])
        assert code == 2, f"aworld-train check exited {code}: {message}"
        runs["aworld-train check"].append(wall)
        messages["aworld-train check"] = message
        wall, code, message = timed([sys.executable, str(WORK / "plain.py"), str(WORK)])
        assert code != 0, "the plain TRL run did not fail"
        runs["plain TRL"].append(wall)
        messages["plain TRL"] = message
    summary = {
        name: {
            "best_seconds": round(min(walls), 2),
            "all_seconds": [round(w, 2) for w in walls],
            "error": messages[name],
        }
        for name, walls in runs.items()
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
