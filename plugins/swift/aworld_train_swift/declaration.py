"""ms-swift's keys for each common key: the engine's settings declaration, which the core reads
as ``SETTINGS`` of the entry-point module. Nothing heavy is imported here."""

from __future__ import annotations

from aworld_train.engine import EngineKey, SettingsDeclaration


def _same_keys(*names: str) -> tuple[EngineKey, ...]:
    """Common keys ms-swift takes under the same name."""
    return tuple(EngineKey(name, (name,)) for name in names)


# Its defaults are its argument classes' (RLHFArguments, SftArguments).
SETTINGS = SettingsDeclaration(
    "ms-swift",
    (
        EngineKey("precision", ("torch_dtype", "bf16", "fp16")),
        EngineKey(
            "lora", ("tuner_type", "lora_rank", "lora_alpha", "lora_dropout", "target_modules")
        ),
        *_same_keys("report_to"),
        EngineKey("kl_coef", ("beta",)),
        EngineKey("lr_scheduler", ("lr_scheduler_type",)),
        *_same_keys("warmup_ratio"),
        EngineKey("loss_aggregation", ("loss_type",)),
        EngineKey("clip_ratio", ("epsilon", "epsilon_high")),
        EngineKey("entropy_coef"),
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
