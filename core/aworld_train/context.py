"""What every hook receives besides its own input: the run context."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aworld_train.config import TrainConfig
    from aworld_train.metrics import MetricsReporter


@dataclass
class RunContext:
    """The state of one run, shared by the core and the engine's hooks.

    :ivar engine: the selected engine's name.
    :ivar run_dir: this run's directory; engines write converted inputs, checkpoints and the
        final model here and nowhere else. In a check-only run it is a temporary directory.
    :ivar config: the validated common config.
    :ivar metrics: the reporter engines call with each logged step.
    :ivar logger: the logger for engine messages.
    :ivar check_only: ``True`` for ``aworld-train check``: ``train`` will not be called.
    :ivar resume_from: the run directory of an interrupted run to continue, or ``None``.
    :ivar results: the engine-ready result of each earlier hook, keyed ``"agent"``,
        ``"dataset"``, ``"reward"``, ``"config"``; and ``"tools"``, the agent's resolved
        :class:`~aworld_train.tools.ToolSet` (empty for an agent without tools).
    :ivar agent_given: whether the user gave an agent. Hooks always receive an ``AgentSpec``
        (the default one when none was given); a ``TrainerProcessor`` receives ``None``
        instead, as AWorld Train hands it.
    """

    engine: str
    run_dir: Path
    config: TrainConfig
    metrics: MetricsReporter
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("aworld_train"))
    check_only: bool = False
    resume_from: Path | None = None
    results: dict[str, Any] = field(default_factory=dict)
    agent_given: bool = True
