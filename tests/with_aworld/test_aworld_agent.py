"""A real AWorld ``Agent`` maps onto the agent spec. Runs in the venv with the `aworld` extra."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aworld", reason="needs the aworld extra: pip install aworld-train[aworld]")

from aworld_train import AgentTrainer, TrainerProcessor  # noqa: E402
from aworld_train.agent import load_agent  # noqa: E402

CALCULATOR = Path(__file__).resolve().parents[2] / "examples" / "calculator_agent" / "server.py"


def make_agent() -> Any:
    from aworld.agents.llm_agent import Agent
    from aworld.config.conf import AgentConfig

    return Agent(
        name="solver",
        conf=AgentConfig(
            llm_provider="openai",
            llm_model_name="tiny-policy",
            llm_base_url="http://127.0.0.1:9/v1",
            llm_api_key="sk-do-not-log",
            llm_temperature=0.6,
        ),
        system_prompt="Solve the task; answer in <answer></answer>.",
        mcp_servers=["calculator"],
        mcp_config={
            "mcpServers": {"calculator": {"command": sys.executable, "args": [str(CALCULATOR)]}}
        },
    )


def test_an_aworld_agent_maps_onto_the_spec() -> None:
    agent = make_agent()
    spec = load_agent(agent)
    assert spec.name == "solver"
    assert spec.model == "tiny-policy"
    assert spec.system_prompt.startswith("Solve the task")
    assert spec.llm_temperature == 0.6
    assert spec.llm_base_url == "http://127.0.0.1:9/v1"
    assert spec.mcp_servers == ["calculator"]
    assert "calculator" in spec.mcp_config["mcpServers"]
    assert spec.uses_tools
    assert spec.source is agent
    assert spec.max_turns == agent.max_loop_steps


def test_a_subclass_of_an_aworld_agent_is_an_aworld_agent() -> None:
    from aworld.agents.llm_agent import Agent

    class Careful(Agent):
        """An agent of the user's own, as AWorld agents often are."""

    agent = make_agent()
    agent.__class__ = Careful
    assert load_agent(agent).source is agent


class Capture(TrainerProcessor):
    seen: list[Any] = []

    def check_agent(self, agent: Any) -> None:
        Capture.seen.append(agent)

    def check_dataset(self, dataset: Any, test_dataset: Any = None) -> None:
        pass

    def check_reward(self, reward_func: Any) -> None:
        pass

    def check_config(self, config: Any) -> None:
        pass

    def train(self) -> None:
        self.context.metrics.log(1, {"reward": 0.0})


def test_an_aworld_agent_trains_through_a_processor_and_its_key_is_redacted(tmp_path: Path) -> None:
    AgentTrainer.register_processor("capture", Capture)
    try:
        trainer = AgentTrainer(
            agent=make_agent(),
            reward_func="exact_match",
            train_dataset=[{"prompt": "2+2?", "ground_truth": "4"}],
            run_path=tmp_path,
            train_engine_name="capture",
        )
        trainer.train()
    finally:
        AgentTrainer.unregister_processor("capture")
    assert Capture.seen[-1].name() == "solver", "the processor gets the AWorld Agent itself"
    tools = trainer.context.tools
    assert "multiply" in tools.names
    assert tools.call("multiply", {"a": 12, "b": 34}).strip() == "408"
    written = "".join(p.read_text() for p in trainer.run_dir.path.glob("*.yaml"))
    written += (trainer.run_dir.path / "manifest.json").read_text()
    assert "sk-do-not-log" not in written
    assert "llm_api_key: '***'" in written


@pytest.mark.parametrize("config_model", [None, "org/policy"])
def test_an_aworld_agents_llm_model_name_is_the_policy_only_when_nothing_else_names_one(
    tmp_path: Path, config_model: str | None
) -> None:
    """AWorld Train sets an agent's llm_model_name aside when it trains (it is the name the
    agent calls its server by), so a config model beside it is no disagreement; an agent file's
    ``model`` beside another is (tests/test_config.py)."""
    AgentTrainer.register_processor("capture", Capture)
    try:
        trainer = AgentTrainer(
            agent=make_agent(),
            reward_func="exact_match",
            train_dataset=[{"prompt": "2+2?", "ground_truth": "4"}],
            config={"model": config_model} if config_model else None,
            train_engine_name="capture",
            check_only=True,
        )
    finally:
        AgentTrainer.unregister_processor("capture")
    assert trainer.context.config.model == (config_model or "tiny-policy")
