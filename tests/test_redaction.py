"""One redaction rule: secret-named keys, URL credentials, secret flags, env mappings,
remembered secrets in free text and in log records."""

from __future__ import annotations

import copy
import io
import json
import logging
import os
import pickle
from pathlib import Path
from typing import Any

import pytest
import yaml
from aworld_train.run import redaction
from aworld_train.run.redaction import (
    REDACTED,
    SecretFilter,
    install_secret_filter,
    is_secret_key,
    redact,
    redact_text,
    remember_secrets,
)


def scan_for_secrets(root: Path, secrets: list[str]) -> list[Path]:
    """Every file under ``root`` (binary files included) that holds one of ``secrets``."""
    needles = [s.encode() for s in secrets]
    return sorted(
        path
        for path in root.rglob("*")
        if path.is_file() and any(n in path.read_bytes() for n in needles)
    )


@pytest.fixture(autouse=True)
def clean_slate(monkeypatch: pytest.MonkeyPatch) -> None:
    """No secret remembered by another test, none in this machine's environment."""
    monkeypatch.setattr(redaction, "_remembered", set())
    for name in list(os.environ):
        if redaction._ENV_SECRET.search(name.upper()):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "llm_api_key",
        "OPENAI_API_KEY",
        "apiKey",
        "APIKey",
        "X-Api-Key",
        "x-api-key",
        "private_key",
        "access_key",
        "aws_access_key_id",
        "key",
        "token",
        "hub_token",
        "access_token",
        "HF_TOKEN",
        "accessToken",
        "push_to_hub_token",
        "password",
        "db_passwd",
        "pass",
        "smtp_pass",
        "client_secret",
        "aws_secret_access_key",
        "Authorization",
        "auth",
        "Cookie",
        "credentials",
        "headers",
        "extra_headers",
        "env",
    ],
)
def test_secret_keys_are_redacted(key: str) -> None:
    assert is_secret_key(key)
    assert redact({key: "value"}) == {key: REDACTED}


@pytest.mark.parametrize(
    "key",
    [
        "max_keys",
        "keys",
        "monkey",
        "keyword",
        "KeyboardInterrupt",
        "max_tokens",
        "llm_max_tokens",
        "max_new_tokens",
        "num_tokens",
        "tokens_per_second",
        "tokenizer",
        "pad_token",
        "eos_token",
        "pad_token_id",
        "max_token",
        "ppo_max_token_len_per_gpu",
        "passage",
        "compass",
        "bypass",
        "passthrough",
        "pass@1",
        "pass_rate",
        "author",
        "max_completion_length",
        "runtime_env",
        "hub_private_repo",
    ],
)
def test_keys_that_only_look_like_secrets_are_kept(key: str) -> None:
    assert not is_secret_key(key)
    assert redact({key: 512}) == {key: 512}
    assert redact({key: "gpt2"}) == {key: "gpt2"}


def test_no_value_and_placeholders_are_not_secrets() -> None:
    data = {
        "api_key": None,
        "hub_token": "",
        "use_auth_token": True,
        "llm_api_key": "${OPENAI_API_KEY}",
        "password": 123456,
    }
    assert redact(data) == {
        "api_key": None,
        "hub_token": "",
        "use_auth_token": True,
        "llm_api_key": "${OPENAI_API_KEY}",
        "password": REDACTED,
    }


def test_headers_and_env_keep_their_names_and_hide_every_value() -> None:
    data = {
        "headers": {"Authorization": "Bearer abc123", "Accept": "application/json"},
        "env": {"SEARCH_KEY": "s3cr3t-value", "LOG_LEVEL": "debug"},
        "environment": ["A=1"],
    }
    assert redact(data) == {
        "headers": {"Authorization": REDACTED, "Accept": REDACTED},
        "env": {"SEARCH_KEY": REDACTED, "LOG_LEVEL": REDACTED},
        "environment": [REDACTED],
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("https://user:pass@host/v1", f"https://{REDACTED}@host/v1"),
        (
            "see http://ghp_tokenvalue@github.com/x.git now",
            f"see http://{REDACTED}@github.com/x.git now",
        ),
        ("wss://me:p@ss@host:8080", f"wss://{REDACTED}@host:8080"),
        (
            "https://h/q?api_key=sk-1&token=t-2&max_tokens=5&page=2",
            f"https://h/q?api_key={REDACTED}&token={REDACTED}&max_tokens=5&page=2",
        ),
        ("https://h/?key=sk-live-123456#top", f"https://h/?key={REDACTED}#top"),
        ("npx server --api-key=sk-1 --port=80", f"npx server --api-key={REDACTED} --port=80"),
    ],
)
def test_url_credentials_and_secret_parameters_in_any_string(text: str, expected: str) -> None:
    assert redact_text(text) == expected
    assert redact({"note": text}) == {"note": expected}


