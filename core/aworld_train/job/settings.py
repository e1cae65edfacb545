"""The common training settings: their allowed values, the checked ``lora:`` key, and the
effective-settings table an engine reports.

A job states precision, LoRA, trackers and the RL knobs once, under their common names; each
engine maps them onto its own keys (:mod:`aworld_train.job.common_keys`) and answers the
``effective_settings`` hook with one :class:`Setting` per common name, which ``check`` prints
and the manifest keeps. Beside this module: the trackers (:mod:`aworld_train.run.trackers`), the
optional packages a setting needs (:mod:`aworld_train.job.optional_packages`) and the run
directory's names (:mod:`aworld_train.run.files`). Nothing heavy is imported here: torch only
inside :func:`describe_device` and :func:`resolve_precision`, and only when a GPU is asked for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
LR_SCHEDULERS = ("constant", "linear", "cosine")
# VeRL's names for how a batch's token losses become one loss (its loss_agg_mode).
LOSS_AGGREGATIONS = (
    "token-mean",
    "seq-mean-token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-sum-norm",
)
TRACKERS = ("tensorboard", "wandb", "mlflow", "swanlab", "trackio")
DEFAULT_LOG_SAMPLES = 4  # rollout samples per logged step when log_samples is unset
ALL_LINEAR = "all-linear"  # PEFT's name for every linear layer but the output head


@dataclass(frozen=True)
class Lora:
    """The checked common ``lora:`` key: train a LoRA adapter with exactly these settings.

    The core fills the defaults (``alpha`` 2 × ``rank``, ``dropout`` 0.0, ``target_modules``
    ``"all-linear"``), so ``lora: {rank: 8}`` is a whole setting.

    :ivar target_modules: ``"all-linear"`` (or another name PEFT reads as one string), or the
        module names to adapt.
    """

    rank: int
    alpha: float = None  # type: ignore[assignment]  # filled in: 2 * rank
    dropout: float = 0.0
    target_modules: str | tuple[str, ...] = ALL_LINEAR

    def __post_init__(self) -> None:
        if self.alpha is None:
            object.__setattr__(self, "alpha", 2.0 * self.rank)

    def to_dict(self) -> dict[str, Any]:
        """The setting as plain data: a job file's form, and the manifest's."""
        modules = self.target_modules
        return {
            "rank": self.rank,
            "alpha": self.alpha,
            "dropout": self.dropout,
            "target_modules": modules if isinstance(modules, str) else list(modules),
        }


@dataclass(frozen=True)
class Setting:
    """One row of the effective-settings table: a common setting as the engine will use it.

    :ivar name: the common name (``kl_coef``, ``device``, ``precision``, ...).
    :ivar value: its value in the common form, JSON-able (``0.0``, ``"constant"``, ``"fp32"``,
        ``Lora.to_dict()``, a list).
    :ivar engine_key: the engine's own key for it (``beta``,
        ``actor_rollout_ref.actor.kl_loss_coef``); ``""`` when the engine has none.
    :ivar engine_value: the value under the engine's own key (``"dapo"`` for ``token-mean``).
    :ivar source: ``"job"`` (a common key), ``"section"`` (the engine's own section) or
        ``"default"`` (the engine's default).
    """

    name: str
    value: Any
    engine_key: str
    engine_value: Any
    source: str

    @classmethod
    def without_key(cls, name: str, value: Any) -> Setting:
        """The row of a common setting the engine applies itself, with no key of its own for
        it (``eval_limit``: it keeps the first rows of the test set): from the job when set."""
        return cls(name, value, "", value, "job" if value is not None else "default")


def describe_device(use_gpu: bool) -> str:
    """``"cpu"``, or the visible GPUs as ``"NVIDIA H200 x 2"``.

    :param use_gpu: whether the run trains on the GPUs (the engine's decision); without it
        torch is not imported.
    """
    if not use_gpu:
        return "cpu"
    import torch

    count = torch.cuda.device_count()
    if count == 0:
        return "cpu"
    return f"{torch.cuda.get_device_name(0)} x {count}"


def resolve_precision(precision: str, use_gpu: bool) -> str:
    """The precision a run computes in: ``auto`` is bf16 on a GPU that supports it, else fp32.

    :param precision: one of :data:`PRECISIONS`.
    :param use_gpu: whether the run trains on the GPUs.
    """
    if precision != "auto":
        return precision
    if not use_gpu:
        return "fp32"
    import torch

    return "bf16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "fp32"
