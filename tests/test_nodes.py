"""A job on several nodes: only node 0 writes a run; another node's failure is named as such.

The engines' tests train on two nodes simulated on this machine; these are the core's parts.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from aworld_train.errors import RunDirectoryError, TrainingError
from aworld_train.launch.workers import DEFAULT_JOIN_TIMEOUT_S, join_timeout, node_failure
from aworld_train.run.directory import RunDirectory, node_rank


@pytest.mark.parametrize(("value", "rank"), [(None, 0), ("0", 0), ("1", 1), ("3", 3), ("x", 0)])
def test_node_rank_reads_node_rank(
    monkeypatch: pytest.MonkeyPatch, value: str | None, rank: int
) -> None:
    if value is None:
        monkeypatch.delenv("NODE_RANK", raising=False)
    else:
        monkeypatch.setenv("NODE_RANK", value)
    assert node_rank() == rank


def test_a_node_above_zero_works_in_a_temporary_folder_removed_when_it_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODE_RANK", "1")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    run = RunDirectory.for_checks(tmp_path / "runs", "trl", check_only=False)
    assert run.node_rank == 1
    assert run.path.parent == (tmp_path / "tmp").resolve()
    assert run.path.name.startswith("aworld-train-node1-")
    run.require_nodes(2)
    run.start({"engine": "trl"})
    run.begin()
    run.close(None, {})
    assert not run.path.exists()
    assert not (tmp_path / "runs").exists()  # node 0 makes the run path and the run


def test_a_failed_node_keeps_its_folder_for_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    run = RunDirectory.for_node(2)
    run.start({"engine": "trl"})
    run.begin()
    run.close(TrainingError("the other node left"), {})
    assert (run.path / "manifest.json").is_file()
    assert (run.path / "error.log").is_file()


def test_node_zero_and_a_check_only_run_are_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NODE_RANK", "0")
    run = RunDirectory.for_checks(tmp_path / "runs", "trl", check_only=False)
    assert run.node_rank == 0 and run.path.parent == (tmp_path / "runs").resolve()
    monkeypatch.setenv("NODE_RANK", "1")
    assert RunDirectory.for_checks(tmp_path / "runs", "trl", check_only=True).scratch


def test_node_rank_above_zero_on_a_one_node_job_is_refused(tmp_path: Path) -> None:
    run = RunDirectory(tmp_path, node_rank=1)
    with pytest.raises(RunDirectoryError, match="NODE_RANK is 1 but resources.nnodes is 1"):
        run.require_nodes(1)


@pytest.mark.parametrize(("value", "seconds"), [(None, DEFAULT_JOIN_TIMEOUT_S), ("45", 45)])
def test_join_timeout(monkeypatch: pytest.MonkeyPatch, value: str | None, seconds: int) -> None:
    if value is None:
        monkeypatch.delenv("AWORLD_TRAIN_JOIN_TIMEOUT", raising=False)
    else:
        monkeypatch.setenv("AWORLD_TRAIN_JOIN_TIMEOUT", value)
    assert join_timeout() == seconds


@pytest.mark.parametrize("value", ["0", "-3", "ten", "1.5"])
def test_a_bad_join_timeout_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_JOIN_TIMEOUT", value)
    with pytest.raises(TrainingError, match="AWORLD_TRAIN_JOIN_TIMEOUT is"):
        join_timeout()


# The lines torch 2.13 prints, as the engines' tests met them.
NEVER_JOINED = (
    "torch.distributed.DistStoreError: Timed out after 16 seconds waiting for "
    "clients. 1/2 clients joined."
)
CLIENT_TIMED_OUT = (
    "torch.distributed.DistNetworkError: The client socket has timed out after "
    "10000ms while trying to connect to (127.0.0.1, 29613)."
)
PEER_LEFT = (
    "[rank0]: RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer "
    "[127.0.0.1]:16085. This is typically caused by a remote worker crashing."
)


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (NEVER_JOINED, "the 2 nodes did not all join at 127.0.0.1:29500 within 300 s"),
        (CLIENT_TIMED_OUT, "did not all join"),
        (PEER_LEFT, "another node of the 2 stopped while training"),
    ],
)
def test_another_nodes_failure_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str, says: str
) -> None:
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.delenv("AWORLD_TRAIN_JOIN_TIMEOUT", raising=False)
    log = tmp_path / "workers.log"
    log.write_text(f"Traceback (most recent call last):\n{line}\n")
    assert says in (node_failure(log, 2) or "")
    assert node_failure(log, 1) is None  # one node: the library's own line says it


def test_a_failure_of_this_node_is_left_to_the_librarys_line(tmp_path: Path) -> None:
    log = tmp_path / "workers.log"
    log.write_text("ZeroDivisionError: division by zero\n")
    assert node_failure(log, 2) is None
