"""The guard every suite runs under (aworld_train.testing.pytest_guard): tests stay on this
machine, and the hubs are offline."""

from __future__ import annotations

import os
import socket

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
