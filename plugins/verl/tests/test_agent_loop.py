"""The plugin's agent loop for plain tool agents, run by VeRL's own ``AgentLoopWorker`` on the
CPU, multi-turn, with the calculator example's real MCP server over stdio and VeRL's reward loop
scoring each episode (see :mod:`rollouts` for the one fake: the token generator)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rollouts import EXAMPLE, assert_exact_tool_episodes, model_tokens, rollout

from aworld_train.agent import load_agent
from aworld_train.tools import close_sessions, resolve_tools
from aworld_train_verl import agent_loop, trajectory

SLOW_TOOL = '''
import time


def wait(seconds: float) -> str:
    """Wait, then say so.

    Args:
        seconds: how long.
    """
    time.sleep(seconds)
    return "waited"
'''


CRASHING_SERVER = '''
import os

from mcp.server.fastmcp import FastMCP

server = FastMCP("crashing", log_level="WARNING")


@server.tool()
def crash() -> str:
    """Stop the server."""
    os._exit(1)


server.run("stdio")
'''


@pytest.fixture
def tools(tmp_path: Path) -> Any:
    """The example's calculator MCP server (stdio), a slow Python tool, and an MCP server that
    dies when its tool is called."""
    (tmp_path / "slow_tools.py").write_text(SLOW_TOOL)
    (tmp_path / "crashing.py").write_text(CRASHING_SERVER)
    spec = load_agent(EXAMPLE / "agent.yaml", EXAMPLE)
    spec.tools = [f"{tmp_path / 'slow_tools.py'}:wait"]
    spec.mcp_config["mcpServers"]["crashing"] = {"command": "python", "args": [str(tmp_path / "crashing.py")]}
    spec.mcp_servers.append("crashing")
    resolved = resolve_tools(spec, EXAMPLE)
    yield spec, resolved
    close_sessions()


def test_a_tool_episode_trains_on_the_models_exact_tokens(tmp_path: Path, tool_model: Path, tools: Any) -> None:
    spec, resolved = tools
    rows = [{"prompt": f"What is {a} * {b}?", "ground_truth": str(a * b), "data_source": "calculator"}
            for a, b in ((6411, 876), (123, 456))]
    output, client, _ = rollout(tmp_path, tool_model, spec, resolved, rows)

    assert_exact_tool_episodes(output, client, rows)
    assert output.non_tensor_batch["tool_calls"].tolist() == [1, 1]
    assert output.non_tensor_batch["__num_turns__"].tolist() == [4, 4]


def test_a_tool_that_times_out_or_whose_server_dies_ends_its_episode_with_reward_0(
    tmp_path: Path, tool_model: Path, tools: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, resolved = tools
    monkeypatch.setattr(agent_loop, "DEFAULT_TIMEOUT", 0.5)
    rows = [{"prompt": "What is 12 * 34?", "ground_truth": "408", "data_source": "calculator"},
            {"prompt": "Wait 3 seconds", "ground_truth": "7", "data_source": "calculator"},
            {"prompt": "Crash now", "ground_truth": "7", "data_source": "calculator"}]
    output, client, _ = rollout(tmp_path, tool_model, spec, resolved, rows)

    failures = output.non_tensor_batch["agent_failure"].tolist()
    assert failures[0] is None
    assert "tool 'wait' did not answer within 0.5 s" in failures[1]
    assert "tool 'crash' of MCP server 'crashing'" in failures[2]
    assert output.non_tensor_batch["agent_failed"].tolist() == [0.0, 1.0, 1.0]
    # The failed turns hold a right answer, yet the failed episodes score 0.
    for i in (1, 2):
        generated, _, environment = model_tokens(output, i)
        assert "<answer>7</answer>" in client.tokenizer.decode(generated) and environment == []
    assert output.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 0.0, 0.0]


def test_tool_calls_are_read_as_the_chat_template_writes_them() -> None:
    content, calls = trajectory.parse_tool_calls(
        'Let me compute.\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
        '<tool_call>{"name": "multiply", "arguments": {"a": 3}}</tool_call><|im_end|>'
    )
    assert content == "Let me compute."
    assert calls == [{"name": "add", "arguments": {"a": 1, "b": 2}}, {"name": "multiply", "arguments": {"a": 3}}]
    _, calls = trajectory.parse_tool_calls("<tool_call>{not json}</tool_call>")
    assert "not valid JSON" in calls[0]["error"]
    assert trajectory.parse_tool_calls("<answer>3</answer>") == ("<answer>3</answer>", [])
