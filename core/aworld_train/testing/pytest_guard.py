"""What every test suite of the project runs under (``-p aworld_train.testing.pytest_guard``,
set in ``pyproject.toml``): no test reaches beyond this machine, and the markers are declared.

A test that opens a connection to an address of another machine fails at once, naming the
address, unless it is marked ``network``, which the default selection leaves out. Connections
to this machine (loopback, its own interfaces: MCP servers, the agent runtime's endpoint, a
local Ray head, two "nodes" on localhost) are what the tests are made of and stay allowed. The
hubs are also told to stay offline, so a library that would download a model fails fast.

A suite started as a background job of a shell without job control (``cmd &`` in a script)
inherits SIGINT ignored, and so would every process its tests start: the guard gives it back
Python's own handler, so the tests of Ctrl-C see the signal as a terminal delivers it.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import signal
import socket
from collections.abc import Iterator
from typing import Any

import pytest

MARKERS = {
    "slow": "trains a model, builds wheels or starts a server: more than about ten seconds; "
    "`make test-fast` leaves it out",
    "gpu": "needs a CUDA GPU; left out unless selected with -m gpu",
    "network": "reaches another machine; left out unless selected with -m network",
    "browser": "drives a real Chromium (Debian's chromium, `make chromium`); `make test-fast` "
    "leaves it out",
}
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "MODELSCOPE_OFFLINE": "1",
}


def pytest_configure(config: pytest.Config) -> None:
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    for name, value in OFFLINE.items():
        os.environ.setdefault(name, value)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@functools.lru_cache(maxsize=256)
def _on_this_machine(host: str) -> bool:
    """Loopback, or an address one of this machine's interfaces holds (it can be bound)."""
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return host == "localhost"
    if address.is_loopback or address.is_unspecified:
        return True
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((str(address), 0))
        except OSError:
            return False
    return True


class NetworkRefused(OSError):
    """A test reached for another machine."""


def _guarded(connect: Any) -> Any:
    @functools.wraps(connect)
    def guarded(self: socket.socket, address: Any, *args: Any) -> Any:
        if (
            self.family in (socket.AF_INET, socket.AF_INET6)
            and isinstance(address, tuple)
            and not _on_this_machine(str(address[0]))
        ):
            raise NetworkRefused(
                f"this test reached for {address[0]}:{address[1]}, another "
                f"machine; mark it network (pytest.mark.network) if it must"
            )
        return connect(self, address, *args)

    return guarded


@pytest.fixture(autouse=True)
def _stay_on_this_machine(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if request.node.get_closest_marker("network") is None:
        monkeypatch.setattr(socket.socket, "connect", _guarded(socket.socket.connect))
        monkeypatch.setattr(socket.socket, "connect_ex", _guarded(socket.socket.connect_ex))
    yield
