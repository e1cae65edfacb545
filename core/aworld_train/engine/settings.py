"""The engine SDK's settings tier: carrying the common settings onto an engine's own keys and
checking them, for engines that map some by hand (their declaration, in
:mod:`aworld_train.engine`, carries the rest): trackers, precision, device, the GRPO-only keys,
the Hugging Face ``Trainer``'s loss and scheduler names, an engine section's value types,
the model's positions and the memory plan's pieces.
"""

from __future__ import annotations

from aworld_train.job.common_keys import (
    GRPO_ONLY,
    CommonKeys,
    common_aggregation,
    common_scheduler,
    plain_value,
    refuse_grpo_only,
    same_value,
    trainer_loss_type,
    trainer_scheduler,
)
from aworld_train.job.config import first_non_finite
from aworld_train.job.declaration import source_of
from aworld_train.job.optional_packages import require_package
from aworld_train.job.settings import (
    DEFAULT_LOG_SAMPLES,
    TRACKERS,
    describe_device,
    resolve_precision,
)
from aworld_train.job.config import JOB_FIELDS
from aworld_train.job.strict import field_types, fits, union_members, yaml_repr
from aworld_train.model import max_positions
from aworld_train.model.memory import prompt_budget, trainer_sharding
from aworld_train.run.files import TENSORBOARD_DIR
from aworld_train.run.trackers import check_trackers, tracker_environment

__all__ = [
    "source_of",
    "max_positions",
    "prompt_budget",
    "trainer_sharding",
    "CommonKeys",
    "plain_value",
    "same_value",
    "GRPO_ONLY",
    "refuse_grpo_only",
    "trainer_loss_type",
    "common_aggregation",
    "common_scheduler",
    "trainer_scheduler",
    "TRACKERS",
    "check_trackers",
    "tracker_environment",
    "TENSORBOARD_DIR",
    "DEFAULT_LOG_SAMPLES",
    "describe_device",
    "resolve_precision",
    "require_package",
    "field_types",
    "union_members",
    "fits",
    "yaml_repr",
    "first_non_finite",
    "JOB_FIELDS",
]
