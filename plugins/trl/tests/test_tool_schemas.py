"""TRL shows the model an MCP tool's schema exactly as the server advertises it, as VeRL does:
``default``, ``minimum``/``maximum``, ``format``, ``minLength``, ``anyOf`` with ``null`` and a
description of several paragraphs reach the prompt unchanged."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from policy_inputs import train_recording_inputs

# A FastMCP server (as most are written; MCPServer in mcp 2) whose one tool has what a signature
# cannot carry.
SERVER = '''
from datetime import datetime
from typing import Annotated, Optional

try:
    from mcp.server.mcpserver import MCPServer  # mcp 2
except ImportError:  # mcp 1 calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer
from pydantic import Field

server = MCPServer("clock", log_level="WARNING")


@server.tool()
def shift_time(
    when: datetime,
    zone: Annotated[str, Field(min_length=3, description="an IANA time zone, e.g. Europe/Paris.")],
    hours: Annotated[int, Field(ge=-48, le=48, description="hours to add.")] = 1,
    label: Optional[str] = None,
) -> str:
    """Shift a moment by some hours and show it in a time zone.

    The moment is read as ISO 8601. Daylight saving time is applied where the zone has it.

    Args:
        when: the moment to shift.
        zone: where to show it.
        hours: how many hours to add.
        label: a name to print before the result.
    """
    return f"{label or ''}{when.isoformat()} +{hours}h in {zone}"


if __name__ == "__main__":
    server.run("stdio")
'''


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from aworld_train.engine.testing import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tool-model"), max_positions=4096, tools=True)


@pytest.fixture
def clock_job(tmp_path: Path, tool_model: Path) -> dict[str, Any]:
    server = tmp_path / "clock_server.py"
    server.write_text(SERVER)
    (tmp_path / "train.jsonl").write_text(
        json.dumps(
            {"prompt": "What time is it in Paris an hour after noon UTC?", "ground_truth": "13:00"}
        )
        + "\n"
    )
    return {
        "agent": {
            "name": "clock",
            "system_prompt": "Use the clock.",
            "mcp_config": {
                "mcpServers": {"clock": {"command": sys.executable, "args": [str(server)]}}
            },
            "max_turns": 2,
        },
        "config": {
            "algorithm": "grpo",
            "model": str(tool_model),
            "max_steps": 1,
            "batch_size": 2,
            "num_generations": 2,
            "max_completion_length": 8,
            "logging_steps": 1,
            "trl": {"beta": 0.0},
        },
        "reward_func": "answer_match",
        "train_dataset": "train.jsonl",
        "run_path": tmp_path / "runs",
        "train_engine_name": "trl",
        "base_dir": tmp_path,
    }


def advertised(server: Path) -> list[Any]:
    """The server's tools as its own ``tools/list`` answers, read with the plain MCP client."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def listing() -> list[Any]:
        parameters = StdioServerParameters(command=sys.executable, args=[str(server)])
        async with stdio_client(parameters) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return (await session.list_tools()).tools

    return asyncio.run(listing())


@pytest.mark.slow
def test_trl_renders_the_tool_schema_the_server_advertises(
    clock_job: dict[str, Any], tmp_path: Path
) -> None:
    from aworld_train.runtime import ChatRenderer, prompt_messages
    from transformers import AutoTokenizer

    [tool] = advertised(tmp_path / "clock_server.py")
    schema = tool.model_dump(by_alias=True)["inputSchema"]  # as sent: mcp 2 calls it input_schema
    # What a schema rebuilt from a Python signature loses, present in what the server sends.
    assert schema["properties"]["hours"] == {
        "default": 1,
        "description": "hours to add.",
        "maximum": 48,
        "minimum": -48,
        "title": "Hours",
        "type": "integer",
    }
    assert schema["properties"]["when"]["format"] == "date-time"
    assert schema["properties"]["zone"]["minLength"] == 3
    assert schema["properties"]["label"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert "\n\n    The moment is read as ISO 8601." in tool.description

    trainer = AgentTrainer(**clock_job)
    checked = trainer.hand_off
    # What the agent sends its model: the server's schema as it stands.
    schemas = checked.tools.schemas()
    assert schemas == [
        {
            "type": "function",
            "function": {
                "name": "shift_time",
                "description": tool.description,
                "parameters": schema,
            },
        }
    ]
    assert checked.tools.call(
        "shift_time", {"when": "2026-01-01T12:00:00", "zone": "Europe/Paris", "hours": 2}
    ).startswith("2026-01-01T12:00:00 +2h")

    # The prompt the runtime renders on TRL is the one VeRL's agent loop renders.
    tokenizer = AutoTokenizer.from_pretrained(checked.agent.model)
    prompt = prompt_messages(
        checked.dataset.train[0]["prompt"], checked.agent.episodes.system_prompt
    )
    rendered = ChatRenderer(tokenizer).prompt_ids(prompt, schemas)
    on_verl = tokenizer.apply_chat_template(
        prompt, tools=schemas, add_generation_prompt=True, tokenize=False
    )
    assert tokenizer.decode(rendered) == on_verl
    assert json.dumps(schema) in on_verl and json.dumps(tool.description) in on_verl
    # A schema rebuilt from the Python signature (what TRL makes of a plain function) differs.
    rebuilt = tokenizer.apply_chat_template(
        prompt,
        tools=[t.as_function() for t in checked.tools],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert rebuilt != on_verl
    print(
        f"\ntool prompt: {len(rendered)} tokens as advertised, "
        f"{len(tokenizer(rebuilt)['input_ids'])} rebuilt from a signature"
    )

    # And that prompt is what the policy reads when TRL trains the job.
    final, seen = train_recording_inputs(trainer)
    assert final["step"] == 1
    assert any(on_verl in tokenizer.decode(ids) for ids in seen)
