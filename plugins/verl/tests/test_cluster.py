"""``check`` with a Ray cluster: what the job asks for against what the cluster holds.

The cluster is a local Ray head started with ``--num-gpus 2``: fake GPUs, declared as Ray
resources on a machine that has none. That is the one fake here, and it is what Ray itself
schedules by; nothing is placed on them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aworld_train.errors import ConfigError
from aworld_train.testing.nodes import free_port
from aworld_train_verl.cluster import (
    ClusterNode,
    Demand,
    endpoint,
    shortfall,
)

# 16 CPUs: VeRL takes 3 per GPU and holds 10 for its other actors (the transfer queue's).
HEAD_GPUS, HEAD_CPUS = 2, 16
# An address where nothing listens ends the check at once (an unroutable one after the
# 3 s TCP probe); the rest is the checks before it.
NO_HEAD_S = 30.0


@pytest.fixture(scope="module")
def ray_head() -> Iterator[str]:
    """A local Ray head with :data:`HEAD_GPUS` declared (fake) GPUs and no token
    authentication (Ray turns it on by itself where ``~/.ray/auth_token`` exists); its address."""
    with _ray_head({"RAY_AUTH_MODE": "disabled"}) as address:
        yield address


@contextlib.contextmanager
def _ray_head(auth: dict[str, str]) -> Iterator[str]:
    """``ray start --head`` with the environment ``auth`` added; its address.

    ``ray start`` leaves its processes in its own process group: the group is stopped at the
    end, never every Ray on the machine as ``ray stop`` would."""
    port = free_port()
    # Ray's socket paths must stay short: not under pytest's deep tmp_path.
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    ray = Path(sys.executable).with_name("ray")
    started = subprocess.Popen(
        [
            str(ray),
            "start",
            "--head",
            f"--num-gpus={HEAD_GPUS}",
            f"--num-cpus={HEAD_CPUS}",
            f"--port={port}",
            "--include-dashboard=false",
            "--disable-usage-stats",
            f"--temp-dir={temp}",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, **auth},
    )
    try:
        output, _ = started.communicate(timeout=120)
        assert started.returncode == 0, output.decode(errors="replace")
        yield f"127.0.0.1:{port}"
    finally:
        _stop_group(started.pid)
        import shutil

        shutil.rmtree(temp, ignore_errors=True)


def _stop_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def _check(tmp_path: Path, model: Path, **resources: Any) -> Any:
    from aworld_train import AgentTrainer

    rows = [{"prompt": f"Repeat: {d}", "ground_truth": str(d)} for d in range(8)]
    return AgentTrainer(
        train_dataset=rows,
        reward_func="exact_match",
        config={
            "model": str(model),
            "max_steps": 2,
            "batch_size": 4,
            "num_generations": 2,
            "resources": resources,
        },
        train_engine_name="verl",
        run_path=tmp_path / "runs",
        check_only=True,
    )


@pytest.mark.slow
def test_a_job_that_fits_the_cluster_passes(
    ray_head: str, tmp_path: Path, tiny_model: Path
) -> None:
    trainer = _check(tmp_path, tiny_model, ray_address=ray_head, gpus_per_node=2, nnodes=1)
    assert [c for c in trainer.checks if c.module == "config" and c.by == "verl"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("resources", "says"),
    [
        (
            {"gpus_per_node": 4, "nnodes": 1},
            "the job asks for 4 GPU(s) (n_gpus_per_node 4 x nnodes 1), it holds 1 node(s): 2 GPU 16 CPU",
        ),
        (
            {"gpus_per_node": 1, "nnodes": 2},
            "the job asks for 2 node(s) with 1 GPU(s) and 3 CPU(s) each",
        ),
    ],
)
def test_a_job_the_cluster_cannot_hold_is_refused_in_one_line(
    ray_head: str, tmp_path: Path, tiny_model: Path, resources: dict[str, int], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _check(tmp_path, tiny_model, ray_address=ray_head, **resources)
    line = str(caught.value)
    assert line.startswith(f"the Ray cluster at {ray_head} cannot hold this job: ")
    assert says in line and "\n" not in line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


@pytest.mark.slow
def test_ray_address_from_the_environment_is_checked_too(
    ray_head: str, tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_ADDRESS", ray_head)
    with pytest.raises(ConfigError, match=r"asks for 4 GPU\(s\) \(n_gpus_per_node 4 x nnodes 1\)"):
        _check(tmp_path, tiny_model, gpus_per_node=4, nnodes=1)


@pytest.mark.slow
def test_a_cluster_that_asks_for_a_token_is_named_so(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray connects to an address it is given without a token unless ``RAY_AUTH_MODE=token``
    (VeRL's own ``ray.init`` too): the check says so, and passes once the user sets it."""
    token = tmp_path / "auth_token"
    token.write_text(secrets.token_hex(32))
    with _ray_head({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}) as address:
        monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
        monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
        with pytest.raises(ConfigError) as caught:
            _check(tmp_path, tiny_model, ray_address=address, gpus_per_node=1)
        line = str(caught.value)
        assert line.startswith(f"the Ray cluster at {address} asks for an authentication token: ")
        assert "RAY_AUTH_MODE=token" in line and "\n" not in line

        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
        trainer = _check(tmp_path, tiny_model, ray_address=address, gpus_per_node=1)
        assert [c for c in trainer.checks if c.module == "config" and c.by == "verl"]


def test_no_head_answering_is_refused_within_seconds(tmp_path: Path, tiny_model: Path) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        _check(tmp_path, tiny_model, ray_address=address, gpus_per_node=1)
    took = time.monotonic() - started
    assert str(caught.value).startswith(f"the Ray cluster at {address} does not answer: ")
    assert took < NO_HEAD_S


def test_shortfall_counts_gpus_per_node_and_cpus() -> None:
    two_nodes = [ClusterNode(gpus=2, cpus=8), ClusterNode(gpus=2, cpus=8)]
    assert shortfall(two_nodes, Demand(nnodes=2, gpus_per_node=2, cpus_held=1)) is None
    # 4 GPUs in all, but not 4 on one node.
    assert "1 node(s) with 4 GPU(s)" in (shortfall(two_nodes, Demand(1, 4, 1)) or "")
    # GPUs enough, CPUs not: 2 x 2 GPUs x 3 CPUs + 5 held > 16.
    assert "asks for 17 CPU(s)" in (shortfall(two_nodes, Demand(2, 2, 5)) or "")
    assert "no alive node" in (shortfall([], Demand(1, 1, 1)) or "")


@pytest.mark.parametrize(
    ("address", "where"),
    [
        ("10.0.0.5:6380", ("10.0.0.5", 6380)),
        ("10.0.0.5", ("10.0.0.5", 6379)),
        ("ray://head:10002", ("head", 10002)),
        ("ray://head", ("head", 10001)),
        ("auto", None),
    ],
)
def test_endpoint(address: str, where: tuple[str, int] | None) -> None:
    assert endpoint(address) == where
