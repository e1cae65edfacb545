"""What every hook receives besides its own input: the run context."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from aworld_train.job.spec import Job

if TYPE_CHECKING:
    from aworld_train.job.config import TrainConfig
    from aworld_train.run.metrics import MetricsReporter
    from aworld_train.tools import ToolSet


#: What ``ctx.given`` is: the job as the user gave it (:class:`~aworld_train.job.spec.Job`),
#: resolved once (:func:`~aworld_train.job.spec.resolve_job`) and the same job every check
#: reads, what a ``TrainerProcessor``'s checks are handed from (objects as they are; a dataset
#: path with ``columns`` and a reward named by text as the job means them, see
#: :mod:`aworld_train.plugins._processor`). Its paths are absolute strings (relative ones resolved
#: against the job's folder), and so is the file of a ``file.py:function`` reference; with
#: ``-o`` overrides, its ``config`` is the mapping with them merged in (``overrides`` names
#: them).
Given = Job


def _no_tools() -> ToolSet:
    from aworld_train.tools import ToolSet

    return ToolSet()


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
    :ivar tools: the agent's resolved :class:`~aworld_train.tools.ToolSet` (empty for an
        agent without tools), as ``check_agent`` receives it.
    :ivar given: the job as the user gave it (:data:`Given`, a
        :class:`~aworld_train.job.spec.Job`). Hooks receive the
        core's resolved forms (an ``AgentSpec`` even when no agent was given); a
        ``TrainerProcessor``'s checks receive these.
    """

    engine: str
    run_dir: Path
    config: TrainConfig
    metrics: MetricsReporter
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("aworld_train"))
    check_only: bool = False
    resume_from: Path | None = None
    tools: ToolSet = field(default_factory=_no_tools)
    given: Given = field(default_factory=Given)
