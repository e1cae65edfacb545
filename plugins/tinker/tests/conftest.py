"""One SkyRL tx server for the whole test run (its JAX start-up and compilation are paid once),
serving the repeat-digit example's model built here as a Qwen3; every test that trains or
checks against a service uses it through ``TINKER_BASE_URL`` and ``TINKER_API_KEY``, as a
user's shell would set them."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from jobs import LOCAL_KEY  # noqa: E402
from skyrl_server import start_server  # noqa: E402
from tiny_qwen3 import build_tiny_qwen3, repeat_digit_prepare  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "repeat_digit"


@pytest.fixture(scope="session")
def repeat_digit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``examples/repeat_digit`` with what its ``prepare.py`` builds: the model with
    the same arguments, but a Qwen3 (SkyRL tx serves no Qwen2), and the same datasets."""
    prepare = repeat_digit_prepare()
    copy = tmp_path_factory.mktemp("examples") / "repeat_digit"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("build", "runs"))
    build = copy / "build"
    build_tiny_qwen3(build / "model", **prepare.MODEL_ARGS)
    prepare.write_dataset(build / "train.jsonl", [i % 10 for i in range(prepare.ROWS)])
    prepare.write_dataset(build / "test.jsonl", list(range(10)))
    return copy


@pytest.fixture(scope="session")
def served_model(repeat_digit: Path) -> Path:
    return repeat_digit / "build" / "model"


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
