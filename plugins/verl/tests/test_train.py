"""train: the GPU preflight, the main_ppo command and launch.sh, VeRL's step lines as metrics,
signal forwarding, and resuming through VeRL's resume mode.

Where a test needs a child process that behaves like ``main_ppo`` (prints step lines, handles
SIGINT), it runs a short Python script written by the test: the supervision code under test is
the same, and no GPU is needed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from aworld_train.agent import AgentSpec
from aworld_train.errors import TrainingError
from aworld_train.reward import RewardFunction, RewardSpec
from aworld_train_verl import export, launch, training
from aworld_train_verl.gpus import visible_gpus
from conftest import Checks, dataset, make_ctx, repeat_rows

STEP_LINE = (
    "(TaskRunner pid=4242) step:3 - actor/pg_loss:-0.0123 - critic/score/mean:0.75 - "
    "response_length/mean:6.5 - training/global_step:3 - timing_s/gen:np.float64(1.5)"
)

CHILD = """
import signal, sys, time
stopped = []
signal.signal(signal.SIGINT, lambda *_: stopped.append(1))
signal.signal(signal.SIGTERM, lambda *_: stopped.append(1))
for step in (1, 2):
    print(f"step:{step} - actor/pg_loss:{step / 10} - critic/score/mean:{step / 4}", flush=True)
print("ready", flush=True)
deadline = time.time() + 30
while not stopped and time.time() < deadline:
    time.sleep(0.05)
print("stopping after a signal" if stopped else "never signalled", flush=True)
sys.exit(130 if stopped else 0)
"""


@pytest.fixture
def checked(tmp_path: Path, tiny_model: Path, reward_file: Path) -> Checks:
    """All four checks of a valid job, done."""
    return check_all(tmp_path, tiny_model, reward_file, save_steps=1)


def check_all(tmp_path: Path, model: Path, reward_file: Path, **config: Any) -> Checks:
    """All four checks of a valid job with these config keys, done."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("train_rewards", reward_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    checks = Checks(make_ctx(tmp_path / "run", model, **config))
    checks.ctx.run_dir.mkdir(parents=True)
    reward = RewardSpec(
        [RewardFunction("rewards.py:exact", module.exact, 1.0, f"{reward_file}:exact")]
    )
    checks.check_job(AgentSpec(), dataset(repeat_rows(8)), reward)
    return checks


@pytest.mark.skipif(visible_gpus() > 0, reason="this machine has a GPU")
def test_train_on_the_cpu_refuses_heads_vllm_cannot_run_in_seconds(checked: Checks) -> None:
    """The tiny model's heads are 16 wide: vLLM's CPU attention would fail on its first
    forward pass, inside Ray, minutes later."""
    started = time.monotonic()
    with pytest.raises(
        TrainingError,
        match=r"on the CPU: vLLM's CPU attention takes heads 32 to 512 wide; the model's are 16",
    ):
        checked.train()
    assert time.monotonic() - started < 5
    assert not (checked.ctx.run_dir / launch.LOG_NAME).exists(), "main_ppo was started"


@pytest.mark.skipif(visible_gpus() > 0, reason="this machine has a GPU")
def test_train_on_the_cpu_refuses_a_kl_term_in_seconds(
    tmp_path: Path, tiny_model: Path, reward_file: Path
) -> None:
    """``check`` passes (the job may train on a GPU); ``train`` here stops before Ray."""
    checks = check_all(tmp_path, tiny_model, reward_file, kl_coef=0.01)
    with pytest.raises(TrainingError, match=r"on the CPU VeRL trains without a reference model"):
        checks.train()
    assert not (checks.ctx.run_dir / launch.LOG_NAME).exists(), "main_ppo was started"


@pytest.mark.skipif(visible_gpus() > 0, reason="this machine has a GPU")
def test_a_job_of_several_gpus_still_needs_them(
    tmp_path: Path, tiny_model: Path, reward_file: Path
) -> None:
    """``auto`` trains on the CPU only a job of one GPU: one sized for more stops in one line."""
    checks = check_all(tmp_path, tiny_model, reward_file, verl={"trainer.n_gpus_per_node": 2})
    with pytest.raises(
        TrainingError, match=r"VeRL needs 2 GPU\(s\).*but 0 NVIDIA GPU\(s\) are visible here"
    ):
        checks.train()


