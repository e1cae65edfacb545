"""A run's ``manifest.json``: how the run stands (``checked``, ``running``, then how it ended),
its process, versions, times and final metrics, read back by ``show``, ``eval`` and
``--resume``.

A manifest is written whole to a temporary file and renamed, so a reader never sees half of one;
a ``running`` run whose process is gone reads ``crashed``.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from aworld_train.errors import RunDirectoryError
from aworld_train.job.files import parse_json_text, read_text
from aworld_train.run.files import MANIFEST
from aworld_train.run.redaction import redact

# How a run's manifest says it ended in a way ``--resume`` can continue: stopped by a signal,
# its process gone without a word, or an exception inside the engine.
RESUMABLE = ("interrupted", "crashed", "failed")


# Of those, the runs that stopped before they could end (a signal, a killed process): ``show``
# offers to resume them. A failed run is resumed once its cause is fixed, so it is not offered.
STOPPED = ("interrupted", "crashed")


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """A run's manifest, where a ``running`` run whose process is gone reads ``crashed``.

    :raises RunDirectoryError: when the manifest cannot be read or is not a JSON object.
    """
    path = run_dir / MANIFEST
    data = parse_json_text(
        read_text(path, RunDirectoryError, "run manifest"),
        f"run manifest {path}",
        RunDirectoryError,
    )
    if not isinstance(data, dict):
        raise RunDirectoryError(
            f"run manifest {path}: holds a JSON {type(data).__name__}, not an object"
        )
    if data.get("status") == "running" and not _process_alive(data):
        data["status"] = "crashed"
    return data


def _process_alive(manifest: dict[str, Any]) -> bool:
    """Whether the process a manifest names still runs. On another host it cannot be told, so
    it is taken as alive; a manifest without a pid was written by a process that is gone."""
    pid, host = manifest.get("pid"), manifest.get("host")
    # No process has a pid of 0 or below (to os.kill those name process groups).
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # gone, or a pid no process can have
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return not _is_zombie(pid)


def _is_zombie(pid: int) -> bool:
    """A process that exited but was not reaped yet (Linux ``/proc``; elsewhere ``False``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest`` as the run's manifest, secrets redacted: whole to a temporary file,
    then renamed, so that a reader never sees half a manifest."""
    target = run_dir / MANIFEST
    partial = target.with_suffix(".json.tmp")
    partial.write_text(json.dumps(redact(manifest), indent=2) + "\n", encoding="utf-8")
    partial.replace(target)
