"""An agent with the calculator example's MCP tools trains with GRPO through TRL's ``tools=``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from aworld_train import AgentTrainer
from aworld_train.errors import AgentError

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "calculator_agent"


def _example_chat_template() -> str:
    """The ChatML-with-tools template that the calculator example's prepare.py gives its model."""
    spec = importlib.util.spec_from_file_location("calculator_prepare", EXAMPLE / "prepare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CHAT_TEMPLATE


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import AutoTokenizer

    from aworld_train.testing import build_tiny_model

    path = build_tiny_model(
        tmp_path_factory.mktemp("tool-model"),
        extra_tokens=("<tool_call>", "</tool_call>", "<answer>", "</answer>"),
    )
    tokenizer = AutoTokenizer.from_pretrained(path)
    tokenizer.chat_template = _example_chat_template()
    tokenizer.save_pretrained(path)
    return path


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
            "mcp_config": {"mcpServers": {
                "calculator": {"command": "python", "args": [str(EXAMPLE / "server.py")]},
            }},
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


def test_grpo_trains_with_mcp_tools_in_the_chat_template(tool_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**tool_job)
    results = trainer.context.results
    assert results["agent"].max_turns == 2
    assert results["config"].args["max_tool_calling_iterations"] == 1
    # The tiny model's template is not one TRL knows: check found the parser that reads its calls.
    assert results["agent"].response_template is not None

    # The prompt as GRPOTrainer renders it: the dataset's messages with the tool functions.
    from transformers import AutoTokenizer

    functions = [tool.as_function() for tool in results["tools"]]
    tokenizer = AutoTokenizer.from_pretrained(results["agent"].model)
    rendered = tokenizer.apply_chat_template(
        results["dataset"].train[0]["prompt"], tools=functions,
        add_generation_prompt=True, tokenize=False,
    )
    assert '"name": "multiply"' in rendered
    assert "Multiply two integers exactly." in rendered
    assert "Use the calculator." in rendered and "What is 12 * 34?" in rendered

    # A call written in the template's format is read back with the template check found, and
    # the function TRL would call with its arguments runs the MCP server.
    from trl.chat_template_utils import parse_response

    tokenizer.response_template = results["agent"].response_template
    prefix = tokenizer(rendered, add_special_tokens=False)["input_ids"]
    output = '<tool_call>\n{"name": "multiply", "arguments": {"a": 12, "b": 34}}\n</tool_call><|im_end|>'
    parsed = parse_response(tokenizer, tokenizer(output, add_special_tokens=False)["input_ids"],
                            prefix=prefix)
    call = parsed["tool_calls"][0]["function"]
    by_name = {function.__name__: function for function in functions}
    assert by_name[call["name"]](**call["arguments"]) == "408"

    final = trainer.train()
    assert final["step"] == 2
    metrics = [json.loads(line) for line in
               (trainer.run_dir.path / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in metrics if "reward" in m]
    assert [m["step"] for m in steps] == [1, 2]
    # TRL logs tool metrics only for a trainer that has tools.
    assert all("tools/call_frequency" in m for m in steps)


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
