"""One SkyRL tx server for the whole test run (its JAX start-up and compilation are paid once),
serving a tiny Qwen3 built here; every test that trains or checks against a service uses it
through ``TINKER_BASE_URL`` and ``TINKER_API_KEY``, as a user's shell would set them."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from skyrl_server import start_server  # noqa: E402
from jobs import LOCAL_KEY  # noqa: E402
from tiny_qwen3 import build_tiny_qwen3  # noqa: E402


@pytest.fixture(scope="session")
def served_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen3(tmp_path_factory.mktemp("qwen3"))


@pytest.fixture(scope="session")
def server(served_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with start_server(served_model, tmp_path_factory.mktemp("skyrl")) as running:
        yield running.url


@pytest.fixture
def service(server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The server's URL, in the environment the engine and the CLI read it from."""
    monkeypatch.setenv("TINKER_BASE_URL", server)
    monkeypatch.setenv("TINKER_API_KEY", LOCAL_KEY)
    return server
