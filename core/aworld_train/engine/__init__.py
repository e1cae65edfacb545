"""The engine SDK: everything an AWorld Train engine may import, and nothing else.

An engine is a distribution that publishes a module under the entry-point group
``aworld_train.engines``; that module implements hooks marked with :data:`hookimpl`. The core
asks it ``config_layout`` first, then calls ``check_agent``, ``check_dataset``,
``check_reward``, ``check_config`` and, outside ``aworld-train check``, ``train``, in that
order. Each hook receives, as named arguments, what the core resolved (an :class:`AgentSpec`,
a ``datasets.Dataset``, a :class:`RewardSpec`, a :class:`TrainConfig`, the agent's
:class:`ToolSet`) and what the earlier hooks returned, plus ``ctx``, the :class:`RunContext`
(run directory, metrics reporter, logger); an implementation names only the arguments it
uses. A check hook is cheap, raises one of the errors below (an :class:`AWorldTrainError`
subclass, told to the user in one line) for a bad job and returns the engine's form of its
input, or ``None`` to keep the core's; ``train`` reports each step through
``ctx.metrics.log(step, metrics)``. An engine declares its settings once
(:class:`SettingsDeclaration`, exposed as ``SETTINGS`` by its entry-point module).

This module holds what every engine needs, and no more than thirty names. What only some
engines need lives in named tiers beside it:

- :mod:`aworld_train.engine.settings`: carrying and checking the common settings (trackers,
  precision, an engine section's value types), for engines that map them by hand;
- :mod:`aworld_train.engine.hf`: for engines built on a Hugging Face ``Trainer``;
- :mod:`aworld_train.engine.runtime`: the agent runtime, for engines that roll agents out;
- :mod:`aworld_train.engine.launch`: the worker-side protocol, for engines that start processes;
- :mod:`aworld_train.engine.testing`: the conformance suites an engine's tests subclass.

An engine's entry-point module imports nothing heavy (torch, transformers, datasets, ...) at
its top level, and neither do these. ``docs/engines.md`` is the guide.
"""

from __future__ import annotations

from aworld_train.agent import AgentSpec
from aworld_train.engine.hf import merge_adapter, policy_model, resume_checkpoint
from aworld_train.errors import (
    AgentError,
    AWorldTrainError,
    ConfigError,
    DatasetError,
    ModelError,
    RewardError,
    TrainingError,
    did_you_mean,
)
from aworld_train.job.config import ConfigLayout, TrainConfig
from aworld_train.job.declaration import EngineKey, SettingsDeclaration
from aworld_train.job.settings import Lora, Setting
from aworld_train.job.strict import check_value
from aworld_train.model.memory import MemoryPlan
from aworld_train.plugins import installed_versions
from aworld_train.plugins.context import RunContext
from aworld_train.plugins.hookspecs import hookimpl
from aworld_train.reward import RewardFunction, RewardSpec
from aworld_train.run.files import ADAPTER_DIR, CHECKPOINTS, MODEL_DIR
from aworld_train.run.samples import append_samples
from aworld_train.tools import ToolSet

__all__ = [
    # Hooks and what they receive
    "hookimpl",
    "RunContext",
    "AgentSpec",
    "ToolSet",
    "RewardSpec",
    "RewardFunction",
    "TrainConfig",
    "ConfigLayout",
    # The engine's settings, declared once; what effective_settings and memory_plan answer
    "SettingsDeclaration",
    "EngineKey",
    "Setting",
    "Lora",
    "MemoryPlan",
    "check_value",
    # The errors a hook raises for a bad job (one line each)
    "AWorldTrainError",
    "AgentError",
    "ModelError",
    "DatasetError",
    "RewardError",
    "ConfigError",
    "TrainingError",
    "did_you_mean",
    # What a run leaves
    "MODEL_DIR",
    "ADAPTER_DIR",
    "CHECKPOINTS",
    "append_samples",
    "resume_checkpoint",
    "merge_adapter",
    "policy_model",
    "installed_versions",
]
