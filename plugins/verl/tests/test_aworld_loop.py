"""An AWorld ``Agent``, unmodified, trained on VeRL: VeRL's own ``AgentLoopWorker`` runs the
plugin's AWorld agent loop on the CPU through the core's agent runtime; the agent runs through
AWorld's ``Runners`` with its own MCP runtime (the calculator example's server over stdio) and
calls the policy through the runtime's OpenAI-compatible loopback endpoint. Only the token
generator is fake (see :mod:`rollouts`). Needs the plugin's ``aworld`` extra, which ``make``
installs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from aworld.agents.llm_agent import Agent
from aworld_train.agent import load_agent
from aworld_train.errors import AgentError
from aworld_train.tools import close_sessions, resolve_tools
from aworld_train_verl import agent_loop
from rollouts import EXAMPLE, assert_exact_tool_episodes, model_tokens, rollout

SYSTEM_PROMPT = (
    "You are a calculator agent. Call the tools for every step; answer as <answer>NUMBER</answer>."
)
SECRET = "sk-never-leaves-the-driver"


def calculator_agent(agent_class: Any = None) -> Any:
    """An AWorld agent as a user writes one, with the example's calculator MCP server."""
    from aworld.config.conf import AgentConfig

    return (agent_class or Agent)(
        name="calculator-agent",
        conf=AgentConfig(
            llm_provider="openai",
            llm_model_name="calculator-policy",
            llm_base_url="http://127.0.0.1:9/v1",
            llm_api_key=SECRET,
            llm_temperature=1.0,
        ),
        system_prompt=SYSTEM_PROMPT,
        mcp_config={
            "mcpServers": {
                "calculator": {"command": sys.executable, "args": [str(EXAMPLE / "server.py")]}
            }
        },
        mcp_servers=["calculator"],
        max_loop_steps=4,
    )


class FailingAgent(Agent):
    """An agent whose every step raises, at the top of its module as a user writes one (the
    runtime copies the agent for each episode by pickling it, which finds its class by name)."""

    async def async_policy(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("planted agent failure")


def run_rows(
    tmp_path: Path, model: Path, agent: Any, rows: list[dict[str, Any]]
) -> tuple[Any, Any]:
    spec = load_agent(agent)
    try:
        output, client, _ = rollout(tmp_path, model, spec, resolve_tools(spec, EXAMPLE), rows)
    finally:
        close_sessions()
    return output, client


@pytest.mark.slow
def test_an_aworld_agent_runs_unmodified_and_trains_on_the_models_exact_tokens(
    tmp_path: Path, tool_model: Path
) -> None:
    agent = calculator_agent()
    rows = [
        {"prompt": f"What is {a} * {b}?", "ground_truth": str(a * b), "data_source": "calculator"}
        for a, b in ((6411, 876), (123, 456))
    ]
    output, client = run_rows(tmp_path, tool_model, agent, rows)

    assert_exact_tool_episodes(output, client, rows)
    # The prompt is what the agent sent: its own system prompt and its tools.
    first_prompts = [prompts[0] for prompts in client.prompts.values()]
    assert all(
        SYSTEM_PROMPT in prompt and '"name": "multiply"' in prompt for prompt in first_prompts
    )
    assert output.non_tensor_batch["tool_calls"].tolist() == [1, 1]
    # The agent's own API key stays in the driver: not in the run directory, still on the agent.
    assert SECRET.encode() not in (tmp_path / "run" / "agent.pkl").read_bytes()
    assert agent.conf.llm_config.llm_api_key == SECRET


@pytest.mark.slow
def test_an_aworld_agent_that_fails_or_times_out_scores_0_and_the_step_goes_on(
    tmp_path: Path, tool_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agent_loop, "EPISODE_TIMEOUT", 5.0)
    rows = [
        {"prompt": "What is 12 * 34?", "ground_truth": "408", "data_source": "calculator"},
        {"prompt": "Sleep 60 seconds", "ground_truth": "7", "data_source": "calculator"},
    ]
    output, client = run_rows(tmp_path, tool_model, calculator_agent(), rows)

    failures = output.non_tensor_batch["agent_failure"].tolist()
    assert failures == [None, "the agent did not finish within 5 s"]
    assert output.non_tensor_batch["agent_failed"].tolist() == [0.0, 1.0]
    # The slow turn was cut short: nothing of it is trained on, and the episode scores 0.
    generated, _, _ = model_tokens(output, 1)
    assert generated == []
    assert output.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 0.0]

    output, client = run_rows(
        tmp_path / "failing",
        tool_model,
        calculator_agent(FailingAgent),
        [{"prompt": "What is 2 * 3?", "ground_truth": "6", "data_source": "calculator"}],
    )
    assert output.non_tensor_batch["agent_failure"].tolist() == [
        "RuntimeError: the agent's task failed: planted agent failure"
    ]
    assert client.returned == {}, "the agent never called its model"
    assert output.batch["rm_scores"].sum(dim=-1).tolist() == [0.0]


def test_an_aworld_agent_that_cannot_reach_the_workers_fails_at_check_time(
    tmp_path: Path, tool_model: Path
) -> None:
    import threading

    from conftest import Checks, make_ctx

    agent = calculator_agent()
    agent.guard = threading.Lock()
    spec = load_agent(agent)
    checks = Checks(make_ctx(tmp_path, tool_model))
    try:
        checks.tools = resolve_tools(spec, EXAMPLE)
    finally:
        close_sessions()
    with pytest.raises(
        AgentError,
        match="AWorld agent 'calculator-agent' cannot be shipped to VeRL's agent-loop workers",
    ):
        checks.check_agent(spec)


@pytest.mark.slow
def test_an_aworld_agent_job_passes_check_in_a_few_lines(tmp_path: Path, tool_model: Path) -> None:
    from aworld_train import AgentTrainer

    rows = [{"prompt": "What is 6411 * 876?", "ground_truth": "5616036"}]
    trainer = AgentTrainer(
        agent=calculator_agent(),
        train_dataset=rows,
        reward_func="answer_match",
        config={
            "algorithm": "grpo",
            "model": str(tool_model),
            "max_steps": 1,
            "batch_size": 2,
            "num_generations": 2,
            "max_prompt_length": 2048,
            "max_completion_length": 256,
        },
        train_engine_name="verl",
        run_path=tmp_path / "runs",
        check_only=True,
    )
    checked = {(check.module, check.by): check.detail for check in trainer.checks}
    assert {("agent", "verl"), ("dataset", "verl"), ("reward", "verl"), ("config", "verl")} <= set(
        checked
    )
    assert "(add, multiply, divide) from MCP server 'calculator'" in checked["tools", "core"]
    assert not (tmp_path / "runs").exists(), "check writes nothing"
