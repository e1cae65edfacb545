"""Resuming a run: which run ``--resume`` continues, and the chain of runs it makes.

Resuming links two runs both ways rather than writing into the old one, so that a run's files
stay as its process left them: the new run's manifest names the run it continues
(``resumed_from``), and once it starts training the old run's manifest names its continuation
(``continued_in``: with the ``crashed`` status a resume writes down for a run whose process is
gone, all that is ever added to an ended run). A run that has a continuation is not resumed a
second time: :func:`resolve_resume` names where the chain goes on.
"""

from __future__ import annotations

import contextlib
import logging
import shlex
from pathlib import Path
from typing import Any

from aworld_train.errors import RunDirectoryError
from aworld_train.job.saved import job_reruns
from aworld_train.run.files import JOB_FILE, MANIFEST
from aworld_train.run.manifest import RESUMABLE, read_manifest, write_manifest

logger = logging.getLogger("aworld_train")

#: What an engine's ``resume_support`` hook may answer, from the strongest promise down.
RESUME_SUPPORT = ("exact", "continued", "none")


def resolve_resume(run: str | Path, run_path: str | Path, engine: str) -> Path:
    """The directory of the run to resume: a path, or a run name under ``run_path``.

    :param engine: the engine the resuming job trains on.
    :raises RunDirectoryError: when it does not exist, has no readable manifest, was already
        resumed (naming its continuation), was only checked, completed, is still running, or
        was trained on another engine.
    """
    candidates = [Path(run).expanduser(), Path(run_path).expanduser() / str(run)]
    path = next((c for c in candidates if (c / MANIFEST).is_file()), None)
    if path is None:
        raise RunDirectoryError(f"no run to resume at {run} (a run directory holds {MANIFEST})")
    data = read_manifest(path)
    if continuation(path, data) is not None:
        raise RunDirectoryError(already_resumed(path))
    status = data.get("status")
    if status == "checked":
        raise RunDirectoryError(
            f"run {path} passed its checks but never trained: nothing to "
            f"resume; train its job instead: aworld-train train "
            f"{shlex.quote(str(path / JOB_FILE))}"
        )
    if status == "completed":
        raise RunDirectoryError(f"run {path} already completed; nothing to resume")
    if status == "running":
        raise RunDirectoryError(
            f"run {path} is still running (pid {data.get('pid')} on host {data.get('host')}); "
            "stop it before resuming it"
        )
    trained_on = data.get("engine")
    # Another engine's checkpoint is not one this engine can load; refused before the old run
    # is linked to a continuation that would fail.
    if isinstance(trained_on, str) and trained_on != engine:
        raise RunDirectoryError(
            f"run {path} was trained on engine {trained_on!r}, and this job trains on "
            f"{engine!r}: resume it with engine: {trained_on}, or train without --resume"
        )
    if status == "crashed":
        _record_crash(path, data)
    return path.resolve()


def continuation(run_dir: Path, manifest: dict[str, Any] | None = None) -> Path | None:
    """The run that continues ``run_dir`` (its manifest's ``continued_in``), or ``None`` when
    it has none or that run's directory is gone (deleted by its user: the old run may be
    resumed again)."""
    if manifest is None:
        try:
            manifest = read_manifest(run_dir)
        except RunDirectoryError:
            return None
    following = manifest.get("continued_in")
    if not isinstance(following, str) or not (Path(following) / MANIFEST).is_file():
        return None
    return Path(following)


def continuations(run_dir: Path) -> list[Path]:
    """The runs that continue ``run_dir``, in order: its continuation, that run's, and so on
    to the run that ends the chain."""
    chain: list[Path] = []
    following = continuation(run_dir)
    while following is not None and following not in chain and following != run_dir:
        chain.append(following)
        following = continuation(following)
    return chain


def already_resumed(run_dir: Path) -> str:
    """The line refusing to resume ``run_dir`` a second time: where its continuation is, the
    run that ends the chain and what to do with it, so that one run never forks into two."""
    chain = continuations(run_dir)
    latest = chain[-1]
    manifest = read_manifest(latest)
    status = manifest.get("status", "?")
    where = f"{chain[0]}" if len(chain) == 1 else f"{chain[0]}, and the chain ends at {latest}"
    if status in RESUMABLE:
        advice = f"resume that one instead: {resume_command(latest)}"
    elif status == "running":
        advice = "it is still running"
    else:
        advice = "nothing is left to resume" if status == "completed" else "train it instead"
    return f"run {run_dir} was already resumed: it continues in {where} ({status}); {advice}"


def link_continuation(previous: Path, following: Path) -> None:
    """Write ``continued_in`` into the manifest of ``previous``, the run ``following`` resumes,
    so that ``show`` follows the chain and a second resume of ``previous`` is refused. Best
    effort when ``previous`` cannot be written (a read-only copy): training goes on.

    :raises RunDirectoryError: when ``previous`` got another continuation since the checks.
    """
    data = read_manifest(previous)
    if continuation(previous, data) not in (None, following):
        raise RunDirectoryError(already_resumed(previous))
    try:
        write_manifest(previous, {**data, "continued_in": str(following)})
    except OSError as exc:
        logger.warning("could not name the continuation in %s: %s", previous / MANIFEST, exc)


def resume_command(run_dir: Path) -> str:
    """How to continue ``run_dir``: ``aworld-train train <run>/job.yaml --resume <run>`` when
    its saved job re-runs as it is (it names files, not rows or functions that lived in a
    Python process), else the Python call with ``resume=``."""
    job_file = run_dir / JOB_FILE
    if job_reruns(job_file):
        return shlex.join(["aworld-train", "train", str(job_file), "--resume", str(run_dir)])
    return f"AgentTrainer(<the same arguments>, resume={str(run_dir)!r}).train()"


def _record_crash(path: Path, manifest: dict[str, Any]) -> None:
    """Write down that a run whose manifest says ``running`` ended without a word (its process
    is gone), so the run stops looking alive to anyone who reads the file. Best effort: the
    run may sit where this process cannot write."""
    with contextlib.suppress(OSError):
        write_manifest(path, manifest)
