"""One TRL job on two nodes simulated on this machine: two ``aworld-train train`` processes with
``NODE_RANK`` 0 and 1, ``MASTER_ADDR=127.0.0.1`` and ``MASTER_PORT``, ``resources.nnodes: 2``,
joined over TCP (gloo on CPU) as two machines are."""

from __future__ import annotations

import os
import signal
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
from aworld_train.testing.tool_nodes import assert_tool_agent_trains_on_two_nodes

# A node ends at most this long after the other died (measured: ~15 s on 2 busy cores, most of
# it torchrun's own shutdown).
NODE_LOSS_S = 60
# Checks (~35 s here: each node imports torch and TRL and reads the model) plus training.
RUN_S = 400


def _environment(tmp_path: Path) -> dict[str, str]:
    # CPU processes; node 1's working folder lands under the test's folder.
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {
        "CUDA_VISIBLE_DEVICES": "",
        "TMPDIR": str(tmp_path / "tmp"),
        "AWORLD_TRAIN_JOIN_TIMEOUT": "300",
    }


def _cpu(job: dict[str, Any], max_steps: int) -> Path:
    job["config"] = dict(job["config"], max_steps=max_steps)
    job["config"]["trl"] = dict(job["config"]["trl"], use_cpu=True, bf16=False)
    return write_job_file(job, nnodes=2)


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("kill", ["tree", "aworld-train only"])
def test_a_killed_node_ends_the_other_with_one_error_and_a_failed_run(
    job: dict[str, Any], tmp_path: Path, kill: str
) -> None:
    """A machine that loses power (every process at once), or its ``aworld-train`` process
    alone killed, whose launcher and workers the kernel then stops."""
    with nodes(_cpu(job, max_steps=5000), 2, tmp_path, _environment(tmp_path)) as (zero, one):
        wait_for(
            lambda: any(path.stat().st_size for path in tmp_path.glob("runs/*/metrics.jsonl")),
            RUN_S,
            "node 0 trains",
        )
        if kill == "tree":
            kill_tree(one.process.pid)
        else:
            os.kill(one.process.pid, signal.SIGKILL)
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


@pytest.mark.slow
def test_an_agent_with_a_python_tool_trains_on_two_nodes_each_running_its_own_episodes(
    tmp_path: Path,
) -> None:
    assert_tool_agent_trains_on_two_nodes(
        tmp_path,
        "trl",
        {"beta": 0.0, "use_cpu": True, "bf16": False},
        _environment(tmp_path),
        RUN_S,
    )