def test_preflight_counts_gpus_against_nodes(
    checked: Checks, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = checked.config.config.copy()
    config.trainer.n_gpus_per_node = 2
    monkeypatch.setattr(launch, "visible_gpus", lambda: 1)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with pytest.raises(TrainingError, match=r"needs 2 GPU\(s\).*but 1 NVIDIA GPU"):
        launch.preflight(config, num_cpus=16)
    monkeypatch.setattr(launch, "visible_gpus", lambda: 2)
    launch.preflight(config, num_cpus=16)
    monkeypatch.setattr(launch, "visible_gpus", lambda: 0)
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    launch.preflight(config, num_cpus=1)  # the cluster holds the GPUs and CPUs


def test_preflight_refuses_a_ray_that_would_wait_forever_for_cpus(
    checked: Checks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main_ppo on 2 CPUs hangs in the transfer queue's placement group: 8 storage units × 1 CPU."""
    config = checked.config.config.copy()
    config.transfer_queue.backend.SimpleStorage.num_data_storage_units = 8  # VeRL's default
    monkeypatch.setattr(launch, "visible_gpus", lambda: 1)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    assert launch.ray_cpus_held(config) == 10
    with pytest.raises(
        TrainingError, match=r"Ray gets 2 CPU\(s\).*holds 10.*num_data_storage_units to at most 1"
    ):
        launch.preflight(config, num_cpus=2)
    launch.preflight(config, num_cpus=10)


def test_cuda_visible_devices_hides_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus() == 0


def test_launch_script_and_command_run_the_saved_config(checked: Checks) -> None:
    script = checked.ctx.run_dir / launch.LAUNCH_SCRIPT
    text = script.read_text()
    assert os.access(script, os.X_OK)
    assert "-m verl.trainer.main_ppo" in text and "--config-name=verl_config" in text
    subprocess.run(["bash", "-n", str(script)], check=True)
    command = launch.main_ppo_command(checked.ctx.run_dir, ["trainer.total_epochs=1"])
    assert command[1:3] == ["-m", "verl.trainer.main_ppo"]
    assert (
        f"--config-path={checked.ctx.run_dir}" in command
        and command[-1] == "trainer.total_epochs=1"
    )


@pytest.mark.slow
def test_main_ppo_reads_the_saved_config_and_runs_verls_own_validation(checked: Checks) -> None:
    """VeRL's own entry point, started by the standalone launch.sh, accepts the saved config;
    Hydra's ``--cfg job`` prints it and stops before Ray."""
    script = checked.ctx.run_dir / launch.LAUNCH_SCRIPT
    out = subprocess.run(
        ["bash", str(script), "--cfg", "job"],
        cwd=checked.ctx.run_dir.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"default_local_dir: {checked.ctx.run_dir / 'checkpoints'}" in out.stdout
    assert "name: vllm" in out.stdout
    # This machine's CPUs, or on the CPU platform the logical CPUs its Ray gets.
    assert f"num_cpus: {checked.config.config.ray_kwargs.ray_init.num_cpus}" in out.stdout
    joining = subprocess.run(
        ["bash", str(script), "--cfg", "job"],
        cwd=checked.ctx.run_dir.parent,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RAY_ADDRESS": "ray://head:10001"},
    )
    assert joining.returncode == 0, joining.stderr[-2000:]
    assert "num_cpus: null" in joining.stdout, "Ray refuses a CPU count when it joins a cluster"


def test_verls_step_line_becomes_metrics() -> None:
    step, metrics = launch.parse_step(STEP_LINE)
    assert step == 3
    assert metrics["actor/pg_loss"] == metrics["loss"] == -0.0123
    assert metrics["critic/score/mean"] == metrics["reward"] == 0.75
    assert metrics["response_length/mean"] == 6.5
    assert "timing_s/gen" not in metrics
    assert launch.parse_step("ray init kwargs: {'num_cpus': 2}") is None


def test_output_is_streamed_and_metrics_logged(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text(CHILD.replace("while not stopped", "while False"))
    logged: list[tuple[int, dict[str, float]]] = []
    echoed: list[str] = []
    launch.run(
        [sys.executable, str(child)],
        tmp_path,
        lambda s, m: logged.append((s, m)),
        echo=echoed.append,
    )
    assert [s for s, _ in logged] == [1, 2]
    assert logged[1][1]["reward"] == 0.5
    assert "ready" in echoed
    assert "ready" in (tmp_path / launch.LOG_NAME).read_text()


def test_a_failing_child_is_a_training_error_with_its_last_line(tmp_path: Path) -> None:
    child = tmp_path / "child.py"
    child.write_text(
        "print('Total available GPUs 0 is less than total desired GPUs 1'); raise SystemExit(1)"
    )
    with pytest.raises(
        TrainingError, match=r"exited with status 1: Total available GPUs 0.*verl_train.log"
    ):
        launch.run([sys.executable, str(child)], tmp_path, lambda *_: None, echo=lambda _: None)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_is_forwarded_and_the_run_ends_interrupted(
    tmp_path: Path, signum: signal.Signals
) -> None:
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    echoed: list[str] = []
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def interrupt_when_ready(line: str) -> None:
        echoed.append(line)
        if line == "ready":
            threading.Timer(0.2, os.kill, (os.getpid(), signum)).start()

    with pytest.raises(KeyboardInterrupt, match=signum.name):
        launch.run(
            [sys.executable, str(child)], tmp_path, lambda *_: None, echo=interrupt_when_ready
        )
    assert echoed[-1] == "stopping after a signal"
    assert {sig: signal.getsignal(sig) for sig in before} == before


def test_resume_points_verl_at_the_last_checkpoint(tmp_path: Path) -> None:
    old = tmp_path / "old-run"
    (old / "checkpoints" / "global_step_4").mkdir(parents=True)
    (old / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("4")
    step, checkpoint = launch.last_checkpoint(old)
    assert (step, checkpoint) == (4, old / "checkpoints" / "global_step_4")
    assert launch.resume_overrides(checkpoint) == [
        "trainer.resume_mode=resume_path",
        f"trainer.resume_from_path={checkpoint}",
    ]


def test_a_checkpoint_cut_short_is_passed_over_with_a_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = tmp_path / "old-run"
    for step in (2, 4):  # VeRL was writing step 4 when the run stopped
        (old / "checkpoints" / f"global_step_{step}").mkdir(parents=True)
    (old / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("2")
    with caplog.at_level("WARNING", logger="aworld_train"):
        assert launch.last_checkpoint(old) == (2, old / "checkpoints" / "global_step_2")
    assert [r.getMessage() for r in caplog.records] == [
        f"{old / 'checkpoints' / 'global_step_4'} was cut short while being saved "
        "(latest_checkpointed_iteration.txt does not name it): resuming from "
        f"{old / 'checkpoints' / 'global_step_2'}, the last whole checkpoint"
    ]


def test_resume_without_a_checkpoint_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(TrainingError, match="no VeRL checkpoint to resume from"):
        launch.last_checkpoint(tmp_path)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("9")
    with pytest.raises(TrainingError, match="names step '9', but .*global_step_9 does not exist"):
        launch.last_checkpoint(tmp_path)


def test_train_passes_resume_and_cpus_to_main_ppo(
    checked: Checks, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With the preflight passed, train runs main_ppo on the saved config plus these overrides."""
    old = tmp_path / "old-run"
    (old / "checkpoints" / "global_step_2").mkdir(parents=True)
    (old / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("2")
    checked.ctx.resume_from = old
    seen: dict[str, Any] = {}
    monkeypatch.setattr(launch, "preflight", lambda config, num_cpus, gpus: None)
    monkeypatch.setattr(training, "check_cpu_training", lambda config: None)  # heads 16 wide
    monkeypatch.setattr(
        launch,
        "run",
        lambda command, run_dir, on_step, variables, **_: (
            seen.update(command=command, variables=variables) or on_step(1, {"reward": 0.5})
        ),
    )
    monkeypatch.setattr(export, "export_model", lambda run_dir: seen.update(exported=run_dir))
    result = checked.train()
    assert seen["exported"] == checked.ctx.run_dir, "the last checkpoint becomes the run's model"
    assert f"trainer.resume_from_path={old / 'checkpoints' / 'global_step_2'}" in seen["command"]
    # No GPU here: main_ppo runs under the CPU platform, with more logical CPUs than cores.
    assert "ray_kwargs.ray_init.num_cpus=8" in seen["command"]
    assert seen["variables"]["VERL_PLATFORM"] == "cpu"
    assert result["reward"] == 0.5
    assert (
        json.loads((checked.ctx.run_dir / "metrics.jsonl").read_text().splitlines()[0])["step"] == 1
    )


def test_train_joining_a_cluster_skips_the_local_checks_and_the_cpu_count(
    checked: Checks, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    monkeypatch.setattr(
        launch, "run", lambda command, run_dir, on_step, **_: seen.update(command=command)
    )
    monkeypatch.setattr(export, "export_model", lambda run_dir: None)
    checked.train()
    assert "ray_kwargs.ray_init.num_cpus=null" in seen["command"]
