"""A valid job in a folder of its own, and the edits that break it: the building blocks of the
bad-job cases (:mod:`aworld_train.testing.bad_job_cases`), for the core's cases and an
engine's."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class JobFolder:
    """A valid job in its own folder, for one case to break.

    :ivar root: the folder; the job file is ``root / "job.yaml"``.
    :ivar job: the job as a mapping, written as YAML unless :attr:`job_text` is set.
    :ivar job_text: the job file's raw text, for cases that break the YAML itself.
    :ivar args: extra command-line arguments for ``check``.
    """

    root: Path
    job: dict[str, Any]
    job_text: str | None = None
    args: list[str] = field(default_factory=list)

    @classmethod
    def of_trainer_job(cls, job: dict[str, Any]) -> JobFolder:
        """The conformance suite's ``job`` fixture (``AgentTrainer`` arguments and the folder
        its files are in, ``base_dir``) as a job file in that folder."""
        return cls(
            job["base_dir"],
            {
                "agent": job["agent"],
                "train_dataset": job["train_dataset"],
                "reward": job["reward_func"],
                "config": job["config"],
                "run_path": "runs",
            },
        )

    @property
    def config(self) -> dict[str, Any]:
        return self.job["config"]

    def write(self, name: str, text: str) -> Path:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    def rows(self, rows: list[Any]) -> None:
        self.write("train.jsonl", "".join(json.dumps(row) + "\n" for row in rows))

    def loop(self, name: str) -> str:
        """A symlink loop called ``name`` (a ↔ b); returns the name."""
        (self.root / name).symlink_to(self.root / f"{name}.other")
        (self.root / f"{name}.other").symlink_to(self.root / name)
        return name

    def model_folder(
        self, config: Any = None, weights: bool = True, extra: dict[str, str | None] | None = None
    ) -> str:
        """A model folder with the given ``config.json`` (a mapping, or raw text)."""
        folder = self.root / "model"
        folder.mkdir()
        if config is not None:
            text = config if isinstance(config, str) else json.dumps(config)
            (folder / "config.json").write_text(text, encoding="utf-8")
        (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
        if weights:
            # An empty but well-formed safetensors file: an 8-byte header length, then "{}".
            (folder / "model.safetensors").write_bytes(len(b"{}").to_bytes(8, "little") + b"{}")
        for name, content in (extra or {}).items():  # None removes a file
            if content is None:
                (folder / name).unlink()
            else:
                (folder / name).write_text(content, encoding="utf-8")
        return str(folder)


@dataclass(frozen=True)
class BadJob:
    """One mistake: its id, how it breaks a valid job, and what the error line must match."""

    id: str
    edit: Callable[[JobFolder], None]
    expect: str


Edit = Callable[[JobFolder], None]


def set_config(**changes: Any) -> Edit:
    """Set config keys; ``a__b`` reaches into the mapping ``a`` (``resources__nnodes``)."""

    def edit(job: JobFolder) -> None:
        for key, value in changes.items():
            node = job.config
            *parents, last = key.split("__")
            for parent in parents:
                node = node.setdefault(parent, {})
            node[last] = value

    return edit


def set_section(engine: str, **values: Any) -> Edit:
    """Set keys of an engine's own section (``trl:``, ``swift:``, ...)."""

    def edit(job: JobFolder) -> None:
        job.config[engine] = {**(job.config.get(engine) or {}), **values}

    return edit


def set_job(**changes: Any) -> Edit:
    """Set fields of the job file itself."""

    def edit(job: JobFolder) -> None:
        job.job.update(changes)

    return edit


def without(field: str) -> Edit:
    """Leave a field out of the job file."""

    def edit(job: JobFolder) -> None:
        del job.job[field]

    return edit


def set_agent(**changes: Any) -> Edit:
    """Set keys of the job's inline agent."""

    def edit(job: JobFolder) -> None:
        job.job["agent"] = dict(job.job["agent"], **changes)

    return edit


def override(*items: str) -> Edit:
    """Pass ``-o KEY=VALUE`` for each item."""

    def edit(job: JobFolder) -> None:
        for item in items:
            job.args += ["-o", item]

    return edit


def set_reward(reference: str, **config: Any) -> Edit:
    """Name ``reference`` as the job's reward, and set config keys beside it."""

    def edit(job: JobFolder) -> None:
        job.job["reward"] = reference
        job.config.update(config)

    return edit


def set_text(text: str) -> Edit:
    """Write the job file as this raw text (``{engine}`` is the engine's name)."""

    def edit(job: JobFolder) -> None:
        job.job_text = text

    return edit


def set_rows(*rows: Any) -> Edit:
    """Make the training dataset these rows."""

    def edit(job: JobFolder) -> None:
        job.rows(list(rows))

    return edit


def new_model_folder(**kwargs: Any) -> Edit:
    """Train a new model folder made by :meth:`JobFolder.model_folder` with ``kwargs``."""

    def edit(job: JobFolder) -> None:
        job.config["model"] = job.model_folder(**kwargs)

    return edit


def add_dataset_line(line: str) -> Edit:
    """Add a raw line at the end of the training JSONL file (its line 9)."""

    def edit(job: JobFolder) -> None:
        job.write("train.jsonl", (job.root / "train.jsonl").read_text() + line + "\n")

    return edit


def edit_model_json(name: str, **changes: Any) -> Edit:
    """Train a copy of the valid job's model whose JSON file ``name`` has ``changes`` (a
    ``None`` value is written as null); a callable value is given the old value."""

    def edit(job: JobFolder) -> None:
        folder = Path(shutil.copytree(job.config["model"], job.root / "model"))
        data = json.loads((folder / name).read_text(encoding="utf-8"))
        data.update(
            {
                key: value(data.get(key)) if callable(value) else value
                for key, value in changes.items()
            }
        )
        (folder / name).write_text(json.dumps(data), encoding="utf-8")
        job.config["model"] = str(folder)

    return edit
