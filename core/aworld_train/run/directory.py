"""The run directory: ``<run_path>/<timestamp>-<engine>-<id>/``, never reused or overwritten.

It holds ``job.yaml`` (the job as it ran, secrets redacted, re-runnable from any folder:
:mod:`aworld_train.job.saved`), ``manifest.json`` (status, process, versions, times, the device,
precision and effective settings the engine reported, final metrics; a failed run's error, with
its traceback in ``error.log``: :mod:`aworld_train.run.manifest`), ``metrics.jsonl``, the reward and
loss plots, and whatever the engine writes: converted inputs, checkpoints, ``samples.jsonl``
(rollout samples), ``adapter/`` (a LoRA adapter), ``model/`` (the final model).
:mod:`aworld_train.run.files` names them all. A folder under the run path without
``manifest.json`` is not a run.

Its life: the checks run in it (:meth:`RunDirectory.for_checks`, :meth:`RunDirectory.checking`:
it is removed when a check fails), it becomes a ``checked`` run when :meth:`RunDirectory.start`
writes the job and the manifest, a ``running`` one when :meth:`RunDirectory.begin` is called as
training starts, and :meth:`RunDirectory.close` records how the run ended and draws its curves.
A check-only run checks in a temporary directory, always removed. A resumed run is linked to the
run it continues (:mod:`aworld_train.run.resume`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aworld_train.errors import RunDirectoryError
from aworld_train.run.failure import write_traceback
from aworld_train.run.files import ERROR_LOG, JOB_FILE, METRICS_FILE
from aworld_train.run.manifest import now, write_manifest
from aworld_train.run.plots import plot_run
from aworld_train.run.redaction import redact, redact_text
from aworld_train.run.resume import link_continuation

logger = logging.getLogger("aworld_train")


class RunDirectory:
    """One run's directory and its manifest."""

    def __init__(self, path: Path, scratch: bool = False, node_rank: int = 0) -> None:
        self.path = path
        self.scratch = scratch
        # Above 0 on a node that joins a job whose run directory node 0 owns (NODE_RANK): this
        # directory is that node's working folder, not a run.
        self.node_rank = node_rank
        self.manifest: dict[str, Any] = {}

    # A run directory reads as its path: print(trainer.run_dir), Path(trainer.run_dir),
    # trainer.run_dir / "metrics.jsonl".
    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)

    def __truediv__(self, name: str | Path) -> Path:
        return self.path / name

    @classmethod
    def for_checks(cls, run_path: str | Path, engine: str, check_only: bool) -> RunDirectory:
        """The directory a job's checks run in: the run's own (engines write converted inputs
        there and keep their absolute paths, so it could not be renamed afterwards), or a
        temporary one for a check-only run.

        :raises RunDirectoryError: when ``run_path`` is a file or cannot be written.
        """
        rank = node_rank()
        if check_only:
            probe_run_path(Path(run_path).expanduser())
            return cls.temporary(rank)
        if rank > 0:
            return cls.for_node(rank)
        return cls.create(run_path, engine)

    @classmethod
    def for_node(cls, rank: int) -> RunDirectory:
        """The working folder of node ``rank`` (> 0) of a job on several nodes: a temporary
        directory for the job files its own launcher reads (converted inputs, the workers' log),
        so that one job leaves one run, node 0's, even on a filesystem the nodes share. It is
        removed when the node completes and kept when it fails, for its log."""
        folder = tempfile.mkdtemp(prefix=f"aworld-train-node{rank}-")
        return cls(Path(folder).resolve(), node_rank=rank)

    def require_nodes(self, nnodes: int) -> None:
        """Refuse a job on one node in a process that says it is another node of several.

        :raises RunDirectoryError: when this is node ``NODE_RANK > 0`` and ``nnodes`` is 1.
        """
        if self.node_rank > 0 and nnodes < 2:
            raise RunDirectoryError(
                f"NODE_RANK is {self.node_rank} but resources.nnodes is {nnodes}: set "
                "resources.nnodes to the number of nodes, or unset NODE_RANK to train on one node"
            )

    @contextlib.contextmanager
    def checking(self) -> Iterator[RunDirectory]:
        """Run the checks (and :meth:`start`) in this directory: it is removed when they fail or
        are interrupted, so a failed ``train`` or ``--resume`` leaves nothing, and a scratch
        directory is removed after them."""
        try:
            yield self
        except BaseException:
            self.discard()
            raise
        if self.scratch:
            self.discard()

    @classmethod
    def create(cls, run_path: str | Path, engine: str) -> RunDirectory:
        """Make a new, uniquely named run directory under ``run_path``.

        :raises RunDirectoryError: when ``run_path`` is a file or cannot be written.
        """
        root = Path(run_path).expanduser()
        check_run_path(root)
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

    @classmethod
    def temporary(cls, rank: int = 0) -> RunDirectory:
        """A temporary directory for a check-only run on node ``rank``, removed by
        :meth:`discard`."""
        return cls(
            Path(tempfile.mkdtemp(prefix="aworld-train-check-")), scratch=True, node_rank=rank
        )

    @property
    def metrics_path(self) -> Path:
        return self.path / METRICS_FILE

    def write_job(self, job: dict[str, Any]) -> None:
        """Write the job as ``job.yaml``, secrets redacted."""
        import yaml

        text = yaml.safe_dump(redact(job), sort_keys=False, allow_unicode=True)
        (self.path / JOB_FILE).write_text(text, encoding="utf-8")

    def start(self, job: dict[str, Any], **fields: Any) -> None:
        """Make the directory a run whose checks passed: write ``job.yaml``
        (:func:`~aworld_train.job.saved.rerunnable_job`) and the manifest with status
        ``checked``. A trainer built but never trained leaves its run so: never taken for a run
        that crashed."""
        self.write_job(job)
        self.manifest = {"status": "checked", "checked_at": now(), **fields}
        self.write_manifest()

    def begin(self) -> None:
        """Training starts: status ``running`` with this process's pid and host, which tell a
        later reader whether the run is still alive; a resumed run is named in the manifest of
        the run it continues (:func:`~aworld_train.run.resume.link_continuation`).

        :raises RunDirectoryError: when the run this one resumes got another continuation since
            the checks (two trainers resuming one run); this run stays ``checked``.
        """
        resumed_from = self.manifest.get("resumed_from")
        if resumed_from:
            link_continuation(Path(resumed_from), self.path)
        self.manifest.update(
            status="running", started_at=now(), pid=os.getpid(), host=socket.gethostname()
        )
        self.write_manifest()

    @property
    def status(self) -> str | None:
        """``checked`` after :meth:`start`, ``running`` from :meth:`begin` to :meth:`close`,
        then how the run ended."""
        return self.manifest.get("status")

    def close(self, error: BaseException | None, final_metrics: dict[str, Any]) -> None:
        """Record how the run ended (``completed``; ``interrupted`` by a ``KeyboardInterrupt``;
        else ``failed``, with the error redacted and its traceback in :attr:`error_log`) and
        draw its curves."""

        fields: dict[str, Any] = {"final_metrics": final_metrics}
        status = "completed"
        if error is not None:
            status = "interrupted" if isinstance(error, KeyboardInterrupt) else "failed"
            fields["error"] = redact_text(f"{type(error).__name__}: {error}")
            if status == "failed":
                fields.update(self._write_error_log(error))
        try:
            fields["plots"] = [p.name for p in plot_run(self.path)]
        except Exception as exc:  # a plot never decides how a run ended
            logger.warning("could not draw the curves: %s", exc)
        self.manifest.update(status=status, ended_at=now(), **fields)
        self.write_manifest()
        if self.node_rank > 0 and status == "completed":
            self.discard()  # node 0's run holds the job's results; a failure keeps the log

    @property
    def error_log(self) -> Path:
        """The file that holds a failed run's traceback."""
        return self.path / ERROR_LOG

    def _write_error_log(self, error: BaseException) -> dict[str, Any]:
        """Write ``error``'s traceback to :attr:`error_log`; the manifest's field naming it,
        or none when it could not be written (the run still ends ``failed``)."""

        try:
            write_traceback(self.error_log, error)
        except OSError as exc:
            logger.warning("could not write %s: %s", self.error_log, exc)
            return {}
        return {"error_log": self.error_log.name}

    def write_manifest(self) -> None:
        write_manifest(self.path, self.manifest)

    def discard(self) -> None:
        """Remove the directory and everything in it: the checks failed, or only checked."""
        shutil.rmtree(self.path, ignore_errors=True)


