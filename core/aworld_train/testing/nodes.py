"""Several nodes of one job on this machine, for the engines' tests: each node is an
``aworld-train train`` process with the documented ``NODE_RANK`` / ``MASTER_ADDR`` /
``MASTER_PORT``; they rendezvous over TCP on 127.0.0.1 exactly as nodes of a cluster do.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Node:
    """One node's ``aworld-train train`` process and the file its output goes to."""

    rank: int
    process: subprocess.Popen[bytes]
    output: Path

    def text(self) -> str:
        """What the node printed so far."""
        return self.output.read_text(encoding="utf-8", errors="replace")

    def error_lines(self) -> list[str]:
        """The ``error:`` lines the node printed."""
        return [line for line in self.text().splitlines() if line.startswith("error:")]

    def wait(self, timeout: float) -> int:
        """The node's exit status, once it exits within ``timeout`` seconds.

        :raises subprocess.TimeoutExpired: when it is still running then.
        """
        return self.process.wait(timeout=timeout)


def free_port() -> int:
    """A TCP port nothing listens on now, for a rendezvous."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_node(
    job: Path, rank: int, port: int, folder: Path, env: dict[str, str] | None = None
) -> Node:
    """Start node ``rank`` of ``job`` (a job file whose config says ``resources.nnodes``) in a
    session of its own, its output in ``folder/node<rank>.out``."""
    output = folder / f"node{rank}.out"
    variables = dict(
        os.environ,
        **(env or {}),
        NODE_RANK=str(rank),
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
    )
    with output.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "aworld_train.cli", "train", str(job)],
            cwd=folder,
            env=variables,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # killing a node's tree reaches nothing of the test's
        )
    return Node(rank, process, output)


@contextlib.contextmanager
def nodes(
    job: Path, count: int, folder: Path, env: dict[str, str] | None = None
) -> Iterator[list[Node]]:
    """``count`` nodes of ``job`` started together; whatever is left of them is killed when
    the block ends, so that a failed assertion leaves no process behind."""
    port = free_port()
    started = [start_node(job, rank, port, folder, env) for rank in range(count)]
    try:
        yield started
    finally:
        for node in started:
            kill_tree(node.process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                node.process.wait(timeout=10)


def descendants(pid: int) -> list[int]:
    """Every live process started by ``pid``, however deep, in whatever session (launchers
    start their workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it exited while the list was read
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] not in "ZX":
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    queue = [pid]
    while queue:
        for child in children.get(queue.pop(), []):
            found.append(child)
            queue.append(child)
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and every process it started: a node that dies at once, as a machine
    that loses power does."""
    for target in [pid, *descendants(pid)]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait until ``condition()`` is true, checking every 0.2 s.

    :raises AssertionError: naming ``what`` when it is still false after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.2)


def write_job_file(job: dict[str, Any], nnodes: int, name: str = "job.yaml") -> Path:
    """Write ``AgentTrainer`` keyword arguments (:func:`~aworld_train.testing.fixtures.
    repeat_digit_job`'s) as a job file in their ``base_dir`` with ``resources.nnodes``, for
    ``aworld-train train``; returns its path."""
    import yaml

    keys = {
        "agent": "agent",
        "reward_func": "reward",
        "train_dataset": "train_dataset",
        "test_dataset": "test_dataset",
        "train_engine_name": "engine",
    }
    data = {key: job[given] for given, key in keys.items() if job.get(given) is not None}
    data["config"] = {**job["config"], "resources": {"nnodes": nnodes}}
    data["run_path"] = str(job["run_path"])
    path = Path(job["base_dir"]) / name
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def processes_naming(folder: Path) -> list[int]:
    """The live processes whose command line names something under ``folder``: a node's
    launcher and workers name its job file, so after a test none may be left."""
    marker = str(folder).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker in (entry / "cmdline").read_bytes() and _alive(entry):
                found.append(int(entry.name))
        except OSError:  # it exited while the list was read
            continue
    return found


def _alive(entry: Path) -> bool:
    stat = (entry / "stat").read_text()
    return stat[stat.rindex(")") + 2 :].split()[0] not in "ZX"
