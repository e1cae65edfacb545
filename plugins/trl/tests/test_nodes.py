"""One TRL job on two nodes simulated on this machine: two ``aworld-train train`` processes with
``NODE_RANK`` 0 and 1, ``MASTER_ADDR=127.0.0.1`` and ``MASTER_PORT``, ``resources.nnodes: 2``,
joined over TCP (gloo on CPU) as two machines are."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from aworld_train.testing.fixtures import manifest, read_jsonl
from aworld_train.testing.nodes import (
    kill_tree,
    nodes,
    processes_naming,
    wait_for,
    write_job_file,
)

# A node ends at most this long after the other died (measured: ~15 s on 2 busy cores, most of
# it torchrun's own shutdown).
NODE_LOSS_S = 60
# Checks (~35 s here: each node imports torch and TRL and reads the model) plus training.
RUN_S = 400


def _environment(tmp_path: Path) -> dict[str, str]:
    # CPU processes; node 1's working folder lands under the test's folder.
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {"CUDA_VISIBLE_DEVICES": "", "TMPDIR": str(tmp_path / "tmp"),
            "AWORLD_TRAIN_JOIN_TIMEOUT": "300"}


def _cpu(job: dict[str, Any], max_steps: int) -> Path:
    job["config"] = dict(job["config"], max_steps=max_steps)
    job["config"]["trl"] = dict(job["config"]["trl"], use_cpu=True, bf16=False)
    return write_job_file(job, nnodes=2)


def test_grpo_on_two_nodes_is_one_run_on_node_zero(job: dict[str, Any], tmp_path: Path) -> None:
    with nodes(_cpu(job, max_steps=2), 2, tmp_path, _environment(tmp_path)) as (zero, one):
        assert zero.wait(RUN_S) == 0, zero.text()
        assert one.wait(NODE_LOSS_S) == 0, one.text()

    [run] = (tmp_path / "runs").iterdir()  # node 1 wrote no run of its own
    assert manifest(run)["status"] == "completed"
    metrics = [m for m in read_jsonl(run / "metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in metrics] == [1, 2]  # rank 0's, once each
    # One process per node, 2 prompts each per step: 2 steps x 2 nodes cover half the 16 rows.
    assert metrics[-1]["epoch"] == pytest.approx(0.5)
    assert (run / "model" / "config.json").is_file()
    assert "node 1: the run directory is node 0's" in one.text()
    assert not list((tmp_path / "tmp").glob("aworld-train-node*"))  # removed on completion
    assert processes_naming(tmp_path) == []


def test_a_killed_node_ends_the_other_with_one_error_and_a_failed_run(
    job: dict[str, Any], tmp_path: Path
) -> None:
    with nodes(_cpu(job, max_steps=5000), 2, tmp_path, _environment(tmp_path)) as (zero, one):
        wait_for(lambda: any(path.stat().st_size for path in tmp_path.glob("runs/*/metrics.jsonl")),
                 RUN_S, "node 0 trains")
        kill_tree(one.process.pid)
        killed = time.monotonic()
        status = zero.wait(NODE_LOSS_S)
        took = time.monotonic() - killed

    assert status != 0
    [error] = zero.error_lines()
    assert "another node of the 2 stopped while training" in error, zero.text()
    [run] = (tmp_path / "runs").iterdir()
    assert manifest(run)["status"] == "failed"
    assert took < NODE_LOSS_S
    assert processes_naming(tmp_path) == []


TOOL = '''import json
import os


def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "calls.jsonl"), "a") as f:
        f.write(json.dumps({"pid": os.getpid(), "a": a, "b": b}) + "\\n")
    return a * b
'''


def test_an_agent_with_a_python_tool_trains_on_two_nodes_each_running_its_own_episodes(
    tmp_path: Path,
) -> None:
    """The spec form with a Python tool, its episodes run by each node's training process for
    that node's prompts: one run, and the tool called in both processes."""
    from aworld_train import AgentTrainer
    from aworld_train.runtime import prompt_messages
    from aworld_train.testing import build_tiny_model
    from teach import teach_exchange

    model = build_tiny_model(tmp_path / "caller", extra_tokens=("<answer>", "</answer>"),
                             max_positions=4096, tools=True)
    (tmp_path / "tools.py").write_text(TOOL)
    row = {"prompt": "What is 12 * 34?", "ground_truth": "408"}
    (tmp_path / "train.jsonl").write_text((json.dumps(row) + "\n") * 4)
    job: dict[str, Any] = {
        # Sampling close to the taught turns, so every episode makes the call.
        "agent": {"name": "calculator", "system_prompt": "Use the calculator.",
                  "tools": ["tools.py:multiply"], "max_turns": 2, "llm_temperature": 0.3},
        "config": {"algorithm": "grpo", "model": str(model), "max_steps": 2, "batch_size": 2,
                   "num_generations": 2, "max_completion_length": 160, "logging_steps": 1,
                   "seed": 0, "trl": {"beta": 0.0, "use_cpu": True, "bf16": False}},
        "reward_func": "answer_match", "train_dataset": "train.jsonl",
        "run_path": tmp_path / "runs", "train_engine_name": "trl", "base_dir": tmp_path,
    }
    checked = AgentTrainer(**job, check_only=True).hand_off
    functions = checked.tools.schemas()
    prompt = prompt_messages(row["prompt"], checked.agent.episodes.system_prompt)
    call = {"type": "function", "function": {"name": "multiply", "arguments": {"a": 12, "b": 34}}}
    teach_exchange(model, prompt, functions, call, result="408", answer="<answer>408</answer>")

    with nodes(write_job_file(job, nnodes=2), 2, tmp_path, _environment(tmp_path)) as (zero, one):
        assert zero.wait(RUN_S) == 0, zero.text()
        assert one.wait(NODE_LOSS_S) == 0, one.text()

    [run] = (tmp_path / "runs").iterdir()  # node 1 wrote no run of its own
    assert manifest(run)["status"] == "completed"
    steps = [m for m in read_jsonl(run / "metrics.jsonl") if "reward" in m]
    assert [m["step"] for m in steps] == [1, 2]
    # Every episode (rank 0's, which the metrics report) called the tool and was scored on the
    # answer written after its result.
    assert all(m["tools/call_frequency"] == 1.0 and m["reward"] == 1.0 for m in steps), steps
    calls = read_jsonl(tmp_path / "calls.jsonl")
    # 2 steps × 2 episodes on each node, each node's in its own training process.
    assert len({c["pid"] for c in calls}) == 2 and len(calls) == 8, calls
    assert all((c["a"], c["b"]) == (12, 34) for c in calls)
    assert processes_naming(tmp_path) == []
