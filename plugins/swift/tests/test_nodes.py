"""One ms-swift job on two nodes simulated on this machine: two ``aworld-train train`` processes
with ``NODE_RANK`` 0 and 1, ``MASTER_ADDR=127.0.0.1`` and ``MASTER_PORT``,
``resources.nnodes: 2``, joined by torchrun over TCP (gloo on CPU) as two machines are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.testing.fixtures import manifest, read_jsonl
from aworld_train.testing.nodes import (
    free_port,
    kill_tree,
    nodes,
    processes_naming,
    start_node,
    write_job_file,
)
from aworld_train.testing.tool_nodes import assert_tool_agent_trains_on_two_nodes

# Checks (~35 s here: each node imports torch and ms-swift and reads the model) plus training.
RUN_S = 400
# How long node 1 waits for a node 0 that never starts, in this test.
JOIN_S = 10
# Two nodes against one process: the same rows in each step, the gradients averaged over the
# nodes instead of summed in one batch. Measured: equal to 1e-7.
LOSS_TOLERANCE = 1e-5


def _environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    # CPU processes; node 1's working folder lands under the test's folder.
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return {
        "CUDA_VISIBLE_DEVICES": "",
        "TMPDIR": str(tmp_path / "tmp"),
        "AWORLD_TRAIN_JOIN_TIMEOUT": "300",
        **extra,
    }


def _sft(job: dict[str, Any], batch_size: int) -> dict[str, Any]:
    config = dict(
        job["config"], algorithm="sft", max_steps=4, batch_size=batch_size, learning_rate=5e-3
    )
    config.pop("num_generations")
    config["swift"] = {"template": "qwen", "use_cpu": True, "torch_dtype": "float32"}
    return dict(job, config=config)


def _losses(run: Path) -> list[float]:
    return [m["loss"] for m in read_jsonl(run / "metrics.jsonl") if "loss" in m]


@pytest.mark.slow
def test_sft_on_two_nodes_is_one_run_with_the_losses_of_one_node(
    job: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two nodes of one process, 2 rows each per step: a global batch of 4.
    with nodes(
        write_job_file(_sft(job, batch_size=2), nnodes=2), 2, tmp_path, _environment(tmp_path)
    ) as (zero, one):
        assert zero.wait(RUN_S) == 0, zero.text()
        assert one.wait(60) == 0, one.text()
    [run] = (tmp_path / "runs").iterdir()  # node 1 wrote no run of its own
    assert manifest(run)["status"] == "completed"
    assert (run / "model" / "config.json").is_file()
    assert not list((tmp_path / "tmp").glob("aworld-train-node*"))
    assert processes_naming(tmp_path) == []

    # One node, one process, a batch of 4.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    single = AgentTrainer(**dict(_sft(job, batch_size=4), run_path=tmp_path / "one"))
    single.train()
    two_nodes, one_node = _losses(run), _losses(single.run_dir.path)
    assert len(two_nodes) == 4
    assert two_nodes == pytest.approx(one_node, rel=LOSS_TOLERANCE)


@pytest.mark.slow
def test_a_node_whose_main_node_never_starts_fails_in_one_line(
    job: dict[str, Any], tmp_path: Path
) -> None:
    path = write_job_file(_sft(job, batch_size=2), nnodes=2)
    one = start_node(
        path,
        1,
        free_port(),
        tmp_path,
        _environment(tmp_path, AWORLD_TRAIN_JOIN_TIMEOUT=str(JOIN_S)),
    )
    try:
        status = one.wait(RUN_S)
    finally:
        kill_tree(one.process.pid)
    assert status != 0
    [error] = one.error_lines()
    assert "the 2 nodes did not all join at 127.0.0.1:" in error
    assert f"within {JOIN_S} s (AWORLD_TRAIN_JOIN_TIMEOUT)" in error
    # No run anywhere; the node's own folder is kept for its log, which the line names.
    assert not (tmp_path / "runs").exists()
    [kept] = (tmp_path / "tmp").glob("aworld-train-node1-*")
    assert str(kept / "swift_workers.log") in error
    assert processes_naming(tmp_path) == []


@pytest.mark.slow
def test_an_agent_with_a_python_tool_trains_on_two_nodes_each_running_its_own_episodes(
    tmp_path: Path,
) -> None:
    assert_tool_agent_trains_on_two_nodes(
        tmp_path,
        "swift",
        {"template": "qwen", "beta": 0.0, "use_cpu": True, "torch_dtype": "float32"},
        _environment(tmp_path),
        RUN_S,
    )
