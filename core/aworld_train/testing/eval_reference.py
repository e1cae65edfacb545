"""What an engine's eval test checks ``aworld-train eval`` against: a plain transformers greedy
loop over the same prompts, written without any of :mod:`aworld_train.evaluation`, and a tiny
model whose greedy answers differ from prompt to prompt.

    from aworld_train.testing.eval_reference import assert_eval_reproduces, varied_model

Importing this module is cheap: torch and transformers are imported by the functions.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import yaml

#: The reward of an eval test's job: the fixture's exact ``score`` and its ``length`` at half
#: weight (see :data:`aworld_train.testing.fixtures.REWARD_FILE`).
EVAL_REWARD = ["rewards.py:score", {"name": "rewards.py:length", "weight": 0.5}]
#: An eval test's test set: "Repeat: d" for every digit.
TEST_ROWS = [{"prompt": f"Repeat: {digit}", "ground_truth": str(digit)} for digit in range(10)]


def varied_model(tiny_model: Path, folder: Path) -> Path:
    """The tiny model with noise on its weights: a freshly initialised one answers every prompt
    with the same newlines, which would hide a prompt built wrongly; this one answers each
    prompt differently."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    noise = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=noise) * 0.3)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(folder)
    return folder


def greedy_loop(
    model_folder: str | Path, rows: list[dict[str, Any]], system_prompt: str, max_new_tokens: int
) -> list[str]:
    """One prompt at a time: the chat template with the system prompt and the generation
    prompt, greedy generation, the new tokens decoded without special tokens."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_folder)
    model = AutoModelForCausalLM.from_pretrained(model_folder, dtype=torch.float32)
    completions = []
    for row in rows:
        messages = [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": row["prompt"]},
        ]
        inputs = tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        with torch.no_grad():
            output = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
        prompt_tokens = inputs["input_ids"].shape[1]
        completions.append(tokenizer.decode(output[0, prompt_tokens:], skip_special_tokens=True))
    return completions


def reference_scores(
    folder: Path, rows: list[dict[str, Any]], completions: list[str]
) -> dict[str, list[float]]:
    """Each completion scored by the job's reward file (``folder/rewards.py``) directly, the
    weights of :data:`EVAL_REWARD` applied by hand."""
    spec = importlib.util.spec_from_file_location("reference_rewards", folder / "rewards.py")
    assert spec is not None and spec.loader is not None
    rewards = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rewards)
    score = [rewards.score("", text, row["ground_truth"]) for row, text in zip(rows, completions)]
    length = [
        rewards.length("", text, row["ground_truth"])["score"]
        for row, text in zip(rows, completions)
    ]
    return {"score": score, "length": length, "total": [s + 0.5 * n for s, n in zip(score, length)]}


def assert_eval_reproduces(run: Path, summary: dict[str, Any]) -> None:
    """Check the summary of ``aworld-train eval RUN --compare --json`` (a run of a job with
    :data:`EVAL_REWARD` and :data:`TEST_ROWS` as its test set) against :func:`greedy_loop` on
    the job's model and the run's ``model/``: every completion, score and mean exactly; and
    that training changed the answers, so that a mix-up of the two models would show."""
    job = yaml.safe_load((run / "job.yaml").read_text())
    job_folder = Path(job["reward"][0].rpartition(":")[0]).parent
    max_new_tokens = job["config"]["max_completion_length"]
    answers = {}
    for name, folder in {"base": job["config"]["model"], "final": run / "model"}.items():
        completions = greedy_loop(folder, TEST_ROWS, job["agent"]["system_prompt"], max_new_tokens)
        scores = reference_scores(job_folder, TEST_ROWS, completions)
        result = summary[name]
        assert (result["model"], result["dataset"], result["rows"]) == (name, "test", 10)
        assert result["mean_reward"] == _mean(scores["total"])
        assert result["rewards"] == {
            "score": _mean(scores["score"]),
            "length": _mean(scores["length"]),
        }
        assert result["pass_at_k"] is None and result["samples"] == 1
        records = [
            json.loads(line)
            for line in (run / "eval" / f"{name}-test.samples.jsonl").read_text().splitlines()
        ]
        assert [r["completion"] for r in records] == completions
        assert [r["score"] for r in records] == scores["total"]
        assert [r["ground_truth"] for r in records] == [row["ground_truth"] for row in TEST_ROWS]
        assert json.loads((run / "eval" / f"{name}-test.json").read_text()) == result
        answers[name] = completions
    assert len(set(answers["base"])) > 1 and answers["final"] != answers["base"]
    assert summary["difference"]["mean_reward"] == (
        summary["final"]["mean_reward"] - summary["base"]["mean_reward"]
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)
