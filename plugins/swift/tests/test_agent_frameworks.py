"""Agents as the frameworks write them train on ms-swift unmodified: the OpenAI Agents SDK in its
default form (the Responses API) and on chat completions, LangGraph plain and streaming, each
checked and trained through the CLI with a tiny model taught the framework's own conversation:
no episode fails, the framework runs the tool itself, and swift trains on exactly the recorded
tokens. smolagents, which rewrites its conversation on every call, is refused by ``check`` in
one line: swift trains an episode as one token sequence."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from aworld_train.testing.fixtures import run_cli
from aworld_train.testing.frameworks import (
    FRAMEWORK_AGENTS,
    framework_job,
    teach_framework_agent,
    train_framework_job,
)

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "agent_frameworks"
CALCULATOR = ROOT / "examples" / "calculator_agent"
ONE_SEQUENCE = [form for form, (_, rewrites) in FRAMEWORK_AGENTS.items() if not rewrites]


@pytest.mark.slow
@pytest.mark.parametrize("form", ONE_SEQUENCE)
def test_a_framework_agent_trains_as_written(
    tmp_path: Path,
    form: str,
    capsys: pytest.CaptureFixture[str],
    collated: list[tuple[Any, dict[str, Any]]],
) -> None:
    from aworld_train_swift.rollout import TRAJECTORY_KEY
    from transformers import AutoTokenizer

    job = framework_job(tmp_path, EXAMPLES, CALCULATOR, "swift", form, swift={"beta": 0.0})
    code, out, err = run_cli(capsys, "check", job)
    assert code == 0, err
    teach_framework_agent(job)

    run_dir, steps = train_framework_job(job, capsys)

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "model")
    called = 0
    for sample, encoded in collated:
        episode = json.loads(sample.messages[-1][TRAJECTORY_KEY])
        prompt, completion, mask = episode["prompt_ids"], episode["response_ids"], episode["mask"]
        assert encoded["input_ids"] == prompt + completion  # swift trains the recorded tokens
        context = tokenizer.decode(prompt + [t for t, kept in zip(completion, mask) if not kept])
        a, b = re.findall(r"What is (\d+) \* (\d+)\?", context)[-1]
        called += str(int(a) * int(b)) in context  # the framework ran the tool
    assert len(collated) == 8 and called >= 6, called


def test_smolagents_is_refused_in_one_line_naming_the_engine_and_the_rewritten_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = framework_job(tmp_path, EXAMPLES, CALCULATOR, "swift", "smolagents")
    code, out, err = run_cli(capsys, "check", job)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: agent 'run' on train.jsonl row 0: the agent rewrote the ")
    # Against check's stand-in (it answers "OK", never a call) smolagents retries, then asks
    # for a final answer with another system prompt and no tools.
    assert re.search(
        r"rewrote the conversation it had sent \((message \d+ \(\w+\) was .+ and is now .+|the tools it offers changed)\)",
        lines[0],
    ), lines[0]
    assert "engine 'swift' trains an episode as one token sequence" in lines[0]
    assert not (tmp_path / "runs").exists()