@pytest.mark.parametrize(
    "text",
    [
        "https://host/path@v2/x",
        "https://h/q?max_tokens=5&keys=a&passage=b",
        "user@example.com",
        "--max-tokens=512 --tokenizer=gpt2",
        "a compass, a passage and a monkey",
    ],
)
def test_look_alikes_in_strings_are_kept(text: str) -> None:
    assert redact_text(text) == text


def test_values_after_secret_flags_in_argument_lists() -> None:
    args = [
        "--api-key",
        "sk-1",
        "--token=hf_2",
        "--auth-header",
        "Bearer x",
        "--password",
        "--verbose",
        "--max-tokens",
        "512",
        "--tokenizer",
        "gpt2",
        "--keys",
        "a",
        "-p",
        "80",
    ]
    assert redact(args) == [
        "--api-key",
        REDACTED,
        f"--token={REDACTED}",
        "--auth-header",
        REDACTED,
        "--password",
        "--verbose",
        "--max-tokens",
        "512",
        "--tokenizer",
        "gpt2",
        "--keys",
        "a",
        "-p",
        "80",
    ]


def job_with_secrets() -> dict[str, Any]:
    return {
        "engine": "trl",
        "agent": {
            "name": "searcher",
            "llm_base_url": "https://alice:llm-pass-777@llm.example/v1",
            "llm_api_key": "sk-agent-111",
            "llm_max_tokens": 64,
            "system_prompt": "Be brief.",
            "mcp_config": {
                "mcpServers": {
                    "search": {
                        "type": "streamable-http",
                        "url": "https://bob:mcp-pass-888@mcp.example/mcp",
                        "headers": {"X-Api-Key": "hdr-key-999"},
                    },
                    "local": {
                        "command": "npx",
                        "args": [
                            "-y",
                            "server",
                            "--api-key",
                            "arg-key-222",
                            "--secret=arg-secret-333",
                            "--port",
                            "8080",
                        ],
                        "env": {"BRAVE_KEY": "env-key-444"},
                    },
                }
            },
        },
        "config": {
            "model": "build/tiny",
            "max_completion_length": 32,
            "trl": {"hub_token": "hf_hub_555", "pad_token": "<pad>"},
        },
        "overrides": ("trl.hub_token=hf_hub_555",),
    }


SECRETS = [
    "llm-pass-777",
    "sk-agent-111",
    "mcp-pass-888",
    "hdr-key-999",
    "arg-key-222",
    "arg-secret-333",
    "env-key-444",
    "hf_hub_555",
]


def test_a_job_is_redacted_everywhere_and_left_alone() -> None:
    job = job_with_secrets()
    before = copy.deepcopy(job)
    redacted = redact(job)
    assert job == before, "the input is not mutated"
    assert not [s for s in SECRETS if s in json.dumps(redacted)]
    agent = redacted["agent"]
    assert agent["llm_base_url"] == f"https://{REDACTED}@llm.example/v1"
    assert agent["llm_max_tokens"] == 64 and agent["system_prompt"] == "Be brief."
    servers = agent["mcp_config"]["mcpServers"]
    assert servers["search"]["url"] == f"https://{REDACTED}@mcp.example/mcp"
    assert servers["local"]["args"] == [
        "-y",
        "server",
        "--api-key",
        REDACTED,
        f"--secret={REDACTED}",
        "--port",
        "8080",
    ]
    assert servers["local"]["env"] == {"BRAVE_KEY": REDACTED}
    assert redacted["config"]["trl"] == {"hub_token": REDACTED, "pad_token": "<pad>"}
    assert redacted["overrides"] == [f"trl.hub_token={REDACTED}"], "a tuple comes back a list"
    assert yaml.safe_load(yaml.safe_dump(redacted)) == redacted


def test_a_secret_repeated_under_an_ordinary_key_is_hidden_too() -> None:
    job = {"llm_api_key": "sk-agent-111", "system_prompt": "your key is sk-agent-111"}
    assert redact(job) == {"llm_api_key": REDACTED, "system_prompt": f"your key is {REDACTED}"}


def test_bytes_and_other_values_are_left_alone() -> None:
    data = {"blob": b"https://u:p@h", "n": 3.5, "ok": True}
    assert redact(data) == data


def test_remembered_secrets_are_hidden_in_free_text() -> None:
    remember_secrets(job_with_secrets())
    line = (
        "cannot reach MCP server 'local' (npx server --api-key arg-key-222): env-key-444 "
        "rejected; hub said hf_hub_555 is invalid; token mcp-pass-888; sk-agent-111"
    )
    assert redact_text(line) == (
        f"cannot reach MCP server 'local' (npx server --api-key {REDACTED}): {REDACTED} rejected; "
        f"hub said {REDACTED} is invalid; token {REDACTED}; {REDACTED}"
    )
    assert redact_text("max_tokens=64, tokenizer gpt2") == "max_tokens=64, tokenizer gpt2"


