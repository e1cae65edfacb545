"""aworld-train: train agents with the RL or fine-tuning engine of your choice.

One API and one CLI; each engine (TRL, ms-swift, VeRL, or a third party's) is a separate
distribution discovered through the entry-point group ``aworld_train.engines``.

``AgentTrainer`` and ``TrainerProcessor`` are imported on first use: the CLI's ``engines`` and
every engine's entry-point module import this package, and must not pay for the check
pipeline they do not run.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from aworld_train.errors import AWorldTrainError
from aworld_train.plugins.hookspecs import hookimpl
from aworld_train.version import __version__

if TYPE_CHECKING:
    from aworld_train.plugins._processor import TrainerProcessor
    from aworld_train.trainer import AgentTrainer

_LAZY = {
    "AgentTrainer": "aworld_train.trainer",
    "TrainerProcessor": "aworld_train.plugins._processor",
}

__all__ = ["AWorldTrainError", "AgentTrainer", "TrainerProcessor", "hookimpl", "__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
