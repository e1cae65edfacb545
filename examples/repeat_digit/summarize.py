"""Summarise the newest repeat-digit run: reward of the first and last tenth of the steps, then
``aworld-train eval RUN --compare``: the starting model and the trained one scored side by side,
greedily, on the test set (``Repeat: 0`` .. ``Repeat: 9``), and the trained model's answers.

Run from anywhere after ``aworld-train train examples/repeat_digit/job.yaml``, with the
environment's Python, or name a run: ``python examples/repeat_digit/summarize.py RUN_DIR``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

RUNS = Path(__file__).resolve().parent / "runs"
DIGITS = range(10)
MAX_NEW_TOKENS = 8


def newest_run(runs: Path = RUNS) -> Path:
    """The run directory under ``runs`` whose metrics were written last."""
    found = sorted(
        (p for p in runs.glob("*") if (p / "metrics.jsonl").is_file()),
        key=lambda p: p.stat().st_mtime,
    )
    if not found:
        raise SystemExit(f"no run with metrics under {runs}")
    return found[-1]


def reward_tenths(run: Path) -> tuple[float, float]:
    """Mean logged reward over the first and over the last tenth of the logged steps."""
    rewards = [
        record["reward"]
        for record in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
        if "reward" in record
    ]
    if not rewards:
        raise SystemExit(f"{run / 'metrics.jsonl'}: no reward logged")
    tenth = max(1, len(rewards) // 10)
    return sum(rewards[:tenth]) / tenth, sum(rewards[-tenth:]) / tenth


def greedy_answers(model_dir: Path) -> list[tuple[int, str]]:
    """What the model answers, greedily and in float32, to ``Repeat: d`` for every digit."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    answers = []
    for digit in DIGITS:
        messages = [{"role": "user", "content": f"Repeat: {digit}"}]
        inputs = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=MAX_NEW_TOKENS, do_sample=False)
        answer = tokenizer.decode(
            output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True
        )
        answers.append((digit, answer))
    return answers


def main() -> None:
    run = Path(sys.argv[1]) if len(sys.argv) > 1 else newest_run()
    first, last = reward_tenths(run)
    print(f"run: {run}")
    print(f"mean reward, first tenth of the steps: {first:.3f}; last tenth: {last:.3f}")
    command = [str(Path(sys.executable).with_name("aworld-train")), "eval", str(run), "--compare"]
    print("$ aworld-train eval", run, "--compare", flush=True)
    subprocess.run(command, check=True)
    records = map(json.loads, (run / "eval" / "final-test.samples.jsonl").read_text().splitlines())
    print(
        "trained model's greedy answers:",
        "  ".join(f"{r['ground_truth']}->{r['completion']!r}" for r in records),
    )


if __name__ == "__main__":
    main()
