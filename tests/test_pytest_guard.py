"""The guard every suite runs under (aworld_train.testing.pytest_guard): tests stay on this
machine, the hubs are offline, and SIGINT reaches the tests however the suite was started."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from aworld_train.testing.pytest_guard import NetworkRefused


def test_a_connection_to_another_machine_is_refused_at_once() -> None:
    # 203.0.113.0/24 is reserved for documentation: no machine here holds it.
    with (
        socket.socket() as sock,
        pytest.raises(
            NetworkRefused,
            match=r"^this test reached for "
            r"203\.0\.113\.7:443, another machine; mark it "
            r"network",
        ),
    ):
        sock.connect(("203.0.113.7", 443))


def test_connections_to_this_machine_go_through() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.socket() as client:
            client.connect(server.getsockname())
            assert client.getpeername() == server.getsockname()
    # An address of one of this machine's own interfaces is this machine too (a Ray head
    # binds one): the guard refuses it only if nothing here holds it.
    own = socket.gethostbyname(socket.gethostname())
    with socket.socket() as server:
        server.bind((own, 0))
        server.listen(1)
        with socket.socket() as client:
            assert client.connect_ex(server.getsockname()) == 0


def test_the_hubs_are_offline() -> None:
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["MODELSCOPE_OFFLINE"] == "1"


def test_a_suite_started_with_sigint_ignored_gets_python_s_handler(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import signal\n"
        "def test_sigint():\n"
        "    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "aworld_train.testing.pytest_guard",
            "-p",
            "no:cacheprovider",
            str(probe),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        # As a background job of a shell without job control starts it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
