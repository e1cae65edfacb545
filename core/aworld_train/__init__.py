"""aworld-train: train agents with the RL or fine-tuning engine of your choice.

One API and one CLI; each engine (TRL, ms-swift, VeRL, or a third party's) is a separate
distribution discovered through the entry-point group ``aworld_train.engines``.
"""

from aworld_train.errors import AWorldTrainError
from aworld_train.hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = ["AWorldTrainError", "hookimpl", "__version__"]
