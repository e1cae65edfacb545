"""Summarise the newest repeat-digit run: reward of the first and last tenth of the steps, and
what the trained model answers, greedily, for each digit.

Run from anywhere after ``aworld-train train examples/repeat_digit/job.yaml``.
"""

from __future__ import annotations

import json
from pathlib import Path

RUNS = Path(__file__).resolve().parent / "runs"


def main() -> None:
    runs = sorted((p for p in RUNS.glob("*") if (p / "metrics.jsonl").is_file()),
                  key=lambda p: p.stat().st_mtime)
    if not runs:
        raise SystemExit(f"no run with metrics under {RUNS}")
    run = runs[-1]
    rewards = [
        record["reward"]
        for record in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
        if "reward" in record
    ]
    tenth = max(1, len(rewards) // 10)
    first, last = sum(rewards[:tenth]) / tenth, sum(rewards[-tenth:]) / tenth
    print(f"mean reward, first tenth of the steps: {first:.3f}; last tenth: {last:.3f}")
    if (run / "model" / "config.json").is_file():
        print("greedy answers:", "  ".join(f"{d}->{answer!r}" for d, answer in _answers(run)))


def _answers(run: Path) -> list[tuple[int, str]]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(run / "model")
    model = AutoModelForCausalLM.from_pretrained(run / "model")
    answers = []
    for digit in range(10):
        messages = [{"role": "user", "content": f"Repeat: {digit}"}]
        inputs = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=8, do_sample=False)
        answer = tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)
        answers.append((digit, answer))
    return answers


if __name__ == "__main__":
    main()
