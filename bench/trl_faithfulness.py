"""Adapter faithfulness and overhead of the TRL engine.

The same GRPO job runs through aworld-train (``AgentTrainer``, engine ``trl``) and through a
plain TRL script with identical settings and seed, each in a fresh process. The logged loss and
reward sequences must match, and the wall time of the aworld-train process should be within 5%
of the plain script's.

    .venvs/trl/bin/python bench/trl_faithfulness.py [--steps 100] [--repeats 2]

Work files go to ``.bench/trl_faithfulness/``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WORK = Path(".bench/trl_faithfulness")
REWARD_FILE = """
def score(data_source, solution_str, ground_truth, extra_info=None):
    output = solution_str.strip()
    if output == ground_truth:
        return 1.0
    if output.startswith(ground_truth):
        return 0.5 + 0.5 * len(ground_truth) / len(output)
    return 0.25 if ground_truth in output else 0.0
"""
# The job's settings, in aworld-train's common keys and as the GRPOConfig they map onto.
SEED = 0
COMMON = {
    "algorithm": "grpo",
    "learning_rate": 1e-3,
    "batch_size": 64,
    "num_generations": 8,
    "max_completion_length": 8,
    "logging_steps": 1,
    "save_steps": 1000,
    "seed": SEED,
}
TRL_SECTION = {"beta": 0.0, "loss_type": "dapo", "lr_scheduler_type": "constant"}


def prepare(work: Path) -> None:
    from aworld_train.testing import build_tiny_model

    work.mkdir(parents=True, exist_ok=True)
    if not (work / "model" / "config.json").is_file():
        build_tiny_model(work / "model", hidden_size=128)
    rng = random.Random(0)
    rows = [
        {"prompt": f"Repeat: {d}", "ground_truth": str(d)}
        for d in (rng.randrange(10) for _ in range(2000))
    ]
    (work / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (work / "reward.py").write_text(REWARD_FILE)


def run_aworld(work: Path, steps: int) -> dict[str, Any]:
    from aworld_train import AgentTrainer

    trainer = AgentTrainer(
        agent={"name": "bench", "model": str(work / "model")},
        config=dict(COMMON, max_steps=steps, trl=TRL_SECTION),
        reward_func="reward.py:score",
        train_dataset="train.jsonl",
        run_path=work / "runs",
        train_engine_name="trl",
        base_dir=work,
    )
    started = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - started
    history = [json.loads(line) for line in trainer.run_dir.metrics_path.read_text().splitlines()]
    steps_logged = [h for h in history if "reward" in h]
    return {
        "loss": [h["loss"] for h in steps_logged],
        "reward": [h["reward"] for h in steps_logged],
        "train_seconds": train_seconds,
    }


def run_plain(work: Path, steps: int) -> dict[str, Any]:
    import datasets
    from transformers import AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    namespace: dict[str, Any] = {}
    exec((work / "reward.py").read_text(), namespace)
    user_score = namespace["score"]

    def score(prompts, completions, ground_truth, **kwargs):
        return [user_score("", c[0]["content"], g) for c, g in zip(completions, ground_truth)]

    rows = [json.loads(line) for line in (work / "train.jsonl").read_text().splitlines()]
    dataset = datasets.Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": r["prompt"]}],
                "ground_truth": r["ground_truth"],
            }
            for r in rows
        ]
    )
    out = work / "plain"
    args = GRPOConfig(
        output_dir=str(out),
        report_to="none",
        seed=SEED,
        logging_steps=1,
        disable_tqdm=True,
        use_cpu=True,
        bf16=False,
        fp16=False,
        activation_checkpointing=False,
        learning_rate=COMMON["learning_rate"],
        max_steps=steps,
        per_device_train_batch_size=COMMON["batch_size"],
        num_generations=COMMON["num_generations"],
        max_completion_length=COMMON["max_completion_length"],
        save_strategy="steps",
        save_steps=COMMON["save_steps"],
        **TRL_SECTION,
    )
    trainer = GRPOTrainer(
        model=str(work / "model"),
        reward_funcs=[score],
        args=args,
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(work / "model"),
    )
    started = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - started
    trainer.save_model(str(out / "model"))
    logged = [h for h in trainer.state.log_history if "reward" in h]
    return {
        "loss": [h["loss"] for h in logged],
        "reward": [h["reward"] for h in logged],
        "train_seconds": train_seconds,
    }


def reward_wrapper_cost(work: Path, calls: int = 200) -> dict[str, float]:
    """Milliseconds per GRPO step (64 completions) spent scoring: through the adapter's TRL
    reward function (RewardSpec, weights, metrics) and through a bare TRL-style function."""
    from aworld_train.reward import resolve_reward
    from aworld_train_trl.reward import TrlReward

    namespace: dict[str, Any] = {}
    exec((work / "reward.py").read_text(), namespace)
    user_score = namespace["score"]
    adapter = TrlReward(resolve_reward(f"{work / 'reward.py'}:score"))
    batch = COMMON["batch_size"]
    completions = [[{"role": "assistant", "content": f"{i % 10}x"}] for i in range(batch)]
    truths = [str(i % 10) for i in range(batch)]
    extra = [{"index": i} for i in range(batch)]
    logged: dict[str, float] = {}

    def bare() -> list[float]:
        return [user_score("", c[0]["content"], g) for c, g in zip(completions, truths)]

    def wrapped() -> list[float]:
        return adapter(
            prompts=[None] * batch,
            completions=completions,
            ground_truth=truths,
            data_source=["d"] * batch,
            extra_info=extra,
            log_metric=logged.__setitem__,
        )

    assert bare() == wrapped()
    cost = {}
    for name, fn in (("bare", bare), ("adapter", wrapped)):
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        cost[name] = (time.perf_counter() - started) / calls * 1000
    return cost


def measure(mode: str, steps: int) -> dict[str, Any]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, __file__, "--mode", mode, "--steps", str(steps)],
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - started
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["wall_seconds"] = wall
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--mode", choices=["aworld", "plain"])
    options = parser.parse_args()
    if options.mode:
        run = run_aworld if options.mode == "aworld" else run_plain
        print(json.dumps(run(WORK.resolve(), options.steps)))
        return

    prepare(WORK)
    results: dict[str, list[dict[str, Any]]] = {"aworld": [], "plain": []}
    for _ in range(options.repeats):
        for mode in ("plain", "aworld"):  # interleaved so machine load hits both alike
            results[mode].append(measure(mode, options.steps))
    aworld, plain = results["aworld"][0], results["plain"][0]
    same_loss = aworld["loss"] == plain["loss"]
    same_reward = aworld["reward"] == plain["reward"]
    max_diff = max(
        (abs(a - b) for key in ("loss", "reward") for a, b in zip(aworld[key], plain[key])),
        default=0.0,
    )
    best = {mode: min(r["wall_seconds"] for r in runs) for mode, runs in results.items()}
    train = {mode: min(r["train_seconds"] for r in runs) for mode, runs in results.items()}
    summary = {
        "steps": options.steps,
        "logged_steps": [len(aworld["reward"]), len(plain["reward"])],
        "loss_identical": same_loss,
        "reward_identical": same_reward,
        "max_abs_difference": max_diff,
        "reward_first_last": [plain["reward"][0], plain["reward"][-1]],
        "wall_seconds": best,
        "wall_ratio": best["aworld"] / best["plain"],
        "train_seconds": train,
        "train_ratio": train["aworld"] / train["plain"],
        "reward_ms_per_step": reward_wrapper_cost(WORK.resolve()),
        "all_wall_seconds": {
            m: [round(r["wall_seconds"], 2) for r in runs] for m, runs in results.items()
        },
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
