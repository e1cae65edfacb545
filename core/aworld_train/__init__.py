"""aworld-train: train agents with the RL or fine-tuning engine of your choice.

One API and one CLI; each engine (TRL, ms-swift, VeRL, or a third party's) is a separate
distribution discovered through the entry-point group ``aworld_train.engines``.
"""

from aworld_train.errors import AWorldTrainError
from aworld_train.hookspecs import hookimpl
from aworld_train.processor import TrainerProcessor
from aworld_train.trainer import AgentTrainer
from aworld_train.version import __version__


__all__ = ["AWorldTrainError", "AgentTrainer", "TrainerProcessor", "hookimpl", "__version__"]
