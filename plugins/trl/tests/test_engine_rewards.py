"""Another engine's own reward (``reward: swift:format``) on TRL is one ``check`` line naming
the reward; where that engine is not installed, the module its name reads as."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from aworld_train.testing.fixtures import run_cli


def test_swifts_own_reward_on_trl_is_one_line(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"prompt": f"Repeat: {i}", "ground_truth": str(i)} for i in range(4)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "rewards.py").write_text(
        "def score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return float(solution_str.strip() == ground_truth)\n"
    )
    job = {
        "agent": {"name": "solver"},
        "train_dataset": "train.jsonl",
        "reward": ["swift:format", "rewards.py:score"],
        "config": {"algorithm": "grpo", "model": str(tiny_model), "max_steps": 1},
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    code, _, err = run_cli(capsys, "check", tmp_path / "job.yaml", "--engine", "trl")
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1, err
    # ms-swift is not installed beside TRL: its reward's name reads as a module that is not there.
    assert "'swift:format'" in errors[0] and "cannot import module 'swift'" in errors[0], errors[0]
