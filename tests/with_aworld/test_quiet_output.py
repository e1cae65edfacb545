"""`aworld-train check` of a job with an AWorld agent: AWorld's coloured log lines stay off the
terminal and its `logs/` folder out of the current folder (a user's own AWorld settings still
win), and the agent row names the model that trains. Runs in the venv with the `aworld` extra;
the engine is a minimal one laid out for the test (no torch)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("aworld", reason="needs the aworld extra: pip install aworld-train[aworld]")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import engine_source, lay_out_engine, write_model_folder  # noqa: E402

AGENT = """
from aworld.agents.llm_agent import Agent
from aworld.config.conf import AgentConfig


def build():
    return Agent(name="solver", system_prompt="Answer.", conf=AgentConfig(
        llm_provider="openai", llm_model_name="tiny-policy", llm_base_url="http://127.0.0.1:9/v1",
        llm_api_key="sk-x"))
"""


def check(folder: Path, job: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``aworld-train check`` of ``job`` run from an empty folder ``folder/cwd``, with AWorld's
    own variables unset unless ``env`` sets them."""
    site = folder / "site"
    if not site.exists():
        site.mkdir()
        lay_out_engine(site, "idle", engine_source())
        (folder / "agent.py").write_text(AGENT)
        (folder / "train.jsonl").write_text('{"prompt": "2+2?", "ground_truth": "4"}\n')
    (folder / "job.yaml").write_text(job)
    cwd = folder / "cwd"
    cwd.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWORLD_")}
    return subprocess.run(
        [str(Path(sys.executable).parent / "aworld-train"), "check", "../job.yaml"],
        cwd=cwd,
        env={**base, "PYTHONPATH": str(site), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


JOB = "engine: idle\nagent: agent.py:build\ntrain_dataset: train.jsonl\nreward: exact_match\n"


def test_aworlds_logs_reach_neither_the_terminal_nor_the_current_folder(tmp_path: Path) -> None:
    result = check(tmp_path, JOB)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert "INFO" not in result.stdout and "aworld PID" not in result.stdout
    assert list((tmp_path / "cwd").iterdir()) == [], "nothing written into the current folder"


def test_a_users_own_aworld_log_settings_win(tmp_path: Path) -> None:
    logs = tmp_path / "cwd" / "my-logs"
    result = check(tmp_path, JOB, AWORLD_DISABLE_CONSOLE_LOG="false", AWORLD_LOG_PATH=str(logs))
    assert result.returncode == 0, result.stderr
    assert "INFO" in result.stderr, "AWorld's console lines, as the user asked"
    assert logs.is_dir()


def test_the_agent_row_names_the_model_that_trains(tmp_path: Path) -> None:
    write_model_folder(tmp_path / "model")
    result = check(tmp_path, JOB + "config:\n  model: model\n")
    # The model check itself needs transformers, which this venv lacks: the agent row comes first.
    row = next(line for line in result.stdout.splitlines() if "'solver'" in line)
    assert "model model (not the agent's own tiny-policy)" in row
    result = check(tmp_path, JOB)  # no config model: the agent's own is the policy
    row = next(line for line in result.stdout.splitlines() if "'solver'" in line)
    assert "model tiny-policy," in row and "not the agent's own" not in row
