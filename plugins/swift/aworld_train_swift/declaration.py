"""ms-swift's keys for each common key: the engine's settings declaration, which the core reads
as ``SETTINGS`` of the entry-point module. Nothing heavy is imported here."""

from __future__ import annotations

from functools import partial

from aworld_train.engine import EngineKey, SettingsDeclaration
from aworld_train.engine.settings import common_aggregation, common_scheduler, trainer_loss_type


_loss_type = partial(
    trainer_loss_type,
    refusal="config loss_aggregation: ms-swift has no loss_type for {aggregation}; the swift "
    "engine takes {choices}",
)


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
        EngineKey(
            "lr_scheduler", ("lr_scheduler_type",), None, partial(common_scheduler, keep=True)
        ),
        *EngineKey.same("warmup_ratio"),
        EngineKey(
            "loss_aggregation", ("loss_type",), _loss_type, partial(common_aggregation, keep=True)
        ),
        # clip_ratio is both sides: epsilon_high is set too where the section gives it
        EngineKey("clip_ratio", ("epsilon", "epsilon_high")),
        EngineKey("entropy_coef", default=0.0),  # ms-swift's GRPO has no entropy bonus
        EngineKey("eval_steps", ("eval_steps", "eval_strategy")),
        EngineKey("eval_limit"),
        EngineKey("log_samples"),
        *EngineKey.same("model"),
        *EngineKey.same("learning_rate", "max_steps", plain=True),
        EngineKey("num_epochs", ("num_train_epochs",), plain=True),
        EngineKey("batch_size", ("per_device_train_batch_size",), plain=True),
        *EngineKey.same("num_generations"),
        EngineKey("max_prompt_length", ("max_length",)),  # in GRPO max_length bounds the prompt
        *EngineKey.same("max_completion_length", "seed"),
        *EngineKey.same("logging_steps", "save_steps", plain=True),
    ),
)
