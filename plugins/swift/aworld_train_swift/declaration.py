"""ms-swift's keys for each common key: the engine's settings declaration, which the core reads
as ``SETTINGS`` of the entry-point module. Nothing heavy is imported here."""

from __future__ import annotations

from typing import Any

from aworld_train.engine import ConfigError, EngineKey, SettingsDeclaration
from aworld_train.engine.settings import TRAINER_LOSS_TYPES, TRAINER_SCHEDULERS, plain_value


def _same_keys(*names: str) -> tuple[EngineKey, ...]:
    """Common keys ms-swift takes under the same name."""
    return tuple(EngineKey(name, (name,)) for name in names)


def _loss_type(aggregation: str) -> str:
    if aggregation not in TRAINER_LOSS_TYPES:
        choices = ", ".join(f"{name} ({loss})" for name, loss in TRAINER_LOSS_TYPES.items())
        raise ConfigError(
            f"config loss_aggregation: ms-swift has no loss_type for "
            f"{aggregation}; the swift engine takes {choices}"
        )
    return TRAINER_LOSS_TYPES[aggregation]


def _common_loss_type(loss_type: Any) -> Any:
    return {swift: name for name, swift in TRAINER_LOSS_TYPES.items()}.get(loss_type, loss_type)


def _common_scheduler(scheduler: Any) -> Any:
    return TRAINER_SCHEDULERS.get(plain_value(scheduler), plain_value(scheduler))


def _trackers(report_to: list[str]) -> list[str]:
    return [name for name in report_to if name != "none"]


# Its defaults are its argument classes' (RLHFArguments, SftArguments).
SETTINGS = SettingsDeclaration(
    "ms-swift",
    (
        EngineKey("precision", ("torch_dtype", "bf16", "fp16")),
        EngineKey(
            "lora", ("tuner_type", "lora_rank", "lora_alpha", "lora_dropout", "target_modules")
        ),
        EngineKey("report_to", ("report_to",), list, _trackers),
        EngineKey("kl_coef", ("beta",)),
        EngineKey("lr_scheduler", ("lr_scheduler_type",), None, _common_scheduler),
        *_same_keys("warmup_ratio"),
        EngineKey("loss_aggregation", ("loss_type",), _loss_type, _common_loss_type),
        # clip_ratio is both sides: epsilon_high is set too where the section gives it
        EngineKey("clip_ratio", ("epsilon", "epsilon_high")),
        EngineKey("entropy_coef", default=0.0),  # ms-swift's GRPO has no entropy bonus
        EngineKey("eval_steps", ("eval_steps", "eval_strategy")),
        EngineKey("eval_limit"),
        EngineKey("log_samples"),
        *_same_keys("model", "learning_rate", "max_steps"),
        EngineKey("num_epochs", ("num_train_epochs",)),
        EngineKey("batch_size", ("per_device_train_batch_size",)),
        *_same_keys("num_generations"),
        EngineKey("max_prompt_length", ("max_length",)),  # in GRPO max_length bounds the prompt
        *_same_keys("max_completion_length", "seed", "logging_steps", "save_steps"),
    ),
)
