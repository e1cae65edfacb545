"""Throughput of ``aworld-train eval`` against a plain transformers loop on the same rows.

A job file (a tiny Qwen2 built here, ``rows`` "Repeat: <number>" prompts of varied length,
the exact-match reward, ``max_completion_length`` tokens) is evaluated with
:func:`aworld_train.evaluation.evaluate` (what ``aworld-train eval JOB --model base`` runs: job,
dataset, reward and model loading included) and with a plain script: load the tokenizer and
model, render each prompt with the chat template, greedy ``generate`` in left-padded batches of
the same size, decode, score. Runs alternate in one process on one torch thread (imports paid
once, before either); the figure is the median wall and CPU time of each and their ratio (goal:
eval within 10% of the plain loop). Both must give the same completions.

    .venvs/trl/bin/python bench/eval_throughput.py [--rows 256] [--tokens 32] [--repeats 3]

Work files go to ``.bench/eval_throughput/``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

WORK = Path(".bench/eval_throughput")
SYSTEM_PROMPT = "Repeat the number."
BATCH = 16


def write_job(rows: int, tokens: int) -> Path:
    """The model, the dataset and the job file; returns the job file."""
    import yaml
    from aworld_train.testing import build_tiny_model

    WORK.mkdir(parents=True, exist_ok=True)
    model = build_tiny_model(WORK / "model", hidden_size=256, num_layers=4, num_heads=4)
    numbers = random.Random(0)
    data = [
        {"prompt": f"Repeat: {numbers.randrange(10 ** numbers.randint(1, 12))}"}
        for _ in range(rows)
    ]
    for row in data:
        row["ground_truth"] = row["prompt"].removeprefix("Repeat: ")
    (WORK / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in data))
    job = {
        "engine": "trl",
        "agent": {"name": "bench", "system_prompt": SYSTEM_PROMPT},
        "train_dataset": "test.jsonl",
        "test_dataset": "test.jsonl",
        "reward": "exact_match",
        "config": {"model": str(model.resolve()), "max_completion_length": tokens},
    }
    path = WORK / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def plain_loop(model_folder: str, rows: list[dict[str, Any]], tokens: int, batch: int) -> list[str]:
    """The plain transformers recipe: left-padded batches in the dataset's order, greedy."""
    import torch
    from aworld_train.reward._builtin import exact_match
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_folder, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.float32)
    completions = []
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        conversations = [
            [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": row["prompt"]},
            ]
            for row in chunk
        ]
        inputs = tokenizer.apply_chat_template(
            conversations,
            add_generation_prompt=True,
            padding=True,
            return_tensors="pt",
            return_dict=True,
        )
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=tokens, do_sample=False)
        completions += tokenizer.batch_decode(
            output[:, inputs["input_ids"].shape[1] :], skip_special_tokens=True
        )
    for row, text in zip(rows, completions):
        exact_match("", text, row["ground_truth"])
    return completions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch
    from aworld_train.evaluation import evaluate

    # One thread: on a shared machine, threads that wait on each other make both figures noise.
    torch.set_num_threads(1)
    job = write_job(args.rows, args.tokens)
    model = str((WORK / "model").resolve())
    rows = [json.loads(line) for line in (WORK / "test.jsonl").read_text().splitlines()]
    # Wall and CPU seconds of each run: on a shared machine the CPU time is the steadier figure.
    times: dict[str, list[tuple[float, float]]] = {"eval": [], "plain": []}
    answers: dict[str, list[str]] = {}

    def timed(name: str, run: Any) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        value = run()
        times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
        return value

    for _ in range(args.repeats):
        result = timed("eval", lambda: evaluate(job, model="base", batch_size=BATCH))
        answers["eval"] = [record["completion"] for record in result.records]
        answers["plain"] = timed("plain", lambda: plain_loop(model, rows, args.tokens, BATCH))
    wall = {name: statistics.median(w for w, _ in values) for name, values in times.items()}
    cpu = {name: statistics.median(c for _, c in values) for name, values in times.items()}
    print(
        json.dumps(
            {
                "rows": args.rows,
                "max_new_tokens": args.tokens,
                "batch": BATCH,
                "wall_cpu_s": times,
                "eval_rows_per_s": args.rows / wall["eval"],
                "plain_rows_per_s": args.rows / wall["plain"],
                "eval_over_plain_wall": wall["eval"] / wall["plain"],
                "eval_over_plain_cpu": cpu["eval"] / cpu["plain"],
                "same_completions": answers["eval"] == answers["plain"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