def node_rank() -> int:
    """This node's rank in a job on several nodes (``NODE_RANK``, which the engines' launchers
    read), 0 when it is unset or not a whole number (the launcher then names the mistake)."""
    value = os.environ.get("NODE_RANK", "").strip()
    return int(value) if value.isdigit() else 0


def check_run_path(root: Path) -> None:
    """:raises RunDirectoryError: when ``root`` exists and is not a directory."""
    if root.exists() and not root.is_dir():
        raise RunDirectoryError(f"run path {root} is a file, not a directory")


def probe_run_path(root: Path) -> None:
    """Make ``root`` as ``train`` would and write a file in it once, then remove the file and
    every folder this made: ``check`` refuses a run path ``train`` could not use, and leaves
    none behind. A folder that was there before stays, with what it holds.

    :raises RunDirectoryError: when ``root`` is a file, or cannot be created or written.
    """
    check_run_path(root)
    made: list[Path] = []  # the folders that are missing, innermost first
    folder = root.absolute()
    while not folder.exists() and folder != folder.parent:
        made.append(folder)
        folder = folder.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunDirectoryError(f"cannot create run path {root}: {exc.strerror or exc}") from None
    try:
        handle, probe = tempfile.mkstemp(prefix=".aworld-train-check-", dir=root)
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise RunDirectoryError(f"run path {root} is not writable: {exc.strerror or exc}") from None
    finally:
        for created in made:
            try:
                created.rmdir()
            except OSError:  # no longer empty: another process wrote there meanwhile
                pass
