"""An agent with the calculator example's MCP tools trains with GRPO on TRL: each completion is an
episode of the agent runtime's chat loop, which calls the tools between turns."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.errors import AgentError
from aworld_train.runtime import ChatRenderer, prompt_messages
from aworld_train.testing.tool_caller import teach_exchange
from policy_inputs import train_recording_inputs

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "calculator_agent"


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from aworld_train.engine.testing import build_tiny_model

    # A prompt with three tool schemas is ~1200 byte-level tokens, past the default 1024.
    return build_tiny_model(
        tmp_path_factory.mktemp("tool-model"),
        extra_tokens=("<answer>", "</answer>"),
        max_positions=4096,
        tools=True,
    )


@pytest.fixture
def tool_job(tmp_path: Path, tool_model: Path) -> dict[str, Any]:
    rows = [
        {"prompt": f"What is {a} * {b}?", "ground_truth": str(a * b)}
        for a, b in [(12, 34), (56, 78), (91, 23), (45, 67)]
    ]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return {
        "agent": {
            "name": "calculator",
            "system_prompt": "Use the calculator.",
            "mcp_config": {
                "mcpServers": {
                    "calculator": {"command": "python", "args": [str(EXAMPLE / "server.py")]},
                }
            },
            "max_turns": 2,
        },
        "config": {
            "algorithm": "grpo",
            "model": str(tool_model),
            "max_steps": 2,
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


@pytest.mark.slow
def test_grpo_trains_with_mcp_tools_in_the_chat_template(tool_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**tool_job)
    checked = trainer.hand_off
    assert checked.agent.max_turns == 2 and checked.agent.episodes is not None

    # The prompt as the runtime renders it: the dataset's messages with the tools' schemas.
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checked.agent.model)
    # The row as the job gave it: the runtime's chat loop writes the messages.
    prompt = checked.dataset.train[0]["prompt"]
    assert prompt == "What is 12 * 34?"
    rendered = tokenizer.decode(
        ChatRenderer(tokenizer).prompt_ids(
            prompt_messages(prompt, checked.agent.episodes.system_prompt), checked.tools.schemas()
        )
    )
    assert '"name": "multiply"' in rendered
    assert "Multiply two integers exactly." in rendered
    assert "Use the calculator." in rendered and "What is 12 * 34?" in rendered

    # A call written in the template's format is read back, and the tool it names runs on the
    # MCP server.
    from aworld_train.runtime import parse_tool_calls

    _, calls = parse_tool_calls(
        '<tool_call>\n{"name": "multiply", "arguments": {"a": 12, "b": 34}}\n</tool_call>'
    )
    assert checked.tools.call(calls[0]["name"], calls[0]["arguments"]) == "408"

    final = trainer.train()
    assert final["step"] == 2
    metrics = [
        json.loads(line)
        for line in (trainer.run_dir.path / "metrics.jsonl").read_text().splitlines()
    ]
    steps = [m for m in metrics if "reward" in m]
    assert [m["step"] for m in steps] == [1, 2]
    assert all("tools/call_frequency" in m and m["agent_failed"] == 0.0 for m in steps)


@pytest.mark.slow
def test_grpo_rollout_runs_the_tool_the_model_calls(
    tool_job: dict[str, Any], tool_model: Path, tmp_path: Path
) -> None:
    """A model that writes a multiply call has the calculator's MCP server run it in the middle
    of a GRPO rollout: the server's result enters the model's context after the call, the model
    goes on from it, and the reward scores the turn written after the tool's result."""
    from transformers import AutoTokenizer

    (tmp_path / "train.jsonl").write_text(
        json.dumps({"prompt": "What is 12 * 34?", "ground_truth": "408"}) + "\n"
    )
    model = shutil.copytree(tool_model, tmp_path / "caller")
    # Only multiply's schema: with all three tools the byte-level prompt alone is longer than the
    # tiny model's 1,024 positions, and TRL drops a tool result that would not fit in them.
    tool_job["agent"]["tools"] = ["multiply"]
    # Sampling close to the taught turns, so every completion makes the call.
    tool_job["agent"]["llm_temperature"] = 0.3
    tool_job["config"].update(model=str(model), max_completion_length=160, seed=0)
    trainer = AgentTrainer(**tool_job)
    checked = trainer.hand_off
    functions = checked.tools.schemas()
    assert [schema["function"]["name"] for schema in functions] == ["multiply"]

    # The model learns the exchange on the prompt exactly as the runtime renders it. Its weights
    # are read when training starts, so teaching them after the checks is enough.
    prompt = prompt_messages(
        checked.dataset.train[0]["prompt"], checked.agent.episodes.system_prompt
    )
    call = {"type": "function", "function": {"name": "multiply", "arguments": {"a": 12, "b": 34}}}
    teach_exchange(model, prompt, functions, call, result="408", answer="<answer>408</answer>")

    # Every input the policy reads during training: prompts, its own turns and what TRL appends.
    final, seen = train_recording_inputs(trainer)
    assert final["step"] == 2

    # The server's product of the arguments the model wrote follows the model's call in its
    # context, in the chat template's tool-response turn, with the next assistant turn opened.
    # The model's own turn ends at the end-of-turn token after the call: what follows is the
    # runtime's rendering of the tool message.
    tokenizer = AutoTokenizer.from_pretrained(model)
    exchange = tokenizer.apply_chat_template(
        [
            *prompt,
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "name": "multiply", "content": "408"},
        ],
        tools=functions,
        add_generation_prompt=True,
        tokenize=False,
    )
    prefix = tokenizer.apply_chat_template(
        prompt, tools=functions, add_generation_prompt=True, tokenize=False
    )
    assert exchange[len(prefix) :].startswith(
        '\n<tool_call>\n{"name": "multiply", "arguments": {"a": 12, "b": 34}}\n</tool_call>'
        "<|im_end|>\n<|im_start|>user\n<tool_response>\n408\n</tool_response><|im_end|>"
    )
    assert any(exchange in tokenizer.decode(ids) for ids in seen)

    metrics = [
        json.loads(line)
        for line in (trainer.run_dir.path / "metrics.jsonl").read_text().splitlines()
    ]
    steps = [m for m in metrics if "reward" in m]
    assert [m["step"] for m in steps] == [1, 2]
    for m in steps:
        # Every episode made one call, and no episode failed.
        assert m["tools/call_frequency"] == 1.0 and m["agent_failed"] == 0.0
        # The reward scored the answer written after the tool's result: the call turn alone
        # has no <answer>.
        assert m["reward"] == 1.0


def test_tools_with_sft_are_refused(tool_job: dict[str, Any]) -> None:
    tool_job["config"]["algorithm"] = "sft"
    with pytest.raises(AgentError, match="calculator.*GRPO only"):
        AgentTrainer(**tool_job, check_only=True)


def test_tools_need_a_second_turn(tool_job: dict[str, Any]) -> None:
    tool_job["agent"]["max_turns"] = 1
    with pytest.raises(AgentError, match="max_turns >= 2"):
        AgentTrainer(**tool_job, check_only=True)


def test_chat_template_that_drops_tool_calls_is_refused(
    tool_job: dict[str, Any], tiny_model: Path
) -> None:
    tool_job["config"]["model"] = str(tiny_model)  # its template renders only role and content
    with pytest.raises(AgentError, match="cannot render a tool call"):
        AgentTrainer(**tool_job, check_only=True)
