"""A processor written for AWorld Train runs unchanged: it receives what the user passed.

Runs in the venv with the `aworld` extra. The processor below is written in the style of AWorld
Train's own ``VerlTrainer`` (``train/adapter/verl/verl_trainer.py``): it reads the AWorld
agent's ``conf.llm_config``, ``name()`` and ``system_prompt``, takes the reward function's
``__name__`` and its file from ``inspect.getfile``, opens the config path itself with yaml,
fills in the keys the config leaves ``null``, and writes its files under ``self.run_path``.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aworld", reason="needs the aworld extra: pip install aworld-train[aworld]")

import yaml  # noqa: E402
from aworld_train import AgentTrainer, TrainerProcessor  # noqa: E402

CALCULATOR = Path(__file__).resolve().parents[2] / "examples" / "calculator_agent" / "server.py"

# A VeRL-style config as AWorld Train's examples write it: the keys the framework fills in
# (data files, the agent loop, the reward function, the output folder) are left null.
VERL_STYLE_CONFIG = """\
data:
  train_files: null
  val_files: null
  train_batch_size: 4
  max_prompt_length: 512
actor_rollout_ref:
  model:
    path: Qwen/Qwen3-0.6B
  rollout:
    name: vllm
    agent:
      agent_loop_config_path: null
custom_reward_function:
  path: null
  name: null
trainer:
  default_local_dir: null
  total_epochs: 1
