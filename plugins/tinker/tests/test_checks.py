"""``aworld-train check`` on the tinker engine: each bad job or unusable service is one
``error:`` line naming the key or the URL, exit 2, in seconds.

The checks that need no Tinker server run in this process (the CLI's ``main``); a server that
answers 404 to every route is any web server that is not a Tinker API, and one that answers 401
stands in for the cloud's key check, which SkyRL tx (it checks no key) cannot show. The
checks against the real SkyRL tx server are marked slow: they share its session fixture.
"""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aworld_train.cli import main
from jobs import LOCAL_KEY, error_line, run_cli, write_job


@pytest.fixture
def check(
    tmp_path: Path, served_model: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> Any:  # fmt: skip
    """Run ``aworld-train check`` in this process on a job with ``config``, against ``url``
    with ``key``; returns the exit code and the ``error:`` lines."""

    def run(
        url: str, config: dict[str, Any] | None = None, key: str | None = LOCAL_KEY
    ) -> tuple[int, list[str]]:
        monkeypatch.setenv("TINKER_BASE_URL", url)
        if key is None:
            monkeypatch.delenv("TINKER_API_KEY", raising=False)
        else:
            monkeypatch.setenv("TINKER_API_KEY", key)
        job = write_job(tmp_path, served_model, config)
        capsys.readouterr()
        try:
            main(["check", str(job)])
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        err = capsys.readouterr().err
        return code, [line for line in err.splitlines() if line.startswith("error:")]

    return run


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def answering() -> Iterator[Any]:
    """Start a loopback HTTP server answering every GET with ``status``; yields its URL."""
    servers: list[http.server.HTTPServer] = []

    def start(status: int) -> str:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"detail": "no"}')

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()


def test_an_unreachable_service_is_one_line(check: Any, closed_port: int) -> None:
    url = f"http://127.0.0.1:{closed_port}"
    code, errors = check(url)
    assert code == 2 and len(errors) == 1, errors
    assert f"tinker service {url} is not reachable" in errors[0]
    assert "tinker.base_url" in errors[0]


def test_a_service_that_never_answers_is_given_up_on_in_bounded_time(check: Any) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        began = time.monotonic()
        code, errors = check(url, {"tinker": {"connect_timeout": 1.0}})
    assert code == 2 and "timed out" in errors[0] and "waited up to 1 s" in errors[0], errors
    assert time.monotonic() - began < 30


def test_a_server_that_is_not_a_tinker_api_is_a_protocol_mismatch(
    check: Any, answering: Any
) -> None:
    url = answering(404)
    code, errors = check(url)
    assert code == 2 and len(errors) == 1, errors
    assert f"tinker service {url} does not speak the Tinker API of the tinker SDK" in errors[0]
    assert "/api/v1/healthz has no such route" in errors[0]


def test_a_refused_key_is_one_line(check: Any, answering: Any) -> None:
    url = answering(401)
    code, errors = check(url, key="tml-wrong-key")
    assert code == 2 and len(errors) == 1, errors
    assert f"tinker service {url} refused the API key in TINKER_API_KEY" in errors[0]
    assert "tml-wrong-key" not in errors[0]


@pytest.mark.parametrize(
    ("key", "says"),
    [(None, "no API key: set TINKER_API_KEY"), ("sk-123", "does not start with 'tml-'")],
)
def test_a_missing_or_malformed_key_is_one_line(
    check: Any, closed_port: int, key: str | None, says: str
) -> None:
    code, errors = check(f"http://127.0.0.1:{closed_port}", key=key)
    assert code == 2 and says in errors[0], errors


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"lora": {"rank": 64}}, "config lora rank 64: the service trains ranks up to 32"),
        ({"tinker": {"lora_rank": 64, "max_lora_rank": 128}, "lora": {"rank": 8}},
         "config lora.rank: 8 and tinker.lora_rank: 64 disagree"),
        ({"tinker": {"api_key": "tml-secret"}}, "config tinker.api_key: the key is not written"),
        ({"tinker": {"loss_fun": "ppo"}}, "unknown tinker key 'loss_fun'"),
        ({"tinker": {"loss_fn": "dpo"}}, "config tinker.loss_fn: 'dpo' is not a GRPO loss"),
        ({"tinker": {"lora_rank": "eight"}}, "config tinker.lora_rank: expected an integer"),
        ({"algorithm": "ppo"}, "the tinker engine trains grpo and sft, not 'ppo'"),
        ({"kl_coef": 0.1}, "config kl_coef: 0.1: the service's losses have no KL term"),
        ({"clip_ratio": 0.2}, "config clip_ratio: the tinker engine cannot apply it"),
        ({"lora": {"rank": 8, "dropout": 0.1}}, "config lora: the service adapts every linear"),
        ({"lora": None}, "config lora: null asks for full fine-tuning"),
    ],
)  # fmt: skip
def test_a_job_the_service_cannot_train_is_one_line(
    check: Any, closed_port: int, config: dict[str, Any], says: str
) -> None:
    code, errors = check(f"http://127.0.0.1:{closed_port}", config)
    assert code == 2 and len(errors) == 1 and says in errors[0], errors
    assert "tml-secret" not in errors[0]


@pytest.mark.slow
def test_check_passes_against_the_server(service: str, tmp_path: Path, served_model: Path) -> None:
    result = run_cli("check", str(write_job(tmp_path, served_model)), url=service)
    assert result.returncode == 0, result.stderr
    assert "all checks passed" in result.stdout


@pytest.mark.slow
def test_a_base_model_the_server_does_not_serve_is_one_line(
    service: str, tmp_path: Path, served_model: Path
) -> None:
    job = write_job(tmp_path, served_model, {"tinker": {"base_model": "Qwen/Qwen3-8B"}})
    result = run_cli("check", str(job), url=service)
    assert result.returncode == 2
    line = error_line(result)
    assert f"tinker service {service} does not serve the base model 'Qwen/Qwen3-8B'" in line
    assert str(served_model) in line


def test_a_base_model_that_tokenizes_otherwise_is_one_line(
    check: Any, closed_port: int, tmp_path: Path
) -> None:
    from aworld_train.engine.testing import build_tiny_model

    other = build_tiny_model(tmp_path / "other", alphabet="0123456789")
    code, errors = check(f"http://127.0.0.1:{closed_port}", {"tinker": {"base_model": str(other)}})
    assert code == 2 and len(errors) == 1, errors
    assert f"tinker.base_model {other} tokenize differently (vocabulary" in errors[0]
