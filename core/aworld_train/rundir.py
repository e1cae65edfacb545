"""The run directory: ``<run_path>/<timestamp>-<engine>-<id>/``, never reused or overwritten.

It holds ``job.yaml`` (the resolved job, secrets redacted), ``manifest.json`` (status, versions,
times, final metrics), ``metrics.jsonl``, the reward and loss plots, and whatever the engine
writes: converted inputs, checkpoints, the final model.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from pathlib import Path
from typing import Any

from aworld_train.errors import RunDirectoryError

REDACTED = "***"
_SECRET_WORDS = {"apikey", "password", "passwd", "secret", "credential", "credentials",
                 "authorization", "cookie", "cookies"}
_SECRET_PAIRS = {("api", "key"), ("private", "key"), ("access", "key")}
# "<name>_token" is a credential (hub_token, access_token) unless it names a tokenizer's
# special token; "max_tokens", "num_tokens" and "tokenizer" are not "token".
_SPECIAL_TOKENS = {"pad", "eos", "bos", "unk", "sep", "cls", "mask"}


class RunDirectory:
    """One run's directory and its manifest."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.manifest: dict[str, Any] = {}

    @classmethod
    def create(cls, run_path: str | Path, engine: str) -> RunDirectory:
        """Make a new, uniquely named run directory under ``run_path``.

        :raises RunDirectoryError: when ``run_path`` is a file or cannot be written.
        """
        root = Path(run_path).expanduser()
        if root.exists() and not root.is_dir():
            raise RunDirectoryError(f"run path {root} is a file, not a directory")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunDirectoryError(f"cannot create run path {root}: {exc.strerror}") from None
        if not os.access(root, os.W_OK | os.X_OK):
            raise RunDirectoryError(f"run path {root} is not writable")
        stamp = time.strftime("%Y%m%d-%H%M%S")
        while True:
            path = root / f"{stamp}-{engine}-{secrets.token_hex(3)}"
            try:
                path.mkdir()
                return cls(path.resolve())
            except FileExistsError:
                continue
            except OSError as exc:
                raise RunDirectoryError(f"cannot create a run directory in {root}: {exc}") from None

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    def write_job(self, job: dict[str, Any]) -> None:
        """Write the resolved job as ``job.yaml``, secrets redacted."""
        import yaml

        text = yaml.safe_dump(redact(job), sort_keys=False, allow_unicode=True)
        (self.path / "job.yaml").write_text(text, encoding="utf-8")

    def start(self, **fields: Any) -> None:
        """Write the manifest with status ``running``."""
        self.manifest = {"status": "running", "started_at": _now(), **fields}
        self.write_manifest()

    def finish(self, status: str, **fields: Any) -> None:
        """Record how the run ended: ``completed``, ``failed`` or ``interrupted``."""
        self.manifest.update(status=status, ended_at=_now(), **fields)
        self.write_manifest()

    def write_manifest(self) -> None:
        # Written whole to a temporary file and renamed: a reader never sees half a manifest.
        target = self.path / "manifest.json"
        partial = target.with_suffix(".json.tmp")
        partial.write_text(json.dumps(redact(self.manifest), indent=2) + "\n", encoding="utf-8")
        partial.replace(target)


def resolve_resume(run: str | Path, run_path: str | Path) -> Path:
    """The directory of the run to resume: a path, or a run name under ``run_path``.

    :raises RunDirectoryError: when it does not exist, has no manifest, or completed.
    """
    candidates = [Path(run).expanduser(), Path(run_path).expanduser() / str(run)]
    path = next((c for c in candidates if (c / "manifest.json").is_file()), None)
    if path is None:
        raise RunDirectoryError(f"no run to resume at {run} (a run directory holds manifest.json)")
    status = json.loads((path / "manifest.json").read_text(encoding="utf-8")).get("status")
    if status == "completed":
        raise RunDirectoryError(f"run {path} already completed; nothing to resume")
    return path.resolve()


def redact(value: Any) -> Any:
    """A copy of ``value`` with secret-looking keys and the values of ``*_API_KEY``
    environment variables replaced by ``***``."""
    secrets_in_env = [v for k, v in os.environ.items() if k.upper().endswith("_API_KEY") and len(v) >= 4]
    return _redact(value, secrets_in_env)


def _redact(value: Any, env_secrets: list[str]) -> Any:
    if isinstance(value, dict):
        return {
            key: REDACTED if _is_secret_key(str(key)) and value[key] not in (None, "")
            else _redact(value[key], env_secrets)
            for key in value
        }
    if isinstance(value, (list, tuple)):
        return [_redact(item, env_secrets) for item in value]
    if isinstance(value, str):
        for secret in env_secrets:
            value = value.replace(secret, REDACTED)
    return value


def _is_secret_key(key: str) -> bool:
    """Whether a key names a secret, judged by its words (snake_case, kebab-case, camelCase)."""
    words = re.split(r"[^a-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key).lower())
    if _SECRET_WORDS & set(words) or _SECRET_PAIRS & set(zip(words, words[1:])):
        return True
    return words[-1] == "token" and not (len(words) > 1 and words[-2] in _SPECIAL_TOKENS)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
