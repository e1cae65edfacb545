"""Test material for an engine's agent-runtime tests: a user's own Python agent driving an
OpenAI client, agents that break in each way ``check`` must name, and a GRPO job training them.

In an engine's own tests::

    from aworld_train.testing.agents import assert_agent_trains, write_agent_job

    @pytest.fixture
    def agent_job(tmp_path, tiny_model):
        return write_agent_job(tmp_path, tiny_model, "mine", {"beta": 0.0}, max_steps=3)

    def test_the_agent_trains(agent_job, capsys):
        assert_agent_trains(capsys, agent_job, steps=3)

Nothing here imports an engine; the agent files are written as text and run by the core's
agent runtime.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aworld_train.testing.fixtures import read_jsonl, run_cli

#: The system message the agent of :data:`AGENT_FILE` sends first.
SYSTEM = "Answer with the digit."

#: The one tool of :data:`AGENT_FILE` (its ``TOOLS``), as a chat template renders it in the prompt.
SHOUT_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "shout",
            "description": "Upper-case a text.",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string"}},
                "required": ["text"],
            },
        },
    }
]

# A hand-written agent loop with one tool, as a user writes one with the OpenAI SDK: it asks the
# model, calls its tool (the model's answer is the tool's argument), shows the model the
# result, and answers with the model's second turn. It fails on purpose on the rows that say so.
AGENT_FILE = """
import json
from openai import AsyncOpenAI

TOOLS = [{"type": "function", "function": {
    "name": "shout", "description": "Upper-case a text.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                   "required": ["text"]}}}]


async def run(row, llm):
    if row.get("fail"):
        raise RuntimeError("planted agent failure")
    client = AsyncOpenAI(base_url=llm.base_url, api_key=llm.api_key)
    messages = [{"role": "system", "content": "Answer with the digit."},
                {"role": "user", "content": row["prompt"]}]
    first = await client.chat.completions.create(model=llm.model, messages=messages, tools=TOOLS,
                                                 max_tokens=8)
    said = first.choices[0].message.content or ""
    messages.append({"role": "assistant", "content": said})
    messages.append({"role": "tool", "name": "shout", "content": said.upper()})
    second = await client.chat.completions.create(model=llm.model, messages=messages, tools=TOOLS)
    return {"answer": second.choices[0].message.content or "", "turns": 2}
"""

# Agents that break, one way each: ``check --agent bad_agents.py:NAME`` must refuse each in one
# line (``hangs`` at the check's time limit).
BAD_AGENTS = """
import time

def raises(row, llm):
    raise KeyError("no_such_column")

def never_calls(row, llm):
    return "7"

def hangs(row, llm):
    time.sleep(600)

def exits(row, llm):
    import os
    os._exit(3)

def returns_a_number(row, llm):
    from openai import OpenAI
    client = OpenAI(base_url=llm.base_url, api_key=llm.api_key)
    client.chat.completions.create(model=llm.model, messages=[{"role": "user", "content": "x"}])
    return 42

def asks_for_two(row, llm):
    from openai import OpenAI
    client = OpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0)
    client.chat.completions.create(model=llm.model, n=2, messages=[{"role": "user", "content": "x"}])
    return "7"

def legacy(row, llm):
    from openai import OpenAI
    client = OpenAI(base_url=llm.base_url, api_key=llm.api_key, max_retries=0)
    client.completions.create(model=llm.model, prompt="x")
    return "7"

def wrong_signature(row):
    return "7"
"""

#: The rows of :func:`write_agent_job`'s dataset that the agent fails on.
FAILING_ROWS = (3,)


def write_agent_job(
    folder: Path, model: Path, engine: str, section: dict[str, Any], **config: Any
) -> Path:
    """A job file in ``folder`` training ``my_agent.py:run`` (:data:`AGENT_FILE`) with GRPO on
    ``engine``: 8 "Repeat: <digit>" rows (the agent fails on :data:`FAILING_ROWS`), a reward
    scoring 1 where the digit is in the answer, and ``bad_agents.py`` (:data:`BAD_AGENTS`) beside
    it. ``section`` is the engine's config section; ``config`` overrides the common keys."""
    (folder / "my_agent.py").write_text(AGENT_FILE)
    (folder / "bad_agents.py").write_text(BAD_AGENTS)
    (folder / "rewards.py").write_text(
        "def score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return 1.0 if ground_truth in solution_str else 0.0\n"
    )
    rows: list[dict[str, Any]] = [
        {"prompt": f"Repeat: {d}", "ground_truth": str(d)} for d in range(8)
    ]
    for row in FAILING_ROWS:
        rows[row]["fail"] = True  # an agent that fails on some episodes
    (folder / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    job = {
        "engine": engine,
        "agent": "my_agent.py:run",
        "train_dataset": "train.jsonl",
        "reward": "rewards.py:score",
        "config": {
            "algorithm": "grpo",
            "model": str(model),
            "max_steps": 4,
            "batch_size": 8,
            "num_generations": 2,
            "learning_rate": 1e-3,
            "max_completion_length": 24,
            "logging_steps": 1,
            "save_steps": 4,
            "seed": 0,
            **config,
            engine: section,
        },
        "run_path": "runs",
    }
    path = folder / "job.yaml"
    path.write_text(json.dumps(job))
    return path


def assert_agent_trains(
    capsys: pytest.CaptureFixture[str], job: Path, steps: int
) -> tuple[Path, list[dict[str, Any]]]:
    """``check`` then ``train`` on a :func:`write_agent_job` job: check answers the agent's 2
    model calls with its stand-in, the run completes ``steps`` steps and saves the model, and the
    failing row's episodes are counted (``agent_failed`` above 0 on some step, at most 1 in 4).
    Returns the run directory and the steps' metrics."""
    code, out, err = run_cli(capsys, "check", job)
    assert code == 0, err
    assert "2 model call(s) answered by a stand-in" in out

    code, out, err = run_cli(capsys, "train", job)
    assert code == 0, err
    run_dir = next((job.parent / "runs").iterdir())
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
    logged = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "loss" in m]
    assert [m["step"] for m in logged] == list(range(1, steps + 1))
    # The failing row fails whenever it is drawn (its episodes score 0); the steps go on, and
    # its episodes are counted.
    failed = [m["agent_failed"] for m in logged]
    assert all(0.0 <= share <= 0.25 for share in failed) and any(share > 0 for share in failed)
    assert (run_dir / "model" / "config.json").is_file()
    return run_dir, logged


def mask_segments(mask: list[int]) -> list[tuple[int, int, int]]:
    """Runs of equal mask values as (value, start, end)."""
    runs: list[tuple[int, int, int]] = []
    start = 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            runs.append((mask[start], start, i))
            start = i
    return runs
