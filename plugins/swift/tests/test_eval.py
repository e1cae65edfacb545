"""``aworld-train eval RUN --compare`` on a real ms-swift run of the tiny model: base and final
scores that a plain transformers greedy loop reproduces exactly
(:func:`aworld_train.testing.eval_reference.assert_eval_reproduces`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aworld_train import AgentTrainer
from aworld_train.cli import main
from aworld_train.testing.eval_reference import (
    EVAL_REWARD,
    TEST_ROWS,
    assert_eval_reproduces,
    varied_model,
)


def test_compare_reproduces_a_plain_greedy_loop(job: dict[str, Any], tiny_model: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    folder = job["base_dir"]
    model = varied_model(tiny_model, folder / "varied-model")
    (folder / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in TEST_ROWS))
    trainer = AgentTrainer(**dict(job, config=dict(job["config"], model=str(model)),
                                  test_dataset="test.jsonl", reward_func=EVAL_REWARD,
                                  show_progress=False))
    trainer.train()
    run = trainer.run_dir.path
    capsys.readouterr()
    main(["eval", str(run), "--compare", "--json"])
    assert_eval_reproduces(run, json.loads(capsys.readouterr().out))
