"""A SkyRL tx server on this machine, serving the Tinker API for one base model on JAX's CPU
backend: what the tests and the benchmark train against.

SkyRL tx's API process starts its engine process with ``uv run --extra tinker --extra jax -m
tx.tinker.engine ...``, which needs uv and SkyRL's source tree. Outside that tree a ``uv`` first
on ``PATH`` that runs ``<this python> -m tx.tinker.engine <the same arguments>`` starts the same
engine from the installed package: :func:`start_server` writes one into the server's folder.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

# The first start compiles nothing yet, but imports JAX twice (API and engine): ~30-60 s here.
START_TIMEOUT = 240

_UV_SHIM = """#!/bin/sh
# Stands in for `uv run --extra ... -m MODULE ARGS`: runs MODULE ARGS with the venv's python.
while [ "$#" -gt 0 ] && [ "$1" != "-m" ]; do shift; done
exec {python} "$@"
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]


@contextmanager
def start_server(
    model: Path, folder: Path, backend_config: dict[str, object] | None = None
) -> Iterator[Server]:
    """Serve ``model`` on a free loopback port until the block ends.

    The database, checkpoints, the ``uv`` shim and the server's log go to ``folder``; a server
    started again on the same folder has the checkpoints of the one before.
    """
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / "bin" / "uv"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(_UV_SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "tx.tinker.api",
        "--base-model", str(model),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--database-url", f"sqlite:///{folder / 'tinker.db'}",
        "--checkpoints-base", str(folder / "checkpoints"),
        "--backend-config", json.dumps(backend_config or {}),
    ]  # fmt: skip
    environment = dict(
        os.environ,
        PATH=f"{shim.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        JAX_PLATFORMS="cpu",
    )
    log = (folder / "server.log").open("ab")
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
    )
    try:
        _wait_healthy(url, process, folder / "server.log")
        yield Server(url, process)
    finally:
        stop_server(process)
        log.close()


def stop_server(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group (the API process and its engine), SIGKILL after
    20 seconds."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_healthy(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the SkyRL tx server exited ({process.returncode}); see {log}")
        try:
            with urllib.request.urlopen(f"{url}/api/v1/healthz", timeout=2) as answer:
                if json.load(answer).get("status") == "ok":
                    return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"the SkyRL tx server did not answer within {START_TIMEOUT} s; see {log}")
