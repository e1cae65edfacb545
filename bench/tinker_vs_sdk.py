"""Steps per second of one GRPO job through the tinker engine vs a plain RL loop written with
the ``tinker`` SDK alone, against the same local SkyRL tx server.

    .venvs/tinker/bin/python bench/tinker_vs_sdk.py [--steps 12] [--rounds 2]

The job is the repeat-digit task (the example's model built as a tiny Qwen3, prompts of every
digit, 4 prompts x 16 completions, 8 tokens, rank-8 LoRA). The plain loop does what the
engine's step does, as tinker-cookbook's ``rl_loop`` recipe does it (the cookbook itself needs
a newer SDK than the one SkyRL tx 0.3 speaks): save the adapter for sampling, sample each
prompt's group, score it, group advantages, ``forward_backward(importance_sampling)``,
``optim_step``. The server is warmed up first (its JIT compiles once per shape), then the two
run in turn, ``--rounds`` times; each run's rate is over its steps 2..N (step 1 opens clients).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins" / "tinker" / "tests"))
sys.path.insert(0, str(ROOT / "examples" / "repeat_digit"))

from jobs import LOCAL_KEY, REWARD_FILE  # noqa: E402
from prepare import MODEL_ARGS  # noqa: E402
from reward import score  # noqa: E402
from skyrl_server import start_server  # noqa: E402
from tiny_qwen3 import build_tiny_qwen3  # noqa: E402

PROMPTS, GROUP, TOKENS, RANK, RATE = 4, 16, 8, 8, 0.005


def plain_loop(url: str, model: Path, steps: int) -> list[float]:
    """The SDK-only loop; returns each step's end time."""
    import tinker
    from tinker import types
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    service = tinker.ServiceClient(base_url=url, api_key=LOCAL_KEY)
    client = service.create_lora_training_client(base_model=str(model), rank=RANK, seed=0)
    rng = random.Random(0)
    ends = []
    for step in range(steps):
        sampler = client.save_weights_and_get_sampling_client()
        digits = [rng.randrange(10) for _ in range(PROMPTS)]
        prompts = [
            tokenizer.apply_chat_template(
                [{"role": "user", "content": f"Repeat: {d}"}], add_generation_prompt=True
            )
            for d in digits
        ]
        futures = [
            sampler.sample(
                prompt=types.ModelInput.from_ints(ids),
                num_samples=GROUP,
                sampling_params=types.SamplingParams(
                    max_tokens=TOKENS, temperature=1.0, stop=[tokenizer.eos_token_id],
                    seed=(step * PROMPTS + k) * GROUP,
                ),
            )
            for k, ids in enumerate(prompts)
        ]  # fmt: skip
        data = []
        for digit, ids, future in zip(digits, prompts, futures):
            sequences = future.result().sequences
            rewards = [
                score("", tokenizer.decode(s.tokens, skip_special_tokens=True), str(digit))
                for s in sequences
            ]
            mean, spread = statistics.fmean(rewards), statistics.pstdev(rewards)
            if spread == 0:
                continue
            total = PROMPTS * GROUP * TOKENS
            for sequence, reward in zip(sequences, rewards):
                tokens = ids + list(sequence.tokens)
                zeros = [0.0] * len(ids)
                advantage = (reward - mean) / spread / total
                data.append(types.Datum(
                    model_input=types.ModelInput.from_ints(tokens[:-1]),
                    loss_fn_inputs={
                        "target_tokens": tokens[1:],
                        "logprobs": (zeros + list(sequence.logprobs))[1:],
                        "advantages": (zeros + [advantage] * len(sequence.tokens))[1:],
                    },
                ))  # fmt: skip
        if data:
            backward = client.forward_backward(data, "importance_sampling")
            optim = client.optim_step(types.AdamParams(learning_rate=RATE))
            backward.result()
            optim.result()
        ends.append(time.monotonic())
    return ends


def engine_run(url: str, folder: Path, model: Path, steps: int) -> list[float]:
    """The same job through ``aworld-train train``; returns each step's logged time."""
    rows = [{"prompt": f"Repeat: {d % 10}", "ground_truth": str(d % 10)} for d in range(400)]
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    shutil.copy(REWARD_FILE, folder / "reward.py")
    config = {
        "algorithm": "grpo", "model": str(model), "max_steps": steps,
        "batch_size": PROMPTS * GROUP, "num_generations": GROUP, "learning_rate": RATE,
        "max_completion_length": TOKENS, "lora": {"rank": RANK}, "logging_steps": 1,
        "log_samples": 0, "seed": 0,
    }  # fmt: skip
    job = {"engine": "tinker", "agent": {"name": "digits"}, "train_dataset": "train.jsonl",
           "reward": "reward.py:score", "config": config, "run_path": "runs"}  # fmt: skip
    (folder / "job.yaml").write_text(json.dumps(job))
    environment = dict(os.environ, TINKER_BASE_URL=url, TINKER_API_KEY=LOCAL_KEY)
    cli = str(Path(sys.executable).with_name("aworld-train"))
    done = subprocess.run([cli, "train", str(folder / "job.yaml")], env=environment,
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        sys.exit(done.stderr[-2000:])
    (run,) = (folder / "runs").iterdir()
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [record["time"] for record in records]


def rate(ends: list[float]) -> float:
    """Steps per second over steps 2..N."""
    return (len(ends) - 1) / (ends[-1] - ends[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=2)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        model = build_tiny_qwen3(folder / "model", **MODEL_ARGS)
        with start_server(model, folder / "server") as server:
            plain_loop(server.url, model, 4)  # the warm-up: the server compiles its shapes
            results: dict[str, list[float]] = {"engine": [], "plain": []}
            for round_ in range(arguments.rounds):
                results["plain"].append(rate(plain_loop(server.url, model, arguments.steps)))
                run = folder / f"engine-{round_}"
                run.mkdir()
                results["engine"].append(rate(engine_run(server.url, run, model, arguments.steps)))
    engine, plain = statistics.median(results["engine"]), statistics.median(results["plain"])
    print(json.dumps({
        "steps": arguments.steps, "rounds": arguments.rounds,
        "engine_steps_per_s": [round(r, 3) for r in results["engine"]],
        "plain_steps_per_s": [round(r, 3) for r in results["plain"]],
        "ratio": round(engine / plain, 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
