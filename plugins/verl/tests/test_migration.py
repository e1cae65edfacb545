"""AWorld Train's GAIA example moved over (``examples/gaia_verl``): a job written for AWorld
Train passes every check with only its import changed, and the VeRL config the engine saves is
complete — VeRL's own dataset, agent-loop and reward code read it.

The example is copied into a temporary folder and its own ``create_dataset.py`` builds the data
and the tiny model there, so no run directory or generated file lands in the repository. No GPU
is visible to the runs (``CUDA_VISIBLE_DEVICES=""``): on this machine, as on a laptop, the job of
one GPU would train on the CPU, but the stand-in model's heads (16 wide) are not ones vLLM's CPU
build runs, so they stop at ``train`` with one line, after the run directory and its saved config
were written.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import LocalActorHandle
from omegaconf import OmegaConf
from rollouts import ScriptedTokenClient, build_tool_model

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "gaia_verl"
EXECUTABLE = Path(sys.executable).with_name("aworld-train")
NO_GPU = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
AWORLD_LOOP = "aworld_train_verl.aworld_loop.AWorldAgentLoop"


@dataclass
class Run:
    """A training command that stopped at ``train``: what it printed, and its run directory."""

    result: subprocess.CompletedProcess[str]
    runs: Path

    @property
    def run_dir(self) -> Path:
        made = [path for path in self.runs.iterdir() if path.is_dir()] if self.runs.is_dir() else []
        assert len(made) == 1, f"one run directory in {self.runs}, got {made}\n{self.output}"
        return made[0]

    @property
    def output(self) -> str:
        return self.result.stdout[-3000:] + self.result.stderr[-3000:]


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the example, with the data and model its ``create_dataset.py`` writes."""
    examples = tmp_path_factory.mktemp("examples")
    folder = examples / "gaia_verl"
    shutil.copytree(
        EXAMPLE,
        folder,
        ignore=shutil.ignore_patterns("build", "data", "runs", "logs", "__pycache__"),
    )
    subprocess.run(
        [sys.executable, str(folder / "create_dataset.py")],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return folder


@pytest.fixture(scope="module")
def main_run(example: Path) -> Run:
    """``python main.py``, as AWorld's example is run, in the example's folder."""
    result = subprocess.run(
        [sys.executable, "main.py"],
        cwd=example,
        env=NO_GPU,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return Run(result, example / "runs")


@pytest.fixture(scope="module")
def cli_run(example: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """``aworld-train train job.yaml``, its run directory under a temporary folder."""
    runs = tmp_path_factory.mktemp("cli-runs")
    result = subprocess.run(
        [str(EXECUTABLE), "train", str(example / "job.yaml"), "--run-path", str(runs)],
        cwd=runs,
        env=NO_GPU,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return Run(result, runs)


@pytest.fixture(params=["main.py", "aworld-train train job.yaml"])
def stopped_run(request: pytest.FixtureRequest) -> Run:
    return request.getfixturevalue("main_run" if request.param == "main.py" else "cli_run")


def saved_config(run: Run) -> Any:
    path = run.run_dir / "verl_config.yaml"
    assert path.is_file(), run.output
    return OmegaConf.load(path)


def as_list(value: Any) -> list[str]:
    """VeRL's data files: one path or a list of them."""
    return [value] if isinstance(value, str) else list(value)


@pytest.mark.slow
def test_the_gaia_job_file_passes_check_as_written(example: Path, tmp_path: Path) -> None:
    """A whole VeRL config as `config:`, VeRL-layout parquet, a bare reward file and an AWorld
    agent factory: `check` passes with the job exactly as the example writes it."""
    result = subprocess.run(
        [str(EXECUTABLE), "check", str(example / "job.yaml")],
        cwd=tmp_path,
        env=NO_GPU,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "all checks passed" in result.stdout
    assert "(look_up, calculate)" in result.stdout, "the local MCP server's tools were listed"


@pytest.mark.slow
def test_main_py_in_aworlds_shape_passes_every_check_then_says_in_one_line_why_it_cannot_train_here(
    main_run: Run,
) -> None:
    """AWorld's main.py shape with only the import changed: every check passes (the run
    directory becomes a run only then), and train() stops with VeRL's one line, no traceback."""
    assert main_run.result.returncode == 2, main_run.output
    errors = [line for line in main_run.result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, main_run.output
    assert (
        errors[0].startswith("error: on the CPU: vLLM's CPU attention takes heads 32 to 512 wide")
        and "the model's are 16" in errors[0]
    )
    assert "Traceback" not in main_run.result.stderr
    manifest = json.loads((main_run.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed" and "vLLM's CPU attention" in manifest["error"]


@pytest.mark.slow
def test_the_cli_train_of_the_job_file_stops_at_the_same_line(cli_run: Run) -> None:
    """The job file trains as main.py does: every check passes, then VeRL's one line, exit 2."""
    assert cli_run.result.returncode == 2, cli_run.output
    assert cli_run.result.stderr.strip().splitlines()[-1].startswith("error: on the CPU: vLLM's")


@pytest.mark.slow
def test_the_gaia_job_trains_a_step_on_the_cpu_with_a_stand_in_model_vllm_runs(
    example: Path, tmp_path: Path
) -> None:
    """The job as written, with a stand-in policy whose heads (32 wide) vLLM's CPU build runs:
    VeRL's own trainer takes one GRPO step, each episode the AWorld agent's, through the
    plugin's agent loop and the example's MCP server, and the run's model is converted."""
    model = build_tool_model(tmp_path / "model", num_heads=2)
    result = subprocess.run(
        [
            str(EXECUTABLE),
            "train",
            str(example / "job.yaml"),
            "--run-path",
            str(tmp_path / "runs"),
            "-o",
            f"model={model}",
            "-o",
            "max_steps=1",
            "-o",
            "max_completion_length=128",
        ],
        cwd=tmp_path,
        env=NO_GPU,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    run_dir = next((tmp_path / "runs").glob("*-verl-*"))
    row = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert row["step"] == 1 and "actor/pg_loss" in row
    assert (run_dir / "model" / "config.json").is_file()


@pytest.mark.slow
def test_the_saved_config_names_the_data_the_agent_loop_the_validated_model_and_the_reward(
    stopped_run: Run, example: Path
) -> None:
    """The framework-filled keys the example leaves null are the engine's wiring in the saved
    config, and the model is the folder `check` validated."""
    cfg = saved_config(stopped_run)
    run_dir = stopped_run.run_dir
    train_files, val_files = as_list(cfg.data.train_files), as_list(cfg.data.val_files)
    for path in train_files + val_files:
        assert (
            Path(path).is_file()
            and path.endswith(".parquet")
            and Path(path).is_relative_to(run_dir)
        ), path
    assert train_files != val_files, "the test set validates"

    loop_file = Path(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    assert loop_file.is_file()
    assert [entry["_target_"] for entry in OmegaConf.load(loop_file)] == [AWORLD_LOOP]

    assert cfg.actor_rollout_ref.model.path == str((example / "build" / "model").resolve())
    assert Path(cfg.trainer.default_local_dir).is_relative_to(run_dir)
    assert cfg.trainer.n_gpus_per_node == 1 and cfg.actor_rollout_ref.rollout.top_p == 1.0


def test_verls_reward_loader_finds_the_users_gaia_reward_in_the_saved_config(
    stopped_run: Run,
) -> None:
    """VeRL moves the legacy `custom_reward_function` keys (which the example leaves null) to
    `reward.custom_reward_function` and loads the function from there: it is the example's
    `gaia_reward_func`, scoring the answer in tags."""
    from verl.experimental.reward_loop import migrate_legacy_reward_impl
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg = migrate_legacy_reward_impl(saved_config(stopped_run))
    assert Path(cfg.reward.custom_reward_function.path).is_file()
    reward = get_custom_reward_fn(cfg)

    def score(solution: str) -> float:
        result = reward(
            data_source="gaia",
            solution_str=solution,
            ground_truth="498",
            extra_info={"task_id": "landmarks-test-001", "level": 1},
        )
        return float(result["score"] if isinstance(result, dict) else result)

    assert score("828 - 330 = 498, so <answer>498 m</answer>") == 1.0
    assert score("<answer>497</answer>") == 0.0
    assert score("498") == 0.0, "no answer tags, no reward"


def test_verls_dataset_reads_the_saved_data_files_as_the_trainer_would(main_run: Run) -> None:
    """VeRL's own RLHFDataset reads the converted parquet the saved config names: every question,
    its GAIA fields kept, each row naming the agent loop of the AWorld agent."""
    from aworld_train_verl.agent import load_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    cfg = saved_config(main_run)
    tokenizer = load_tokenizer(str(cfg.actor_rollout_ref.model.path))
    data = RLHFDataset(
        data_files=as_list(cfg.data.train_files), tokenizer=tokenizer, config=cfg.data
    )
    assert len(data) == 6, "every question fits max_prompt_length"
    row = data[0]
    assert row["raw_prompt"][-1]["content"].startswith("How many years passed between")
    assert row["data_source"] == "gaia" and row["reward_model"]["ground_truth"] == "48"
    assert row["extra_info"]["task_id"] == "landmarks-train-000" and row["extra_info"]["level"] == 1
    loops = OmegaConf.load(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    assert {str(data[i]["agent_name"]) for i in range(len(data))} == {
        entry["name"] for entry in loops
    }


LANDMARKS = ("Statue of Liberty", "Burj Khalifa", "Eiffel Tower", "Big Ben", "Golden Gate Bridge")


class GaiaTokenClient(ScriptedTokenClient):
    """A fake policy (no GPU for vLLM here) that works a question the way the system prompt asks:
    it looks up each landmark the question names, has the calculator take the difference of the
    facts the server returned, and answers with what the calculator said. Its answer can only be
    right when both MCP tools really ran."""

    def _reply(self, prompt: str) -> str:
        question = re.search(
            r"<\|im_start\|>user\n(?!<tool_response>)(.*?)<\|im_end\|>", prompt, re.DOTALL
        )
        assert question is not None, prompt
        named = sorted(
            (question.group(1).index(name), name) for name in LANDMARKS if name in question.group(1)
        )
        results = re.findall(r"<tool_response>\n(.*?)\n</tool_response>", prompt, re.DOTALL)
        if len(results) < len(named):
            return tool_call("look_up", {"landmark": named[len(results)][1]})
        if len(results) == len(named):
            key = "completed" if "years" in question.group(1) else "height_m"
            low, high = sorted(json.loads(result)[key] for result in results)
            return tool_call("calculate", {"expression": f"{high} - {low}"})
        return f"So the answer is <answer>{results[-1]}</answer>"


def tool_call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


@pytest.mark.slow
def test_verls_agent_loop_runs_the_aworld_agent_from_the_saved_config_and_its_reward_scores_it(
    main_run: Run,
) -> None:
    """The pipeline a GPU run goes through, from main.py's saved config alone: VeRL's
    AgentLoopWorker registers the agent loop it names, which runs the user's AWorld agent with
    its own MCP server; VeRL's reward loop scores each episode with gaia_reward_func."""
    from aworld_train_verl.agent import load_tokenizer
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    cfg = saved_config(main_run)
    tokenizer = load_tokenizer(str(cfg.actor_rollout_ref.model.path))
    data = RLHFDataset(data_files=as_list(cfg.data.val_files), tokenizer=tokenizer, config=cfg.data)
    batch = DataProto.from_single_dict(collate_fn([data[i] for i in range(len(data))]))
    batch.non_tensor_batch["uid"] = np.array(
        [str(uuid.uuid4()) for _ in range(len(batch))], dtype=object
    )
    client = GaiaTokenClient(tokenizer)

    async def rollout() -> Any:
        worker = AgentLoopWorker(
            cfg,
            llm_client=client,
            reward_loop_worker_handles=[LocalActorHandle(RewardLoopWorker(cfg))],
        )
        return await worker.generate_sequences(batch)

    output = asyncio.run(rollout())
    assert output.non_tensor_batch["agent_failure"].tolist() == [None, None]
    assert output.non_tensor_batch["tool_calls"].tolist() == [3, 3], (
        "two look-ups and a calculation"
    )
    first_prompts = [prompts[0] for prompts in client.prompts.values()]
    assert all(
        "<answer>ANSWER</answer>" in prompt and '"name": "look_up"' in prompt
        for prompt in first_prompts
    ), "the agent's own system prompt and tools"
    assert output.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 1.0], (
        "124 and 498, from the server's facts"
    )
