"""Job folders for the tinker engine's tests, and the real CLI run on them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

CLI = str(Path(sys.executable).with_name("aworld-train"))
# A local SkyRL tx server takes any key with the SDK's prefix.
LOCAL_KEY = "tml-local-test"

# The repeat-digit example's reward.
REWARD_FILE = Path(__file__).resolve().parents[3] / "examples" / "repeat_digit" / "reward.py"


def write_job(
    folder: Path,
    model: Path,
    config: dict[str, Any] | None = None,
    digits: tuple[int, ...] = tuple(range(10)),
    rows: int = 16,
) -> Path:
    """A tiny repeat-digit GRPO job in ``folder`` of ``rows`` prompts, ``digits`` in turn;
    ``config`` overrides its config keys."""
    folder.mkdir(parents=True, exist_ok=True)
    data = [
        {"prompt": f"Repeat: {d}", "ground_truth": str(d), "data_source": "repeat_digit"}
        for d in (digits[i % len(digits)] for i in range(rows))
    ]
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in data))
    shutil.copy(REWARD_FILE, folder / "reward.py")
    job = {
        "engine": "tinker",
        "agent": {"name": "digits", "model": str(model)},
        "train_dataset": "train.jsonl",
        "reward": "reward.py:score",
        "config": {
            "algorithm": "grpo",
            "max_steps": 2,
            "batch_size": 8,
            "num_generations": 4,
            "learning_rate": 0.01,
            "max_completion_length": 4,
            "logging_steps": 1,
            **(config or {}),
        },
        "run_path": "runs",
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def run_cli(
    *arguments: str, url: str | None, key: str | None = LOCAL_KEY, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``aworld-train ARGUMENTS`` against the service at ``url``, with ``key`` as
    TINKER_API_KEY."""
    environment = {
        k: v for k, v in os.environ.items() if k not in ("TINKER_BASE_URL", "TINKER_API_KEY")
    }
    if url is not None:
        environment["TINKER_BASE_URL"] = url
    if key is not None:
        environment["TINKER_API_KEY"] = key
    return subprocess.run(
        [CLI, *arguments], capture_output=True, text=True, env=environment, timeout=timeout
    )


def error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one ``error:`` line of a refused command (the test fails if there is not exactly one)."""
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]
