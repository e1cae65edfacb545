"""The plugin's agent loops for an agent given by its prompt and tools and for a Python agent,
run by VeRL's own ``AgentLoopWorker`` on the CPU through the core's agent runtime, multi-turn,
with the calculator example's real MCP server over stdio and VeRL's reward loop scoring each
episode (see :mod:`rollouts` for the one fake: the token generator)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aworld_train.agent import load_agent, python_agent
from aworld_train.errors import AgentError
from aworld_train.tools import close_sessions, resolve_tools
from aworld_train_verl import agent_loop
from rollouts import EXAMPLE, assert_exact_tool_episodes, model_tokens, rollout

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

try:
    from mcp.server.mcpserver import MCPServer  # mcp 2
except ImportError:  # mcp 1 calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("crashing", log_level="WARNING")


@server.tool()
def crash() -> str:
    """Stop the server."""
    os._exit(1)


server.run("stdio")
'''


PYTHON_AGENT = '''
import json

from openai import AsyncOpenAI

TOOLS = [{"type": "function", "function": {
    "name": "multiply", "description": "Multiply two numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}]


async def run(row, llm):
    """An agent of the user's own: an OpenAI client in a loop, with one tool it runs itself."""
    client = AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key)
    messages = list(row["prompt"])
    for _ in range(4):
        reply = await client.chat.completions.create(model=llm.model, messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return {"answer": message.content, "expected": row["ground_truth"], "source": row["data_source"]}
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": str(arguments["a"] * arguments["b"])})
    return ""
'''


@pytest.fixture
def tools(tmp_path: Path) -> Any:
    """The example's calculator MCP server (stdio), a slow Python tool, and an MCP server that
    dies when its tool is called."""
    (tmp_path / "slow_tools.py").write_text(SLOW_TOOL)
    (tmp_path / "crashing.py").write_text(CRASHING_SERVER)
    spec = load_agent(EXAMPLE / "agent.yaml", EXAMPLE)
    spec.tools = [f"{tmp_path / 'slow_tools.py'}:wait"]
    spec.mcp_config["mcpServers"]["crashing"] = {
        "command": "python",
        "args": [str(tmp_path / "crashing.py")],
    }
    spec.mcp_servers.append("crashing")
    resolved = resolve_tools(spec, EXAMPLE)
    yield spec, resolved
    close_sessions()


def test_a_tool_episode_trains_on_the_models_exact_tokens(
    tmp_path: Path, tool_model: Path, tools: Any
) -> None:
    spec, resolved = tools
    rows = [
        {"prompt": f"What is {a} * {b}?", "ground_truth": str(a * b), "data_source": "calculator"}
        for a, b in ((6411, 876), (123, 456))
    ]
    output, client, _ = rollout(tmp_path, tool_model, spec, resolved, rows)

    assert_exact_tool_episodes(output, client, rows)
    assert output.non_tensor_batch["tool_calls"].tolist() == [1, 1]
    assert output.non_tensor_batch["__num_turns__"].tolist() == [4, 4]


@pytest.mark.slow
def test_a_tool_episode_that_times_out_or_whose_server_dies_scores_0(
    tmp_path: Path, tool_model: Path, tools: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, resolved = tools
    monkeypatch.setattr(agent_loop, "EPISODE_TIMEOUT", 4.0)
    rows = [
        {"prompt": "What is 12 * 34?", "ground_truth": "408", "data_source": "calculator"},
        {"prompt": "Wait 6 seconds", "ground_truth": "7", "data_source": "calculator"},
        {"prompt": "Crash now", "ground_truth": "7", "data_source": "calculator"},
    ]
    output, client, _ = rollout(tmp_path, tool_model, spec, resolved, rows)

    failures = output.non_tensor_batch["agent_failure"].tolist()
    assert failures[0] is None
    assert failures[1] == "the agent did not finish within 4 s"
    assert "tool 'crash' of MCP server 'crashing'" in failures[2]
    assert output.non_tensor_batch["agent_failed"].tolist() == [0.0, 1.0, 1.0]
    # The failed turns hold a right answer, yet the failed episodes score 0.
    for i in (1, 2):
        generated, _, environment = model_tokens(output, i)
        assert "<answer>7</answer>" in client.tokenizer.decode(generated) and environment == []
    assert output.batch["rm_scores"].sum(dim=-1).tolist() == [1.0, 0.0, 0.0]


def test_a_python_agent_is_imported_by_its_reference_in_the_workers_and_trains_on_the_exact_tokens(
    tmp_path: Path, tool_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "agents").mkdir()
    (tmp_path / "agents" / "my_agent.py").write_text(PYTHON_AGENT)
    monkeypatch.chdir(tmp_path)
    spec = load_agent("my_agent.py:run", tmp_path / "agents")
    rows = [
        {"prompt": f"What is {a} * {b}?", "ground_truth": str(a * b), "data_source": "calculator"}
        for a, b in ((6411, 876), (123, 456))
    ]
    output, client, cfg = rollout(tmp_path, tool_model, spec, resolve_tools(spec), rows)

    from omegaconf import OmegaConf

    loop = OmegaConf.load(cfg.actor_rollout_ref.rollout.agent.agent_loop_config_path)[0]
    assert loop["_target_"] == "aworld_train_verl.agent_loop.PythonAgentLoop"
    assert loop["agent_reference"] == f"{tmp_path / 'agents' / 'my_agent.py'}:run", (
        "absolute, as the workers need"
    )
    assert_exact_tool_episodes(output, client, rows)
    # The reward scored the answer the agent returned, and got the fields it returned with it.
    assert output.non_tensor_batch["agent_answer"].tolist() == [
        f"The product is <answer>{row['ground_truth']}</answer>" for row in rows
    ]
    assert output.non_tensor_batch["agent_extra"].tolist() == [
        {"expected": row["ground_truth"], "source": "calculator"} for row in rows
    ]
    assert output.non_tensor_batch["tool_calls"].tolist() == [1, 1]


def test_a_python_agent_that_cannot_reach_the_workers_fails_at_check_time(
    tmp_path: Path, tool_model: Path
) -> None:
    import threading

    from conftest import Checks, make_ctx

    guard = threading.Lock()

    def run(row: dict[str, Any], llm: Any) -> str:
        with guard:
            return "42"

    with pytest.raises(
        AgentError,
        match="Python agent 'guarded' cannot be shipped to VeRL's agent-loop workers: "
        ".*; define it in a file and name it as 'file.py:run'",
    ):
        Checks(make_ctx(tmp_path, tool_model)).check_agent(python_agent(run, "guarded"))
