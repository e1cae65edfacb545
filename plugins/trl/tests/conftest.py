"""Shared fixtures: the tiny model and a small "Repeat: <digit>" job for AgentTrainer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

# The reward records every call so tests can check what TRL passed per completion (and whether
# the training process got the job's hub token through its environment). It sends
# SIGINT to its own process once a run has saved checkpoint-2 when INTERRUPT_AFTER_CHECKPOINT
# is set, the way a user's Ctrl-C would arrive mid-training.
REWARD_FILE = '''
import json, os, signal
from pathlib import Path

HERE = Path(__file__).parent


def score(data_source, solution_str, ground_truth, extra_info=None):
    with (HERE / "calls.jsonl").open("a") as handle:
        handle.write(json.dumps({"ground_truth": ground_truth, "extra_info": extra_info,
                                 "solution": solution_str, "data_source": data_source,
                                 "hf_token": os.environ.get("HF_TOKEN")}) + "\\n")
    marker = HERE / "interrupt"
    if marker.exists() and list((HERE / "runs").glob("*/checkpoints/checkpoint-2")):
        marker.unlink()
        os.kill(os.getpid(), signal.SIGINT)
    return 1.0 if solution_str.strip() == ground_truth else 0.0


def with_metrics(data_source, solution_str, ground_truth, extra_info=None):
    return {"score": 0.5, "length": float(len(solution_str))}
'''


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from aworld_train.testing import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture
def job(tmp_path: Path, tiny_model: Path) -> dict[str, Any]:
    """``AgentTrainer`` keyword arguments for a tiny GRPO job of 4 steps."""
    rows = [
        {
            "prompt": f"Repeat: {digit}",
            "ground_truth": str(digit),
            "extra_info": {"digit": str(digit)},
        }
        for digit in [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3]
    ]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "rewards.py").write_text(REWARD_FILE)
    return {
        "agent": {"name": "tiny", "system_prompt": "Answer with the digit."},
        "config": {
            "algorithm": "grpo",
            "model": str(tiny_model),
            "max_steps": 4,
            "batch_size": 4,
            "num_generations": 2,
            "learning_rate": 1e-3,
            "max_completion_length": 4,
            "logging_steps": 1,
            "save_steps": 2,
            "trl": {"beta": 0.0},
        },
        "reward_func": "rewards.py:score",
        "train_dataset": "train.jsonl",
        "run_path": tmp_path / "runs",
        "train_engine_name": "trl",
        "base_dir": tmp_path,
    }