def test_short_values_are_not_remembered_and_longest_secrets_go_first() -> None:
    remember_secrets({"token": "abc", "api_key": "abcd", "password": "abcd-efgh-1234"})
    assert redact_text("abc abcd abcd-efgh-1234") == f"abc {REDACTED} {REDACTED}"
    # Secrets that contain one another, in no particular order: each is replaced whole.
    nested = ["x" * n for n in range(4, 14)]
    remember_secrets({"tokens": [{"token": s} for s in nested]})
    assert redact_text(" ".join(reversed(nested))) == " ".join([REDACTED] * len(nested))


def test_dataclasses_are_read_as_their_fields() -> None:
    from dataclasses import dataclass, field

    @dataclass
    class Server:
        url: str
        env: dict[str, str] = field(default_factory=dict)

    remember_secrets([Server("https://x:url-pass-1@h"), Server("stdio", {"K": "env-val-2"})])
    assert redact_text("url-pass-1 env-val-2") == f"{REDACTED} {REDACTED}"


def test_environment_secrets_are_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_SERVICE_API_KEY", "sk-live-123456")
    monkeypatch.setenv("HF_TOKEN", "hf_env_token")
    monkeypatch.setenv("APP_SECRET", "app-secret-1")
    monkeypatch.setenv("DB_PASSWORD_FILE_CONTENT", "db-pass-2")
    monkeypatch.setenv("SHORT_API_KEY", "ab")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv("MAX_TOKENS", "4096")
    text = "sk-live-123456 hf_env_token app-secret-1 db-pass-2 ab false 4096"
    expected = f"{REDACTED} {REDACTED} {REDACTED} {REDACTED} ab false 4096"
    assert redact_text(text) == expected, "read at call time"
    assert redact({"url": "https://h/?q=sk-live-123456"}) == {"url": f"https://h/?q={REDACTED}"}
    remember_secrets({})
    monkeypatch.delenv("HF_TOKEN")
    assert redact_text("hf_env_token") == REDACTED, "remembered once seen"


def logger_writing_to(stream: io.StringIO, name: str) -> tuple[logging.Logger, logging.Handler]:
    logger = logging.getLogger(name)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, handler


def test_a_log_record_reaches_its_handler_redacted() -> None:
    remember_secrets(job_with_secrets())
    stream = io.StringIO()
    logger, handler = logger_writing_to(stream, "test_redaction.records")
    install_secret_filter(logger)
    install_secret_filter(logger)
    assert sum(isinstance(f, SecretFilter) for f in handler.filters) == 1, "installed once"
    logger.info(
        "connecting to %s with %s", "https://bob:mcp-pass-888@mcp.example/mcp", "sk-agent-111"
    )
    try:
        raise RuntimeError("server said: bad key env-key-444")
    except RuntimeError:
        logger.exception("call failed for %r", {"key": "arg-key-222"})
    logger.warning("%d steps, %s", 3, "tokenizer gpt2")
    output = stream.getvalue()
    assert not [s for s in SECRETS if s in output], output
    assert f"INFO connecting to https://{REDACTED}@mcp.example/mcp with {REDACTED}" in output
    assert "RuntimeError: server said: bad key ***" in output and "Traceback" in output
    assert "WARNING 3 steps, tokenizer gpt2" in output


def test_the_default_install_covers_the_package_logger_and_its_children() -> None:
    remember_secrets({"hub_token": "hf_hub_555"})
    stream = io.StringIO()
    package = logging.getLogger("aworld_train")
    handler = logging.StreamHandler(stream)
    package.addHandler(handler)
    try:
        install_secret_filter()
        logging.getLogger("aworld_train.engine").warning("pushing with hf_hub_555")
    finally:
        package.removeHandler(handler)
    assert stream.getvalue() == f"pushing with {REDACTED}\n"
    assert any(isinstance(f, SecretFilter) for f in logging.getLogger().filters)


def test_scan_finds_planted_secrets_in_binary_files_and_none_once_redacted(tmp_path: Path) -> None:
    job = job_with_secrets()
    (tmp_path / "leaky").mkdir()
    (tmp_path / "leaky" / "args.bin").write_bytes(pickle.dumps(job))
    assert scan_for_secrets(tmp_path, SECRETS) == [tmp_path / "leaky" / "args.bin"]
    (tmp_path / "leaky" / "args.bin").unlink()
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(redact(job)))
    (tmp_path / "args.bin").write_bytes(pickle.dumps(redact(job)))
    assert scan_for_secrets(tmp_path, SECRETS) == []


def test_a_secret_query_value_ends_where_the_url_ends_in_prose() -> None:
    text = redact_text("server (https://h/mcp?token=abc123) failed, 'https://h/?api_key=k9k9k9';")
    assert text == "server (https://h/mcp?token=***) failed, 'https://h/?api_key=***';"
