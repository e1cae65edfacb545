"""vLLM against transformers on a CPU: eval throughput, and GRPO steps per second.

``eval``: the same ``rows`` "Repeat: <number>" prompts (varied length), greedy, fp32, scored
with :func:`aworld_train.evaluation.generate_and_score` (what ``aworld-train eval`` runs once the
model is loaded) by a ``vllm.LLM`` and by a transformers model (eval's left-padded batches of
``--batch``), both loaded once with :func:`aworld_train.evaluation.load_model` (the vLLM
engine's start-up is timed, and reported, on its own). Runs alternate, ``--repeats`` each; the
figure is the median wall time, generated tokens per second (each completion up to its
end-of-sequence token) and their ratio (goal: vLLM
≥ 2.5× transformers). Both must give the same completions. The model is a tiny Qwen2 with
noise on its weights (so each prompt gets its own answer), ``--hidden``/``--layers``/``--heads``;
vLLM's CPU attention needs heads ≥ 32 wide.

``grpo``: the same small GRPO job (the repeat-digit demo's model and reward, 16 prompts × 4
generations, 32 completion tokens, seed 0) trained with ``trl.use_vllm: true`` (the engine's own
vLLM rollouts, weights synced each step) and without (TRL's transformers generation), each a
fresh ``aworld-train train`` in a child process, alternating. Steps per second are taken from
``metrics.jsonl``'s step times from step 1 to the last, so neither vLLM's start-up (timed on its
own) nor model loading counts; the final reward of each is reported.

Run with ``OMP_NUM_THREADS`` set to the cores to use. On a CPU the engine runs in the calling
process (:mod:`aworld_train.vllm_generation`); ``VLLM_ENABLE_V1_MULTIPROCESSING=1`` gives it
vLLM's own engine process (which spawns: hence the ``__main__`` guard).

    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE .venvs/vllm/bin/python bench/vllm_throughput.py \
        eval [--rows 128] [--tokens 32] [--repeats 3] [--hidden 128 --layers 2 --heads 4]
    OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE .venvs/vllm/bin/python bench/vllm_throughput.py \
        grpo [--steps 15] [--repeats 3]

Work files, and the figures as JSON (``eval-….json``, ``grpo.json``), go to
``.bench/vllm_throughput/``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import string
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

WORK = Path(".bench/vllm_throughput")
SYSTEM_PROMPT = "Repeat the number."
REPEAT_REWARD = Path("examples/repeat_digit/reward.py")
# The repeat-digit demo's model (examples/repeat_digit/prepare.py): a 26-token vocabulary.
DEMO_ALPHABET = "".join(sorted(set("Repeat: " + string.digits + "user" + "assistant" + "\n")))


def load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


# --- eval ----------------------------------------------------------------------------------


def write_eval_job(
    folder: Path, rows: int, tokens: int, hidden: int, layers: int, heads: int
) -> Path:
    import yaml
    from aworld_train.testing import build_tiny_model
    from aworld_train.testing.eval_reference import varied_model

    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "model"
    if not (model / "config.json").is_file():
        tiny = build_tiny_model(
            folder / "tiny", hidden_size=hidden, num_layers=layers, num_heads=heads
        )
        varied_model(tiny, model)
    numbers = random.Random(0)
    data = [
        {"prompt": f"Repeat: {numbers.randrange(10 ** numbers.randint(1, 12))}"}
        for _ in range(rows)
    ]
    for row in data:
        row["ground_truth"] = row["prompt"].removeprefix("Repeat: ")
    (folder / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in data))
    job = {
        "engine": "trl",
        "agent": {"name": "bench", "system_prompt": SYSTEM_PROMPT},
        "train_dataset": "test.jsonl",
        "test_dataset": "test.jsonl",
        "reward": "exact_match",
        "config": {"model": str(model.resolve()), "max_completion_length": tokens},
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def run_eval(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    from aworld_train.evaluation import generate_and_score, load_model, load_rows, open_target

    folder = WORK / f"eval-h{args.hidden}-l{args.layers}-a{args.heads}"
    job = write_eval_job(folder, args.rows, args.tokens, args.hidden, args.layers, args.heads)
    target = open_target(job)
    _, rows = load_rows(target, "test", None)
    model_path = target.base_model
    loads: dict[str, float] = {}
    loaded: dict[str, tuple[Any, Any]] = {}
    for backend in ("vllm", "transformers"):
        started = time.perf_counter()
        loaded[backend] = load_model(model_path, target, backend == "vllm")
        loads[backend] = time.perf_counter() - started

    def run(backend: str) -> tuple[float, int, list[str]]:
        model, tokenizer = loaded[backend]
        counted = [0]
        decode = tokenizer.decode

        def counting_decode(ids: Any, *rest: Any, **options: Any) -> str:
            # generate_and_score decodes each completion once, cut at its end-of-sequence
            # token: the tokens generated that count.
            counted[0] += len(ids)
            return decode(ids, *rest, **options)

        tokenizer.decode = counting_decode
        try:
            started = time.perf_counter()
            result = generate_and_score(
                model,
                tokenizer,
                rows,
                agent=target.agent,
                reward=target.reward,
                max_new_tokens=target.max_new_tokens,
                batch_size=args.batch,
                seed=target.config.seed,
            )
            wall = time.perf_counter() - started
        finally:
            del tokenizer.decode
        return wall, counted[0], [record["completion"] for record in result.records]

    run("vllm")  # one untimed pass each: first-call allocations and caches
    run("transformers")
    times: dict[str, list[float]] = {"vllm": [], "transformers": []}
    loads_seen: list[list[float]] = []
    answers: dict[str, list[str]] = {}
    tokens: dict[str, int] = {}
    for _ in range(args.repeats):
        for backend in ("vllm", "transformers"):
            loads_seen.append(load_average())
            wall, count, answers[backend] = run(backend)
            times[backend].append(round(wall, 3))
            tokens[backend] = count
    wall = {name: statistics.median(values) for name, values in times.items()}
    speed = {name: tokens[name] / wall[name] for name in wall}
    return {
        "model": {
            "hidden": args.hidden,
            "layers": args.layers,
            "heads": args.heads,
            "parameters": sum(p.numel() for p in loaded["transformers"][0].parameters()),
        },
        "rows": args.rows,
        "max_new_tokens": args.tokens,
        "transformers_batch": args.batch,
        "threads": {
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
            "torch": torch.get_num_threads(),
        },
        "vllm_settings": _vllm_settings(loaded["vllm"][0]),
        "load_s": {name: round(value, 2) for name, value in loads.items()},
        "wall_s": times,
        "median_wall_s": wall,
        "tokens": tokens,
        "tokens_per_s": {name: round(value) for name, value in speed.items()},
        "vllm_over_transformers": round(speed["vllm"] / speed["transformers"], 2),
        "same_completions": answers["vllm"] == answers["transformers"],
        "distinct_completions": len(set(answers["vllm"])),
        "load_average_before_each_run": loads_seen,
    }


def _vllm_settings(llm: Any) -> dict[str, Any]:
    config = llm.llm_engine.vllm_config
    return {
        "max_num_seqs": config.scheduler_config.max_num_seqs,
        "max_num_batched_tokens": config.scheduler_config.max_num_batched_tokens,
        "max_model_len": config.model_config.max_model_len,
        "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE"),
    }


# --- grpo ----------------------------------------------------------------------------------


def write_grpo_jobs(steps: int, prompts: int, generations: int, tokens: int) -> dict[str, Path]:
    import yaml
    from aworld_train.testing import build_tiny_model

    folder = WORK / "grpo"
    folder.mkdir(parents=True, exist_ok=True)
    model = folder / "model"
    if not (model / "config.json").is_file():
        build_tiny_model(
            model, hidden_size=128, num_layers=2, num_heads=4, alphabet=DEMO_ALPHABET, seed=0
        )
    digits = random.Random(0)
    (folder / "train.jsonl").write_text(
        "".join(
            json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) + "\n"
            for d in (digits.randrange(10) for _ in range(prompts * steps))
        )
    )
    shutil.copy(REPEAT_REWARD, folder / "reward.py")
    jobs = {}
    for backend in ("vllm", "transformers"):
        trl = {"use_vllm": True} if backend == "vllm" else {}
        job = {
            "engine": "trl",
            "agent": {"name": "repeat", "llm_temperature": 1.0},
            "train_dataset": "train.jsonl",
            "reward": "reward.py:score",
            "config": {
                "algorithm": "grpo",
                "model": str(model.resolve()),
                "max_steps": steps,
                "batch_size": prompts * generations,
                "num_generations": generations,
                "learning_rate": 0.003,
                "lr_scheduler": "constant",
                "kl_coef": 0.0,
                "loss_aggregation": "token-mean",
                "max_completion_length": tokens,
                "logging_steps": 1,
                "save_steps": steps,
                "seed": 0,
                **({"trl": trl} if trl else {}),
            },
            "run_path": f"runs-{backend}",
        }
        jobs[backend] = folder / f"job-{backend}.yaml"
        jobs[backend].write_text(yaml.safe_dump(job))
    return jobs


def train_once(job: Path) -> None:
    """In a child process: ``aworld-train train JOB``, vLLM's engine start timed; prints one
    JSON line."""
    from aworld_train import cli, vllm_generation

    started: list[float] = []
    start_engine = vllm_generation.start_engine

    def timed_start(*args: Any, **kwargs: Any) -> Any:
        begin = time.perf_counter()
        llm = start_engine(*args, **kwargs)
        started.append(time.perf_counter() - begin)
        return llm

    vllm_generation.start_engine = timed_start
    runs = job.parent / _yaml(job)["run_path"]
    before = set(runs.glob("*")) if runs.is_dir() else set()
    wall = time.perf_counter()
    try:
        cli.main(["train", str(job)])
    except SystemExit as exit_:
        if exit_.code:
            raise
    wall = time.perf_counter() - wall
    [run_dir] = set(runs.glob("*")) - before
    print(
        "RESULT " + json.dumps({"run_dir": str(run_dir), "wall_s": wall, "vllm_start_s": started})
    )


def _yaml(path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(path.read_text())


def run_grpo(args: argparse.Namespace) -> dict[str, Any]:
    from aworld_train.run.metrics import read_metrics

    jobs = write_grpo_jobs(args.steps, args.prompts, args.generations, args.tokens)
    runs: dict[str, list[dict[str, Any]]] = {"vllm": [], "transformers": []}
    for _ in range(args.repeats):
        for backend in ("vllm", "transformers"):
            load = load_average()
            child = subprocess.run(
                [sys.executable, __file__, "train-once", str(jobs[backend])],
                capture_output=True,
                text=True,
                check=False,
            )
            line = next((x for x in child.stdout.splitlines() if x.startswith("RESULT ")), None)
            if child.returncode or line is None:
                sys.stderr.write(child.stdout[-3000:] + child.stderr[-3000:])
                raise SystemExit(f"{backend} training failed ({child.returncode})")
            result = json.loads(line.removeprefix("RESULT "))
            steps = [m for m in read_metrics(Path(result["run_dir"])) if "loss" in m]
            times = [m["time"] for m in steps]
            rewards = [m["reward"] for m in steps]
            runs[backend].append(
                {
                    "load_average_before": load,
                    "wall_s": round(result["wall_s"], 1),
                    "vllm_start_s": [round(s, 1) for s in result["vllm_start_s"]],
                    "steps": len(steps),
                    "steps_per_s": round((len(steps) - 1) / (times[-1] - times[0]), 3),
                    "reward_first_3": round(statistics.mean(rewards[:3]), 3),
                    "reward_last_3": round(statistics.mean(rewards[-3:]), 3),
                    "reward_last": round(rewards[-1], 3),
                    "rewards": [round(r, 3) for r in rewards],
                }
            )
            print(json.dumps({backend: runs[backend][-1]}), file=sys.stderr, flush=True)
    median = {
        name: statistics.median(r["steps_per_s"] for r in values) for name, values in runs.items()
    }
    return {
        "job": {
            "steps": args.steps,
            "prompts": args.prompts,
            "generations": args.generations,
            "max_completion_length": args.tokens,
            "model": "tiny Qwen2 hidden 128, 2 layers",
        },
        "median_steps_per_s": median,
        "vllm_over_transformers": round(median["vllm"] / median["transformers"], 2),
        "median_vllm_start_s": statistics.median(
            s for r in runs["vllm"] for s in r["vllm_start_s"]
        ),
        "median_reward_last_3": {
            name: statistics.median(r["reward_last_3"] for r in values)
            for name, values in runs.items()
        },
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    evaluation = commands.add_parser("eval", help="eval throughput")
    evaluation.add_argument("--rows", type=int, default=128)
    evaluation.add_argument("--tokens", type=int, default=32)
    evaluation.add_argument("--repeats", type=int, default=3)
    evaluation.add_argument(
        "--batch", type=int, default=16, help="transformers' batch (eval's default: 16)"
    )
    evaluation.add_argument("--hidden", type=int, default=128)
    evaluation.add_argument("--layers", type=int, default=2)
    evaluation.add_argument("--heads", type=int, default=4)
    grpo = commands.add_parser("grpo", help="GRPO steps per second")
    grpo.add_argument("--steps", type=int, default=15)
    grpo.add_argument("--prompts", type=int, default=16)
    grpo.add_argument("--generations", type=int, default=4)
    grpo.add_argument("--tokens", type=int, default=32)
    grpo.add_argument("--repeats", type=int, default=3)
    once = commands.add_parser("train-once", help=argparse.SUPPRESS)
    once.add_argument("job", type=Path)
    args = parser.parse_args()
    if args.command == "train-once":
        train_once(args.job)
        return
    load = load_average()
    result = run_eval(args) if args.command == "eval" else run_grpo(args)
    text = json.dumps(
        {"load_average_at_start": load, **result, "load_average_at_end": load_average()}, indent=2
    )
    # vLLM logs to stdout too: the figures also go to a file of their own.
    name = (
        f"eval-h{args.hidden}-l{args.layers}-a{args.heads}-b{args.batch}"
        if args.command == "eval"
        else "grpo"
    )
    (WORK / f"{name}.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
