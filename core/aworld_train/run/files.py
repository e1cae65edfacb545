"""The names of what a run directory holds, in one place: the core writes some of these files,
the engines the others, and ``eval``, ``show`` and ``--resume`` read them back.

Nothing is imported here but the standard library, so that any module may name a run's files.
"""

from __future__ import annotations

import re
from pathlib import Path

#: The run's status, process, versions, times and final metrics (:mod:`aworld_train.run.manifest`).
MANIFEST = "manifest.json"
#: The job as it ran, secrets redacted, re-runnable from any folder (:mod:`aworld_train.job.saved`).
JOB_FILE = "job.yaml"
#: One JSON object per logged step (:class:`aworld_train.run.metrics.MetricsReporter`).
METRICS_FILE = "metrics.jsonl"
#: A few rollout samples per logged step (:mod:`aworld_train.run.samples`).
SAMPLES_FILE = "samples.jsonl"
#: The traceback of a failed run (:mod:`aworld_train.run.failure`).
ERROR_LOG = "error.log"
#: Where a trainer engine's checkpoints go.
CHECKPOINTS = "checkpoints"
#: The LoRA adapter (a PEFT folder).
ADAPTER_DIR = "adapter"
#: The final model, merged for LoRA: it loads without peft.
MODEL_DIR = "model"
#: Every engine's TensorBoard event files.
TENSORBOARD_DIR = "tensorboard"
#: The results of ``aworld-train eval`` (also beside a job file that is evaluated).
EVAL_DIR = "eval"
#: How to convert the run's last checkpoint into ``model/``, written by an engine whose
#: checkpoints do not load as they are (:mod:`aworld_train.run.export`).
EXPORT_NOTE = "export.json"

#: The folder name transformers' Trainer saves each checkpoint under.
CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")


def last_checkpoint(folder: Path) -> Path | None:
    """The ``checkpoint-N`` in ``folder`` with the highest N, or ``None`` when there is none.

    Only a checkpoint with its ``trainer_state.json`` counts: the trainer writes that file last,
    so a folder without it is a save that an interrupt cut short (:func:`cut_short`).
    """
    whole = [(step, child) for step, child in _checkpoints(folder) if _whole(child)]
    return max(whole)[1] if whole else None


def cut_short(folder: Path) -> list[Path]:
    """The ``checkpoint-N`` folders in ``folder`` a stop cut short while they were being saved
    (no ``trainer_state.json``) and newer than :func:`last_checkpoint`, oldest first."""
    last = last_checkpoint(folder)
    after = -1 if last is None else int(last.name.rsplit("-", 1)[1])
    return [
        child for step, child in sorted(_checkpoints(folder)) if step > after and not _whole(child)
    ]


def _checkpoints(folder: Path) -> list[tuple[int, Path]]:
    found = []
    for child in Path(folder).glob("checkpoint-*"):
        match = CHECKPOINT_NAME.match(child.name)
        if match and child.is_dir():
            found.append((int(match.group(1)), child))
    return found


def _whole(checkpoint: Path) -> bool:
    return (checkpoint / "trainer_state.json").is_file()
