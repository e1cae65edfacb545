"""The tinker engine's keys for each common key: its settings declaration, which the core reads
as ``SETTINGS`` of the entry-point module. The service applies most settings itself, with no key
of the ``tinker:`` section for them. Nothing heavy is imported here."""

from __future__ import annotations

from aworld_train.engine import EngineKey, SettingsDeclaration

_OWN_LOSS = "the service computes the loss itself"

SETTINGS = SettingsDeclaration(
    "Tinker",
    (
        EngineKey("precision"),
        EngineKey("lora", ("lora_rank",)),
        EngineKey("report_to"),
        EngineKey("kl_coef", default=0.0),
        EngineKey("lr_scheduler"),
        EngineKey("warmup_ratio"),
        EngineKey("loss_aggregation"),
        EngineKey("clip_ratio", refused=_OWN_LOSS),
        EngineKey("entropy_coef", refused=_OWN_LOSS),
        EngineKey("eval_steps", refused=_OWN_LOSS),
        EngineKey("eval_limit", refused=_OWN_LOSS),
        EngineKey("learning_rate"),
        EngineKey("log_samples"),
    ),
)
