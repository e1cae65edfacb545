"""The run directory: ``<run_path>/<timestamp>-<engine>-<id>/``, never reused or overwritten.

It holds ``job.yaml`` (the job as it ran, secrets redacted, re-runnable from any folder),
``manifest.json`` (status, process, versions, times, the device, precision and effective
settings the engine reported, final metrics; a failed run's error, with its traceback in
``error.log``), ``metrics.jsonl``, the reward and loss plots, and
whatever the engine writes: converted inputs, checkpoints, ``samples.jsonl`` (rollout samples),
``adapter/`` (a LoRA adapter), ``model/`` (the final model). A folder under the run path without ``manifest.json`` is not a run.

Its life: the checks run in it (:meth:`RunDirectory.for_checks`, :meth:`RunDirectory.checking`:
it is removed when a check fails), it becomes a ``checked`` run when :meth:`RunDirectory.start`
writes the job and the manifest, a ``running`` one when :meth:`RunDirectory.begin` is called as
training starts, and :meth:`RunDirectory.close` records how the run ended and draws its curves.
A check-only run checks in a temporary directory, always removed.

Resuming links two runs both ways rather than writing into the old one, so that a run's files
stay as its process left them: the new run's manifest names the run it continues
(``resumed_from``), and once it starts training the old run's manifest names its continuation
(``continued_in``: with the ``crashed`` status a resume writes down for a run whose process is
gone, all that is ever added to an ended run). A run that has a continuation is not resumed a
second time: :func:`resolve_resume` names where the chain goes on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shlex
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aworld_train.errors import RunDirectoryError

MANIFEST = "manifest.json"
# How a run's manifest says it ended in a way ``--resume`` can continue: stopped by a signal,
# its process gone without a word, or an exception inside the engine.
RESUMABLE = ("interrupted", "crashed", "failed")
# Of those, the runs that stopped before they could end (a signal, a killed process): ``show``
# offers to resume them. A failed run is resumed once its cause is fixed, so it is not offered.
STOPPED = ("interrupted", "crashed")

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
        if check_only:
            probe_run_path(Path(run_path).expanduser())
            return cls.temporary()
        rank = node_rank()
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
    def temporary(cls) -> RunDirectory:
        """A temporary directory for a check-only run, removed by :meth:`discard`."""
        return cls(Path(tempfile.mkdtemp(prefix="aworld-train-check-")), scratch=True)

    @property
    def metrics_path(self) -> Path:
        return self.path / "metrics.jsonl"

    def write_job(self, job: dict[str, Any]) -> None:
        """Write the job as ``job.yaml``, secrets redacted."""
        import yaml

        from aworld_train.redaction import redact

        text = yaml.safe_dump(redact(job), sort_keys=False, allow_unicode=True)
        (self.path / "job.yaml").write_text(text, encoding="utf-8")

    def start(self, job: dict[str, Any], **fields: Any) -> None:
        """Make the directory a run whose checks passed: write ``job.yaml``
        (:func:`rerunnable_job`) and the manifest with status ``checked``. A trainer built but
        never trained leaves its run so: never taken for a run that crashed."""
        self.write_job(job)
        self.manifest = {"status": "checked", "checked_at": _now(), **fields}
        self.write_manifest()

    def begin(self) -> None:
        """Training starts: status ``running`` with this process's pid and host, which tell a
        later reader whether the run is still alive; a resumed run is named in the manifest of
        the run it continues (:func:`link_continuation`).

        :raises RunDirectoryError: when the run this one resumes got another continuation since
            the checks (two trainers resuming one run); this run stays ``checked``.
        """
        resumed_from = self.manifest.get("resumed_from")
        if resumed_from:
            link_continuation(Path(resumed_from), self.path)
        self.manifest.update(status="running", started_at=_now(), pid=os.getpid(),
                             host=socket.gethostname())
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
        from aworld_train.plots import plot_run
        from aworld_train.redaction import redact_text

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
        self.manifest.update(status=status, ended_at=_now(), **fields)
        self.write_manifest()
        if self.node_rank > 0 and status == "completed":
            self.discard()  # node 0's run holds the job's results; a failure keeps the log

    @property
    def error_log(self) -> Path:
        """The file that holds a failed run's traceback."""
        from aworld_train.failure import ERROR_LOG

        return self.path / ERROR_LOG

    def _write_error_log(self, error: BaseException) -> dict[str, Any]:
        """Write ``error``'s traceback to :attr:`error_log`; the manifest's field naming it,
        or none when it could not be written (the run still ends ``failed``)."""
        from aworld_train.failure import write_traceback

        try:
            write_traceback(self.error_log, error)
        except OSError as exc:
            logger.warning("could not write %s: %s", self.error_log, exc)
            return {}
        return {"error_log": self.error_log.name}

    def write_manifest(self) -> None:
        from aworld_train.redaction import redact

        # Written whole to a temporary file and renamed: a reader never sees half a manifest.
        target = self.path / MANIFEST
        partial = target.with_suffix(".json.tmp")
        partial.write_text(json.dumps(redact(self.manifest), indent=2) + "\n", encoding="utf-8")
        partial.replace(target)

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
        raise RunDirectoryError(f"run path {root} is not writable: {exc.strerror or exc}") \
            from None
    finally:
        for created in made:
            try:
                created.rmdir()
            except OSError:  # no longer empty: another process wrote there meanwhile
                pass


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """A run's manifest, where a ``running`` run whose process is gone reads ``crashed``.

    :raises RunDirectoryError: when the manifest cannot be read or is not a JSON object.
    """
    from aworld_train.files import parse_json_text, read_text

    path = run_dir / MANIFEST
    data = parse_json_text(read_text(path, RunDirectoryError, "run manifest"),
                           f"run manifest {path}", RunDirectoryError)
    if not isinstance(data, dict):
        raise RunDirectoryError(f"run manifest {path}: holds a JSON {type(data).__name__}, "
                                "not an object")
    if data.get("status") == "running" and not _process_alive(data):
        data["status"] = "crashed"
    return data


