"""A run of the ms-swift engine evaluates as ``aworld-train eval`` does: the greedy evaluation of
the test set after the last step scores what ``eval`` scores on the run's final model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aworld_train import AgentTrainer
from aworld_train.testing.fixtures import manifest, read_jsonl


# A reward that any change to a completion's text changes, so that equal means say the two
# evaluations generated the same completions.
TEXT_REWARD = """
def checksum(data_source, solution_str, ground_truth, extra_info=None):
    return sum(map(ord, solution_str)) % 97 / 97
"""


def _noisy_copy(model: Path, folder: Path) -> Path:
    """The tiny model with noise on its weights, so that it answers each prompt differently."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    weights = AutoModelForCausalLM.from_pretrained(model)
    with torch.no_grad():
        for parameter in weights.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.3)
    weights.save_pretrained(folder)
    AutoTokenizer.from_pretrained(model).save_pretrained(folder)
    return folder


def test_the_last_evaluation_scores_what_aworld_train_eval_scores(
    job: dict[str, Any], tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aworld_train.cli import main

    model = _noisy_copy(tiny_model, job["base_dir"] / "noisy")
    rows = [json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) for d in range(10)]
    (job["base_dir"] / "test.jsonl").write_text("\n".join(rows) + "\n")
    (job["base_dir"] / "text.py").write_text(TEXT_REWARD)
    job.update(test_dataset="test.jsonl",
               reward_func=["rewards.py:score", {"name": "text.py:checksum", "weight": 0.5}])
    # fp32 on any device: eval loads the final model in its saved dtype.
    job["config"] = dict(job["config"], model=str(model), eval_limit=8, max_steps=2,
                         precision="fp32")
    trainer = AgentTrainer(**job)
    trainer.train()
    run_dir = trainer.run_dir.path
    assert manifest(run_dir)["settings"]["eval_steps"] is None  # the last step only

    evaluations = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "eval_reward" in m]
    assert [m["step"] for m in evaluations] == [2]
    capsys.readouterr()
    main(["eval", str(run_dir), "--limit", "8", "--json"])
    scored = json.loads(capsys.readouterr().out)
    assert scored["rows"] == 8
    last = evaluations[0]
    assert last["eval_reward"] == pytest.approx(scored["mean_reward"])
    assert (last["eval_score"], last["eval_checksum"]) == pytest.approx(
        (scored["rewards"]["score"], scored["rewards"]["checksum"]))
    # The rows score differently, so the agreement is not one of constants.
    records = read_jsonl(run_dir / "eval" / "final-test.samples.jsonl")
    assert len({r["rewards"]["checksum"] for r in records}) > 1
