"""The calculator example's AWorld ``Agent`` trains with GRPO on ms-swift, on the CPU: the object
as ``examples/calculator_agent/aworld_agent.py`` builds it runs through AWorld's own ``Runners``
in every episode, AWorld calls the example's MCP server over stdio, and every model call is
answered by the policy swift trains. Needs ``aworld``, which ``make`` installs in the swift
venv."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aworld_train.testing.agents import mask_segments
from aworld_train.testing.fixtures import read_jsonl, run_cli

pytest.importorskip("aworld", reason="AWorld agents need aworld-train[aworld]")

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "calculator_agent"


@pytest.fixture
def calculator_job(tmp_path: Path) -> Path:
    """A job file training the example's agent for 2 steps on the first 2 rows of its data, with
    a tiny tool model (untaught: a test teaches it what it needs)."""
    from aworld_train.engine.testing import build_tiny_model

    model = build_tiny_model(
        tmp_path / "model", extra_tokens=("<answer>", "</answer>"), max_positions=4096, tools=True
    )
    rows = read_jsonl(EXAMPLE / "data" / "train.jsonl")[:2]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    job = {
        "engine": "swift",
        "agent": f"{EXAMPLE / 'aworld_agent.py'}:calculator_agent",
        "train_dataset": "train.jsonl",
        "reward": "answer_match",
        # 2 prompts x 2 generations a step; an episode's call, tool result and answer fit in
        # 160 tokens. Sampling at 0.5 rather than the agent's own 1.0 (the job's setting wins
        # over the agent's) keeps the briefly taught call well formed in most episodes.
        "config": {
            "algorithm": "grpo",
            "model": str(model),
            "max_steps": 2,
            "batch_size": 4,
            "num_generations": 2,
            "learning_rate": 1e-5,
            "max_completion_length": 160,
            "logging_steps": 1,
            "save_steps": 2,
            "seed": 0,
            "swift": {"beta": 0.0, "temperature": 0.5},
        },
        "run_path": "runs",
    }
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps(job))
    return path


@pytest.mark.slow
def test_the_calculator_examples_aworld_agent_trains_unchanged_and_its_tool_results_are_context(
    calculator_job: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    collated: list[tuple[Any, dict[str, Any]]],
) -> None:
    """``check`` runs the agent once against the stand-in; the model is then taught to call
    ``multiply`` on most of its episodes, on the prompt exactly as the agent sent it in
    that check (its system prompt, its MCP tools' schemas as AWorld offers them). Training goes
    through the CLI: every episode ends with an answer, the episodes that call the tool get the
    server's product of the model's own arguments back, and swift trains on each episode's
    tokens with the tool result as unlabelled context."""
    from aworld_train.runtime import parse_tool_calls
    from aworld_train.runtime._episode import Episode
    from aworld_train.runtime._replies import Turn
    from aworld_train.runtime._requests import TurnRequest
    from aworld_train.testing.tool_caller import multiplication_exchanges, teach_sometimes_calling
    from aworld_train_swift.rollout import TRAJECTORY_KEY
    from transformers import AutoTokenizer

    requests: list[TurnRequest] = []
    chat = Episode.chat

    async def recording(self: Episode, request: TurnRequest) -> Turn:
        requests.append(request)
        return await chat(self, request)

    monkeypatch.setattr(Episode, "chat", recording)
    code, out, err = run_cli(capsys, "check", calculator_job)
    assert code == 0, err
    assert "1 model call(s) answered by a stand-in" in out
    assert "3 tools (add, multiply, divide) from MCP server 'calculator'" in out
    monkeypatch.setattr(Episode, "chat", chat)

    rows = read_jsonl(calculator_job.parent / "train.jsonl")
    first = requests[0]
    schemas = first.tools
    assert schemas is not None
    assert [schema["function"]["name"] for schema in schemas] == ["add", "multiply", "divide"]
    exchanges = multiplication_exchanges(rows, first.messages[0]["content"])
    assert exchanges[0].messages == first.messages  # the prompt AWorld sends is taught
    model = Path(json.loads(calculator_job.read_text())["config"]["model"])
    # A few steps teach the call's form; a sampled call may still get digits wrong (the server
    # multiplies them as written) or come out malformed (the agent then takes it as its answer).
    taught = teach_sometimes_calling(model, exchanges, schemas, call_share=0.7, steps=100)
    assert all(0.4 < p < 0.95 for p in taught["call_probability"]), taught

    code, out, err = run_cli(capsys, "train", calculator_job)
    assert code == 0, err
    run_dir = next((calculator_job.parent / "runs").iterdir())
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
    steps = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2]
    assert all(m["agent_failed"] == 0 for m in steps)
    # Some episodes called the tool (a call, its result, then the model's next turn), within the
    # agent's max_loop_steps of 4.
    assert all(1 <= m["agent_turns"] <= 4 for m in steps)
    assert any(m["agent_turns"] > 1 and m["tools/call_frequency"] > 0 for m in steps)

    tokenizer = AutoTokenizer.from_pretrained(model)
    called = 0
    for sample, encoded in collated:
        episode = json.loads(sample.messages[-1][TRAJECTORY_KEY])
        prompt, completion, mask = episode["prompt_ids"], episode["response_ids"], episode["mask"]
        assert sample.rollout_infos["agent_failure"] is None
        assert encoded["input_ids"] == prompt + completion
        assert encoded["labels"][len(prompt) :] == [
            token if kept else -100 for token, kept in zip(completion, mask)
        ]
        segments = mask_segments(mask)
        if len(segments) == 1:  # answered at once
            continue
        # The model's call, the server's result as context (unlabelled), the model's next turn.
        assert [value for value, _, _ in segments][:3] == [1, 0, 1]
        (_, a, b), (_, c, d) = segments[:2]
        _, calls = parse_tool_calls(tokenizer.decode(completion[a:b]))
        assert [call["name"] for call in calls] == ["multiply"]
        result = tokenizer.decode(completion[c:d])
        assert "<tool_response>" in result
        arguments = calls[0]["arguments"]
        if sorted(arguments) == ["a", "b"] and all(isinstance(v, int) for v in arguments.values()):
            assert f"<tool_response>\n{arguments['a'] * arguments['b']}\n</tool_response>" in result
            called += 1
    assert len(collated) == 8 and called, "no episode called the tool"