def resolve_resume(run: str | Path, run_path: str | Path) -> Path:
    """The directory of the run to resume: a path, or a run name under ``run_path``.

    :raises RunDirectoryError: when it does not exist, has no readable manifest, was already
        resumed (naming its continuation), was only checked, completed, or is still running.
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
        raise RunDirectoryError(f"run {path} passed its checks but never trained: nothing to "
                                f"resume; train its job instead: aworld-train train "
                                f"{shlex.quote(str(path / 'job.yaml'))}")
    if status == "completed":
        raise RunDirectoryError(f"run {path} already completed; nothing to resume")
    if status == "running":
        raise RunDirectoryError(
            f"run {path} is still running (pid {data.get('pid')} on host {data.get('host')}); "
            "stop it before resuming it"
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
    run = RunDirectory(previous)
    run.manifest = {**data, "continued_in": str(following)}
    try:
        run.write_manifest()
    except OSError as exc:
        logger.warning("could not name the continuation in %s: %s", previous / MANIFEST, exc)


def resume_command(run_dir: Path) -> str:
    """How to continue ``run_dir``: ``aworld-train train <run>/job.yaml --resume <run>`` when
    its saved job re-runs as it is (it names files, not rows or functions that lived in a
    Python process), else the Python call with ``resume=``."""
    job_file = run_dir / "job.yaml"
    if _job_reruns(job_file):
        return shlex.join(["aworld-train", "train", str(job_file), "--resume", str(run_dir)])
    return f"AgentTrainer(<the same arguments>, resume={str(run_dir)!r}).train()"


def _job_reruns(job_file: Path) -> bool:
    """Whether a saved ``job.yaml`` holds every input as something a new process can load:
    :func:`describe_source` writes in-memory inputs as ``<...>``, functions of a script as
    ``__main__:name`` and callable objects as ``module:?``."""
    import yaml

    try:
        job = yaml.safe_load(job_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return False
    if not isinstance(job, dict):
        return False
    inputs = [job.get(key) for key in ("agent", "train_dataset", "test_dataset", "reward")]
    return not any(_lived_in_memory(value) for value in inputs)


def _lived_in_memory(value: Any) -> bool:
    if isinstance(value, list):
        return any(_lived_in_memory(item) for item in value)
    if isinstance(value, dict):
        return _lived_in_memory(value.get("name"))
    return isinstance(value, str) and (value.startswith(("<", "__main__:")) or ":<" in value
                                       or value.endswith(":?"))


def _record_crash(path: Path, manifest: dict[str, Any]) -> None:
    """Write down that a run whose manifest says ``running`` ended without a word (its process
    is gone), so the run stops looking alive to anyone who reads the file. Best effort: the
    run may sit where this process cannot write."""
    run = RunDirectory(path)
    run.manifest = manifest
    with contextlib.suppress(OSError):
        run.write_manifest()


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The records of a run's ``metrics.jsonl``; a line cut short by a killed process is
    skipped."""
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int):
            records.append(record)
    return records