"""


def gaia_style_reward(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None
) -> float:
    """1.0 when the text inside the last ``<answer>`` tags is the ground truth."""
    answers = re.findall(r"<answer>(.*?)</answer>", solution_str, re.DOTALL)
    answer = answers[-1] if answers else solution_str
    return 1.0 if answer.strip() == str(ground_truth).strip() else 0.0


class AWorldStyleVerlTrainer(TrainerProcessor):
    """A processor as AWorld Train's users write them: no knowledge of aworld_train's own
    forms, only the objects and paths the user handed to ``AgentTrainer``."""

    def check_agent(self, agent: Any) -> str:
        settings = dict(agent.conf.llm_config)
        for key in ("llm_provider", "llm_model_name", "llm_base_url", "llm_api_key", "params"):
            settings.pop(key, None)
        loop = Path(self.run_path) / f"{agent.name()}.py"
        loop.write_text(
            f"SYSTEM_PROMPT = {agent.system_prompt!r}\n"
            f"MCP_CONFIG = {agent.mcp_config!r}\nSETTINGS = {settings!r}\n"
        )
        self.agent_yaml = f"{self.run_path}/agent.yaml"
        Path(self.agent_yaml).write_text(
            f"- name: {agent.name()}\n  _target_: {agent.name()}.AgentLoop\n"
        )
        return self.agent_yaml

    def check_dataset(self, dataset: Any, test_dataset: Any = None) -> None:
        if not (isinstance(dataset, str) and dataset.endswith(".parquet")):
            raise ValueError("VeRL only support parquet dataset now")
        self.train_dataset_path = dataset
        self.test_dataset_path = test_dataset if isinstance(test_dataset, str) else None

    def check_reward(self, reward_func: Any) -> tuple[str, str]:
        if len(inspect.signature(reward_func).parameters) != 4:
            raise ValueError("VeRL reward function must have 4 parameters")
        self.reward_file_path = inspect.getfile(reward_func)
        self.reward_func_name = reward_func.__name__
        return self.reward_file_path, self.reward_func_name

    def check_config(self, config: Any) -> dict[str, Any]:
        with open(config) as handle:
            data = yaml.safe_load(handle)
        rollout = data["actor_rollout_ref"]["rollout"]
        rollout["agent"]["agent_loop_config_path"] = (
            rollout["agent"]["agent_loop_config_path"] or self.agent_yaml
        )
        reward = data["custom_reward_function"]
        reward["name"] = reward["name"] or self.reward_func_name
        reward["path"] = reward["path"] or self.reward_file_path
        data["data"]["train_files"] = data["data"]["train_files"] or [self.train_dataset_path]
        data["data"]["val_files"] = data["data"]["val_files"] or [self.test_dataset_path]
        data["trainer"]["default_local_dir"] = (
            data["trainer"]["default_local_dir"] or f"{self.run_path}/checkpoints"
        )
        with open(f"{self.run_path}/final_trainer.yaml", "w") as handle:
            yaml.safe_dump(data, handle)
        self.config = data
        return data

    def train(self) -> None:
        if not self.initialized:
            raise RuntimeError("Please check all components before training")
        Path(self.config["trainer"]["default_local_dir"]).mkdir(parents=True)
        with open(f"{self.run_path}/trained.json", "w") as handle:
            json.dump({"model": self.config["actor_rollout_ref"]["model"]["path"]}, handle)


def make_agent() -> Any:
    """An AWorld agent as AWorld Train's GAIA example builds one: provider ``verl``, no model
    name of its own, an MCP server (here the local calculator)."""
    from aworld.agents.llm_agent import Agent
    from aworld.config.conf import AgentConfig

    return Agent(
        name="gaia_agent",
        desc="answers GAIA-style questions",
        conf=AgentConfig(llm_provider="verl", top_k=80),
        system_prompt="Use the tools; answer in <answer></answer>.",
        mcp_servers=["calculator"],
        mcp_config={
            "mcpServers": {"calculator": {"command": sys.executable, "args": [str(CALCULATOR)]}}
        },
    )


def write_parquet(path: Path) -> Path:
    import datasets

    rows = [
        {
            "prompt": [{"role": "user", "content": f"What is {a} * {b}?"}],
            "ground_truth": str(a * b),
            "data_source": "gaia_style",
        }
        for a, b in ((2, 3), (4, 5), (6, 7))
    ]
    datasets.Dataset.from_list(rows).to_parquet(path)
    return path


@pytest.fixture
def aworld_verl() -> Any:
    AgentTrainer.register_processor("aworld_verl", AWorldStyleVerlTrainer)
    yield AWorldStyleVerlTrainer
    AgentTrainer.unregister_processor("aworld_verl")


def test_an_aworld_train_processor_runs_unchanged_on_what_the_user_passed(
    aworld_verl: type, tmp_path: Path
) -> None:
    """Gap 6: the processor gets the AWorld Agent, the reward callable, the parquet paths and
    the VeRL-style config path with its null keys, and trains."""
    (tmp_path / "grpo_trainer.yaml").write_text(VERL_STYLE_CONFIG)
    data = write_parquet(tmp_path / "train.parquet")
    agent = make_agent()
    trainer = AgentTrainer(
        agent=agent,
        config="grpo_trainer.yaml",
        reward_func=gaia_style_reward,
        train_dataset="train.parquet",
        test_dataset="train.parquet",
        run_path=tmp_path / "runs",
        train_engine_name="aworld_verl",
        base_dir=tmp_path,
    )
    run = trainer.run_dir.path
    processor = trainer.manager.get_plugin("aworld_verl").processor
    assert processor.initialized is False, "train() marks it"
    trainer.train()

    final = yaml.safe_load((run / "final_trainer.yaml").read_text())
    assert final["data"]["train_files"] == [str(data)]
    assert final["data"]["val_files"] == [str(data)]
    assert final["actor_rollout_ref"]["rollout"]["agent"]["agent_loop_config_path"] == str(
        run / "agent.yaml"
    )
    assert final["custom_reward_function"] == {"path": __file__, "name": "gaia_style_reward"}
    assert final["trainer"]["default_local_dir"] == f"{run}/checkpoints"
    loop = (run / "gaia_agent.py").read_text()
    assert "Use the tools; answer in <answer></answer>." in loop and "'top_k': 80" in loop
    assert json.loads((run / "trained.json").read_text()) == {"model": "Qwen/Qwen3-0.6B"}
    assert (run / "checkpoints").is_dir()
    assert json.loads((run / "manifest.json").read_text())["status"] == "completed"
    # The core's own checks ran on the same inputs before the processor's.
    assert [c.module for c in trainer.checks if c.by == "core"] == [
        "config",
        "agent",
        "model",
        "tools",
        "dataset",
        "test dataset",
        "reward",
    ]
    assert trainer.context.tools.names == ["add", "multiply", "divide"]


WHOLE_VERL_CONFIG = {
    "data": {"train_files": None, "val_files": None, "train_batch_size": 8},
    "actor_rollout_ref": {
        "model": {"path": None},
        "actor": {"optim": {"lr": 1e-6}},
        "rollout": {"n": 4, "agent": {"agent_loop_config_path": None}},
    },
    "critic": {"enable": False},
    "reward_model": {"enable": False},
    "custom_reward_function": {"path": None, "name": None},
    "algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False},
    "trainer": {"total_epochs": 1, "default_local_dir": None},
    "ray_kwargs": {"ray_init": {"num_cpus": None}},
}


class KeepsConfig(AWorldStyleVerlTrainer):
    def check_config(self, config: Any) -> None:
        self.given_config = config


def test_a_whole_verl_config_is_the_processors_own_format(tmp_path: Path) -> None:
    """Gap 3 for processors: a whole VeRL config (algorithm as a mapping too) is not refused;
    the processor receives its path, or with -o the mapping with the overrides merged in."""
    AgentTrainer.register_processor("keeps", KeepsConfig)
    try:
        (tmp_path / "ppo_trainer.yaml").write_text(yaml.safe_dump(WHOLE_VERL_CONFIG))
        write_parquet(tmp_path / "train.parquet")
        job = dict(
            agent=make_agent(),
            config="ppo_trainer.yaml",
            reward_func=gaia_style_reward,
            train_dataset="train.parquet",
            run_path=tmp_path / "runs",
            train_engine_name="keeps",
            base_dir=tmp_path,
            check_only=True,
        )
        trainer = AgentTrainer(**job)
        processor = trainer.manager.get_plugin("keeps").processor
        assert processor.given_config == str(tmp_path / "ppo_trainer.yaml")
        assert trainer.context.config.engine_section() == WHOLE_VERL_CONFIG
        assert trainer.context.config.algorithm == "grpo"

        trainer = AgentTrainer(**job, overrides=["trainer.total_epochs=3", "max_steps=5"])
        given = trainer.manager.get_plugin("keeps").processor.given_config
        assert given["trainer"] == {"total_epochs": 3, "default_local_dir": None}
        assert given["max_steps"] == 5 and given["algorithm"] == WHOLE_VERL_CONFIG["algorithm"]
        assert trainer.context.config.max_steps == 5
    finally:
        AgentTrainer.unregister_processor("keeps")
