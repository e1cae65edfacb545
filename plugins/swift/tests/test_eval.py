"""``aworld-train eval RUN --compare`` on a real ms-swift run of the tiny model: base and final
scores that a plain transformers greedy loop reproduces exactly
(:func:`aworld_train.testing.eval_reference.assert_eval_reproduces`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from aworld_train import AgentTrainer
from aworld_train.cli import main
from aworld_train.testing.eval_reference import (
    EVAL_REWARD,
    TEST_ROWS,
    assert_eval_reproduces,
    varied_model,
)


@pytest.mark.slow
def test_compare_reproduces_a_plain_greedy_loop(
    job: dict[str, Any],
    tiny_model: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    folder = job["base_dir"]
    model = varied_model(tiny_model, folder / "varied-model")
    (folder / "test.jsonl").write_text("".join(json.dumps(row) + "\n" for row in TEST_ROWS))
    # fp32 on any device: the reference loop loads the final model in fp32.
    config = dict(job["config"], model=str(model), precision="fp32")
    trainer = AgentTrainer(
        **dict(
            job,
            config=config,
            test_dataset="test.jsonl",
            reward_func=EVAL_REWARD,
            show_progress=False,
        )
    )
    trainer.train()
    run = trainer.run_dir.path
    # Eval generates on the CPU, as the reference loop does, on a GPU machine too.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    capsys.readouterr()
    main(["eval", str(run), "--compare", "--json"])
    assert_eval_reproduces(run, json.loads(capsys.readouterr().out))
