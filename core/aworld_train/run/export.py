"""A run's export note, ``<run>/export.json``: the last checkpoint of a run whose checkpoints do
not load as they are (sharded, or in the training library's own form), and the command that
converts it into ``model/``.

The engine writes it each time it saves such a checkpoint (:func:`note_export`); ``eval`` and
``show`` read it back (:func:`read_export_note`) for a run that left no ``model/``, in any
environment, whether the engine is installed there or not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aworld_train.job.files import read_regular
from aworld_train.run.files import EXPORT_NOTE

#: What stands for the run directory in a note's command.
RUN_PLACEHOLDER = "{run}"


@dataclass(frozen=True)
class ExportNote:
    """What a run's export note says, read back for one run directory.

    :ivar checkpoint: the last checkpoint, relative to the run directory
        (``checkpoints/global_step_6``).
    :ivar command: the command that converts it into ``model/``, the run directory filled in.
    """

    checkpoint: str
    command: str


def note_export(run_dir: Path, checkpoint: Path, command: str) -> None:
    """Record ``checkpoint``, a folder inside ``run_dir``, as the run's last, converted into
    ``model/`` by ``command``, where ``{run}`` stands for the run directory (``python -m
    my_engine.export {run}``); a later call replaces the note. Written whole to a temporary file
    and renamed, so a reader never sees half a note.

    :raises ValueError: for a checkpoint outside ``run_dir`` or a command without ``{run}``.
    """
    run_dir = Path(run_dir).resolve()
    relative = Path(checkpoint).resolve().relative_to(run_dir)
    if RUN_PLACEHOLDER not in command:
        raise ValueError(f"export command {command!r} has no {RUN_PLACEHOLDER}")
    note = {"checkpoint": relative.as_posix(), "command": command}
    partial = run_dir / f"{EXPORT_NOTE}.tmp"
    partial.write_text(json.dumps(note, indent=2) + "\n", encoding="utf-8")
    partial.replace(run_dir / EXPORT_NOTE)


def read_export_note(run_dir: Path) -> ExportNote | None:
    """The run's export note, or ``None`` when it has none, or one that is unreadable or names a
    checkpoint no longer there (a hint, never an error: ``show`` must show the run anyway)."""
    try:
        note = json.loads(read_regular(run_dir / EXPORT_NOTE))
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict):
        return None
    checkpoint, command = note.get("checkpoint"), note.get("command")
    if not (isinstance(checkpoint, str) and isinstance(command, str) and checkpoint):
        return None
    if not (run_dir / checkpoint).is_dir():
        return None
    return ExportNote(checkpoint, command.replace(RUN_PLACEHOLDER, str(run_dir)))
