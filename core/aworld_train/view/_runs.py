"""The runs a view serves: found under one folder, named by their path inside it, and read
only through paths that stay inside it."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from aworld_train.errors import RunDirectoryError
from aworld_train.job.files import read_regular
from aworld_train.run.files import (
    CHECKPOINT_NAME,
    CHECKPOINTS,
    EVAL_DIR,
    JOB_FILE,
    MANIFEST,
    METRICS_FILE,
    SAMPLES_FILE,
)
from aworld_train.run.manifest import read_manifest
from aworld_train.run.redaction import redact
from aworld_train.view._jsonl import MetricColumns, SampleIndex, last_records

# Runs are looked for this deep under the folder: a run path holds runs, a folder of run paths
# holds run paths.
_DEPTH = 2


@dataclass
class RunFiles:
    """One run's files as the view keeps them between requests."""

    path: Path
    metrics: MetricColumns
    samples: SampleIndex
    job: tuple[float, dict[str, Any]] | None = field(default=None)


class RunFolder:
    """The folder a view serves: a run directory, or a folder holding runs.

    A run's id is its path inside the folder (``.`` for the folder itself). Every path is
    resolved before it is read and must stay inside the folder, so that neither ``..`` nor a
    symbolic link leads out of it.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._runs: dict[str, RunFiles] = {}

    def run_ids(self) -> list[str]:
        """Every run in the folder, newest name first (run names begin with their time)."""
        found = []
        level = [self.root]
        for _ in range(_DEPTH + 1):
            following = []
            for folder in level:
                if self.inside(folder / MANIFEST) is not None:
                    found.append(self.run_id(folder))
                else:
                    following += sorted(p for p in _children(folder) if p.is_dir())
            level = following
        return sorted(found, key=lambda run: PurePosixPath(run).name, reverse=True)

    def run_id(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path != self.root else "."

    def inside(self, path: Path) -> Path | None:
        """``path`` resolved, when it exists and lies inside the folder."""
        try:
            resolved = path.resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        return resolved if resolved.is_relative_to(self.root) else None

    def run(self, run_id: str) -> RunFiles | None:
        """The run ``run_id`` names, ``None`` when it names none inside the folder."""
        parts = PurePosixPath(run_id).parts
        if run_id != "." and (not parts or ".." in parts or PurePosixPath(run_id).is_absolute()):
            return None
        path = self.inside(self.root / run_id)
        if path is None or self.inside(path / MANIFEST) is None:
            return None
        key = self.run_id(path)
        if key not in self._runs:
            self._runs[key] = RunFiles(
                path, MetricColumns(path / METRICS_FILE), SampleIndex(path / SAMPLES_FILE)
            )
        return self._runs[key]

    def metrics(self, files: RunFiles) -> MetricColumns | None:
        """The run's metrics as read so far; ``None`` when its file is not in the folder (a link
        out of it)."""
        return files.metrics if self._readable(files.metrics.tail.path) else None

    def samples(self, files: RunFiles) -> SampleIndex | None:
        """The run's samples, read up to the last whole line; ``None`` when its file is not in
        the folder."""
        if not self._readable(files.samples.path):
            return None
        files.samples.refresh()
        return files.samples

    def _readable(self, path: Path) -> bool:
        """Whether reading ``path`` stays in the folder: it is not there yet (nothing to read),
        or it resolves inside."""
        return not (path.exists() or path.is_symlink()) or self.inside(path) is not None

    def summary(self, run_id: str) -> dict[str, Any] | None:
        """What the runs page shows of a run."""
        files = self.run(run_id)
        if files is None:
            return None
        manifest = _manifest(files.path)
        settings = manifest.get("settings") or {}
        job = self.job(files)
        config: dict[str, Any] = job["config"] if isinstance(job.get("config"), dict) else {}
        # The end of metrics.jsonl, not all of it: listing runs stays quick however long they
        # trained.
        last = last_records(files.path / METRICS_FILE) if self.metrics(files) is not None else []
        rewards = [record["reward"] for record in last if "reward" in record]
        return {
            "id": self.run_id(files.path),
            "name": files.path.name,
            "status": self._status(manifest),
            "engine": manifest.get("engine"),
            "algorithm": settings.get("algorithm") or config.get("algorithm"),
            "model": settings.get("model") or config.get("model") or _agent_model(job),
            "started": manifest.get("started_at") or manifest.get("checked_at"),
            "ended": manifest.get("ended_at"),
            "steps_done": last[-1].get("step") if last else None,
            "steps_total": settings.get("max_steps") or config.get("max_steps"),
            "last_reward": rewards[-1] if rewards else None,
            "resumed_from": self._linked(manifest.get("resumed_from")),
            "continued_in": self._linked(manifest.get("continued_in")),
            "error": manifest.get("error"),
        }

    def detail(self, run_id: str) -> dict[str, Any] | None:
        """What a run's page shows besides its curves."""
        summary = self.summary(run_id)
        if summary is None:
            return None
        files = self._runs[summary["id"]]
        manifest = _manifest(files.path)
        return {
            **summary,
            "settings": redact(manifest.get("settings") or {}),
            "device": manifest.get("device"),
            "precision": manifest.get("precision"),
            "job": self._job_text(files),
            "checkpoints": self._checkpoints(files.path),
            "evals": self._evals(files.path / EVAL_DIR),
        }

    def job(self, files: RunFiles) -> dict[str, Any]:
        """The run's ``job.yaml`` as a mapping (``{}`` when unreadable), parsed once per
        change."""
        import yaml

        path = self.inside(files.path / JOB_FILE)
        if path is None:
            return {}
        changed = path.stat().st_mtime
        if files.job is None or files.job[0] != changed:
            try:
                loaded = yaml.safe_load(read_regular(path))
            except (OSError, ValueError, yaml.YAMLError):
                loaded = None
            files.job = (changed, redact(loaded) if isinstance(loaded, dict) else {})
        return files.job[1]

    def _job_text(self, files: RunFiles) -> str | None:
        """``job.yaml`` as the page shows it: written again from its redacted mapping, which is
        the file itself for a job ``aworld-train`` saved (it writes the file that way) and hides
        a secret a hand-edited one holds."""
        import yaml

        job = self.job(files)
        return yaml.safe_dump(job, sort_keys=False, allow_unicode=True) if job else None

    def _status(self, manifest: dict[str, Any]) -> str:
        status = str(manifest.get("status", "?"))
        return "resumed-into" if self._linked(manifest.get("continued_in")) else status

    def _linked(self, path: Any) -> str | None:
        """A linked run's id, when it lies inside the folder."""
        if not isinstance(path, str):
            return None
        inside = self.inside(Path(path))
        if inside is None or self.run(self.run_id(inside)) is None:
            return None
        return self.run_id(inside)

    def _listing(self, folder: Path) -> list[Path]:
        inside = self.inside(folder)
        return [p for p in _children(inside) if self.inside(p)] if inside else []

    def _checkpoints(self, run: Path) -> list[str]:
        """The run's checkpoint folders: in ``checkpoints/``, where a trainer engine saves
        them, or beside its files, where other engines do."""
        found = [
            path.relative_to(run).as_posix()
            for folder in (run / CHECKPOINTS, run)
            for path in self._listing(folder)
            # Beside the run's files, only checkpoint-N: not the checkpoints/ folder itself.
            if path.is_dir() and (folder != run or CHECKPOINT_NAME.match(path.name))
        ]
        return sorted(found, key=_natural)

    def _evals(self, folder: Path) -> list[dict[str, Any]]:
        """The run's ``eval/*.json`` results, as ``eval`` wrote them."""
        found = []
        for path in self._listing(folder):
            if path.suffix != ".json":
                continue
            try:
                result = json.loads(read_regular(path))
            except (OSError, ValueError):
                continue
            if isinstance(result, dict):
                found.append({"file": path.name, **redact(result)})
        return found


def _natural(name: str) -> list[Any]:
    """``checkpoint-10`` after ``checkpoint-9``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir())
    except OSError:
        return []


def _manifest(path: Path) -> dict[str, Any]:
    try:
        return read_manifest(path)
    except RunDirectoryError as exc:
        return {"status": "unreadable", "error": str(exc)}


def _agent_model(job: dict[str, Any]) -> Any:
    agent = job.get("agent")
    return agent.get("model") if isinstance(agent, dict) else None
