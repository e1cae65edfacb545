"""An agent with a Python tool trained by one job on two nodes simulated on this machine, for the
engines' tests: a tiny model taught to call the tool, and each node's training process running
the episodes of its own prompts, the tool recording the process that ran it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aworld_train.testing.fixtures import manifest, read_jsonl
from aworld_train.testing.nodes import nodes, processes_naming, write_job_file
from aworld_train.testing.tool_caller import teach_exchange

# A node ends at most this long after the other one did.
NODE_END_S = 60
SYSTEM = "Use the calculator."
TOOL = '''import json
import os


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl"), "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "a": a, "b": b}) + "\\n")
    return a * b
'''


def assert_tool_agent_trains_on_two_nodes(
    folder: Path, engine: str, section: dict[str, Any], env: dict[str, str], run_s: float
) -> None:
    """The spec form with the Python tool ``multiply`` trains with GRPO for 2 steps on two
    nodes of one process each (``engine``'s config section ``section``, the nodes' extra
    environment ``env``, at most ``run_s`` seconds): one completed run on node 0, every
    episode of rank 0 calls the tool and is scored on the answer after its result, and the
    tool ran in both nodes' training processes, 2 episodes a step each."""
    from aworld_train.trainer import AgentTrainer
    from aworld_train.runtime import prompt_messages
    from aworld_train.testing.tiny_model import build_tiny_model

    model = build_tiny_model(
        folder / "caller", extra_tokens=("<answer>", "</answer>"), max_positions=4096, tools=True
    )
    (folder / "tools.py").write_text(TOOL)
    row = {"prompt": "What is 12 * 34?", "ground_truth": "408"}
    (folder / "train.jsonl").write_text((json.dumps(row) + "\n") * 4)
    job = _two_node_job(folder, engine, section, model)
    checked = AgentTrainer(**job, check_only=True).hand_off
    functions = checked.tools.schemas()
    prompt = prompt_messages(row["prompt"], SYSTEM)
    call = {"type": "function", "function": {"name": "multiply", "arguments": {"a": 12, "b": 34}}}
    teach_exchange(model, prompt, functions, call, result="408", answer="<answer>408</answer>")

    with nodes(write_job_file(job, nnodes=2), 2, folder, env) as (zero, one):
        assert zero.wait(run_s) == 0, zero.text()
        assert one.wait(NODE_END_S) == 0, one.text()
    _assert_both_nodes_called_the_tool(folder)


def _two_node_job(
    folder: Path, engine: str, section: dict[str, Any], model: Path
) -> dict[str, Any]:
    """The job's AgentTrainer arguments: GRPO for 2 steps of 2 episodes, the spec-form agent
    with the Python tool, ``answer_match``."""
    return {
        # Sampling close to the taught turns, so every episode makes the call.
        "agent": {
            "name": "calculator",
            "system_prompt": SYSTEM,
            "tools": ["tools.py:multiply"],
            "max_turns": 2,
            "llm_temperature": 0.3,
        },
        "config": {
            "algorithm": "grpo",
            "model": str(model),
            "max_steps": 2,
            "batch_size": 2,
            "num_generations": 2,
            "max_completion_length": 160,
            "logging_steps": 1,
            "save_steps": 2,
            "seed": 0,
            engine: section,
        },
        "reward_func": "answer_match",
        "train_dataset": "train.jsonl",
        "run_path": folder / "runs",
        "train_engine_name": engine,
        "base_dir": folder,
    }


def _assert_both_nodes_called_the_tool(folder: Path) -> None:
    """One completed run of 2 steps, each episode calling the tool and scored 1, and the tool
    run 2 episodes a step in each node's own training process."""
    [run] = (folder / "runs").iterdir()  # node 1 wrote no run of its own
    assert manifest(run)["status"] == "completed"
    steps = [m for m in read_jsonl(run / "metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in steps] == [1, 2]
    assert all(m["tools/call_frequency"] == 1.0 and m["reward"] == 1.0 for m in steps), steps
    calls = read_jsonl(folder / "calls.jsonl")
    # 2 steps x 2 episodes on each node, each node's in its own training process.
    assert len({c["pid"] for c in calls}) == 2 and len(calls) == 8, calls
    assert all((c["a"], c["b"]) == (12, 34) for c in calls)
    assert processes_naming(folder) == []
