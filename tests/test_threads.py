"""The CPU thread policy: a training on a CPU runs with idle OpenMP threads asleep
(``OMP_WAIT_POLICY=PASSIVE``) in the ``aworld-train`` process and in every process its engine
starts, unless the user set the variable; a machine with an accelerator gets nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from aworld_train.launch import threads
from aworld_train.launch.launcher import run_process
from helpers import lay_out_engine, only_run_dir
from test_cli import write_job

# An engine that trains as the toy engine does, after recording the policy its own process
# has and the policy of two processes it starts: one that inherits the environment and one
# given an environment of its own (as engines pass credentials).
RECORDING_ENGINE = """
import json, os, sys
from aworld_train import hookimpl
from aworld_train.engine.launch import run_process
from aworld_train_toy.engine import check_agent, check_config, check_dataset, check_reward
import aworld_train_toy.engine as toy

SHOW = "import os; print(os.environ.get('OMP_WAIT_POLICY'))"


@hookimpl
def train(dataset, reward, engine_config, ctx):
    seen = {"trainer": os.environ.get("OMP_WAIT_POLICY")}
    for name, env in (("inherited", None), ("own", {**os.environ, "TOKEN": "t"})):
        log = ctx.run_dir / f"{name}.log"
        run_process([sys.executable, "-c", SHOW], what=name, log_path=log, env=env)
        seen[name] = log.read_text().strip()
    (ctx.run_dir / "policy.json").write_text(json.dumps(seen))
    return toy.train(dataset, reward, engine_config, ctx)
"""


@pytest.fixture
def on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine as one without accelerators, whatever it has."""
    monkeypatch.setattr(threads.glob, "glob", lambda pattern: [])


def test_a_cpu_gets_the_policy_and_a_users_setting_wins(on_cpu: None) -> None:
    assert threads.thread_policy({}) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert threads.thread_policy({"OMP_WAIT_POLICY": "ACTIVE"}) == {}
    environ = {"PATH": "/bin"}
    assert threads.apply_thread_policy(environ) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert environ == {"PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE"}


def test_a_visible_accelerator_gets_no_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        threads.glob,
        "glob",
        lambda pattern: ["/dev/nvidia0"] if pattern.startswith("/dev/nvidia") else [],
    )
    assert threads.thread_policy({}) == {}
    # CUDA_VISIBLE_DEVICES hides the GPUs: the run trains on the CPU.
    for hidden in ("", "-1"):
        assert threads.thread_policy({"CUDA_VISIBLE_DEVICES": hidden}) == {
            "OMP_WAIT_POLICY": "PASSIVE"
        }


@pytest.mark.parametrize("inherit", [True, False])
def test_the_processes_an_engine_starts_get_the_policy(
    tmp_path: Path, on_cpu: None, monkeypatch: pytest.MonkeyPatch, inherit: bool
) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    env = None if inherit else {"PATH": os.environ.get("PATH", "")}
    log = tmp_path / "child.log"
    run_process(
        [sys.executable, "-c", "import os; print(os.environ.get('OMP_WAIT_POLICY'))"],
        what="child",
        log_path=log,
        env=env,
    )
    assert log.read_text().strip() == "PASSIVE"
    assert "OMP_WAIT_POLICY" not in os.environ  # the caller's own environment is left alone

    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    env = None if inherit else {**os.environ}
    run_process(
        [sys.executable, "-c", "import os; print(os.environ.get('OMP_WAIT_POLICY'))"],
        what="child",
        log_path=log,
        env=env,
    )
    assert log.read_text().split() == ["PASSIVE", "ACTIVE"]


def train_recording(tmp_path: Path, **env: str) -> dict[str, str]:
    """``aworld-train train`` (its console entry point, in a fresh process) of a toy job on the
    recording engine, with ``env`` added to an environment without OMP_WAIT_POLICY and with
    the GPUs hidden; the policy each of its processes had."""
    site = tmp_path / "site"
    site.mkdir()
    lay_out_engine(site, "recording", RECORDING_ENGINE)
    job = write_job(tmp_path, engine="recording", config={"max_steps": 2, "batch_size": 2})
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    done = subprocess.run(
        [sys.executable, "-c", "from aworld_train.cli import main; main()", "train", str(job)],
        env={**base, "PYTHONPATH": str(site), "CUDA_VISIBLE_DEVICES": "", **env},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    return json.loads((only_run_dir(tmp_path / "runs") / "policy.json").read_text())


@pytest.mark.slow
def test_a_cpu_training_runs_every_process_with_idle_threads_asleep(tmp_path: Path) -> None:
    assert train_recording(tmp_path) == {
        "trainer": "PASSIVE",
        "inherited": "PASSIVE",
        "own": "PASSIVE",
    }


@pytest.mark.slow
def test_a_users_own_thread_policy_reaches_every_process(tmp_path: Path) -> None:
    assert train_recording(tmp_path, OMP_WAIT_POLICY="ACTIVE") == {
        "trainer": "ACTIVE",
        "inherited": "ACTIVE",
        "own": "ACTIVE",
    }