def rerunnable_job(
    *,
    engine: str,
    agent: Any,
    agent_spec: Any,
    train_dataset: Any,
    test_dataset: Any,
    reward: Any,
    columns: dict[str, str] | None,
    config: dict[str, Any],
    run_path: Path,
    base_dir: Path | None,
) -> dict[str, Any]:
    """The job as ``job.yaml`` keeps it, so that ``aworld-train train runs/<run>/job.yaml``
    re-runs it from any folder: every path that was relative to the job's folder is made
    absolute, the agent and the config are written out whole (a ``module:factory`` agent stays
    a reference, since what a factory returns cannot be written down), and in-memory inputs
    are described.

    :param agent: the agent as the user gave it; ``agent_spec`` is what the core made of it.
    :param config: the validated config as plain data (its model folder already absolute).
    """
    from aworld_train.references import resolve_path

    job = {
        "engine": engine,
        "agent": _saved_agent(agent, agent_spec, base_dir),
        "train_dataset": _saved_dataset(train_dataset, base_dir),
        "test_dataset": _saved_dataset(test_dataset, base_dir),
        "reward": _saved_reward(reward, base_dir),
        "columns": columns,
        "config": config,
        "run_path": str(resolve_path(run_path, None)),
    }
    return {key: value for key, value in job.items() if value is not None}


def _saved_agent(agent: Any, spec: Any, base_dir: Path | None) -> Any:
    if agent is None:
        return None
    if isinstance(agent, (str, Path)) and Path(str(agent)).suffix not in (".yaml", ".yml", ".json"):
        return _absolute_reference(str(agent), base_dir)  # a module:factory
    data = spec.to_dict()
    data["tools"] = [_absolute_reference(tool, base_dir) for tool in data.get("tools", [])]
    if "mcp_config" in data:
        data["mcp_config"] = _pinned_servers(data["mcp_config"], base_dir)
    return {key: value for key, value in data.items() if value != []}


def _pinned_servers(mcp_config: dict[str, Any], base_dir: Path | None) -> dict[str, Any]:
    """``mcp_config`` with each stdio server's working folder made absolute: a server command
    such as ``python server.py`` runs where the job's folder was, not beside the saved job."""
    from aworld_train.references import resolve_path

    servers = mcp_config.get("mcpServers")
    if not isinstance(servers, dict):
        return mcp_config
    pinned = {}
    for name, entry in servers.items():
        if isinstance(entry, dict) and "command" in entry:
            entry = {**entry, "cwd": str(resolve_path(str(entry.get("cwd") or "."), base_dir))}
        pinned[name] = entry
    return {**mcp_config, "mcpServers": pinned}


def _saved_dataset(source: Any, base_dir: Path | None) -> Any:
    from aworld_train.references import resolve_path

    if isinstance(source, (str, Path)):
        return str(resolve_path(source, base_dir))
    return describe_source(source)


def _saved_reward(reward: Any, base_dir: Path | None) -> Any:
    if isinstance(reward, list):
        return [_saved_reward(item, base_dir) for item in reward]
    if isinstance(reward, dict) and "name" in reward:
        return {**reward, "name": _saved_reward(reward["name"], base_dir)}
    if isinstance(reward, str):
        return _absolute_reference(reward, base_dir)
    return describe_source(reward)


def _absolute_reference(reference: Any, base_dir: Path | None) -> Any:
    """``path/to/file.py:name`` or a bare ``path/to/file.py`` (a reward file with one reward
    function) with the file made absolute; anything else (a built-in name,
    ``package.module:name``) as it is."""
    from aworld_train.references import resolve_path, split_reference

    if not isinstance(reference, str):
        return describe_source(reference)
    target, name = split_reference(reference)
    if target.endswith(".py"):
        path = resolve_path(target, base_dir)
        return f"{path}:{name}" if name else str(path)
    return reference


def describe_source(source: Any) -> Any:
    """An input as plain data for ``job.yaml``: small values as they are, the rest described."""
    if source is None or isinstance(source, (str, int, float, dict)):
        return source
    if isinstance(source, Path):
        return str(source)
    if isinstance(source, list):
        if all(isinstance(item, (str, dict)) for item in source) and len(source) <= 20:
            return source
        return f"<{len(source)} rows in memory>"
    if callable(source):
        return f"{getattr(source, '__module__', '?')}:{getattr(source, '__qualname__', '?')}"
    return f"<{type(source).__name__}>"


def _process_alive(manifest: dict[str, Any]) -> bool:
    """Whether the process a manifest names still runs. On another host it cannot be told, so
    it is taken as alive; a manifest without a pid was written by a process that is gone."""
    pid, host = manifest.get("pid"), manifest.get("host")
    if not isinstance(pid, int) or isinstance(pid, bool):
        return False
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
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


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
