"""VeRL's keys for each common key: the engine's settings declaration, which the core reads as
``SETTINGS`` of the entry-point module. Nothing heavy is imported here."""

from __future__ import annotations

from typing import Any

from aworld_train.engine import EngineKey, SettingsDeclaration
from aworld_train.engine.settings import TRACKERS

ACTOR = "actor_rollout_ref.actor"

# The top-level keys of VeRL's own config (its composed ppo_trainer.yaml): a whole VeRL config
# given to another engine is named as VeRL's (``algorithm`` where it is a mapping).
CONFIG_KEYS = frozenset(
    {
        "actor_rollout_ref",
        "algorithm",
        "critic",
        "custom_reward_function",
        "data",
        "distillation",
        "global_profiler",
        "ray_kwargs",
        "reward",
        "reward_model",
        "sandbox_fusion",
        "trainer",
        "transfer_queue",
    }
)

# VeRL's names for each precision (verl.utils.torch_dtypes.PrecisionType).
DTYPE_NAMES = {
    "fp32": ("fp32", "float32", "32", 32),
    "bf16": ("bf16", "bfloat16"),
    "fp16": ("fp16", "float16", "16", 16),
}


def _precision_name(dtype: Any) -> str:
    """The common name of one of VeRL's dtype names (``bfloat16`` -> ``bf16``)."""
    return next((name for name, names in DTYPE_NAMES.items() if dtype in names), str(dtype))


def _trackers(logger: Any) -> list[str]:
    """The common trackers among VeRL's loggers (its own console and file logger are not)."""
    names = [logger] if isinstance(logger, str) else list(logger or [])
    return [str(name) for name in names if str(name) in TRACKERS]


# Its defaults are its composed config's (ppo_trainer.yaml).
SETTINGS = SettingsDeclaration(
    "VeRL",
    (
        EngineKey(
            "precision",
            (
                f"{ACTOR}.fsdp_config.mixed_precision.param_dtype",
                f"{ACTOR}.fsdp_config.mixed_precision",
                "actor_rollout_ref.ref.fsdp_config.mixed_precision",
                "critic.fsdp.mixed_precision",
                f"{ACTOR}.fsdp_config.dtype",
                "actor_rollout_ref.ref.fsdp_config.dtype",
                "critic.fsdp.dtype",
                "actor_rollout_ref.rollout.dtype",
            ),
            to_common=_precision_name,
        ),
        EngineKey(
            "lora",
            (
                "actor_rollout_ref.model.lora_rank",
                "actor_rollout_ref.model.lora_alpha",
                "actor_rollout_ref.model.target_modules",
            ),
        ),
        EngineKey("report_to", ("trainer.logger",), to_common=_trackers),
        EngineKey("kl_coef", (f"{ACTOR}.kl_loss_coef", f"{ACTOR}.use_kl_loss")),
        EngineKey(
            "lr_scheduler", (f"{ACTOR}.optim.lr_scheduler_type", f"{ACTOR}.optim.warmup_style")
        ),
        EngineKey(
            "warmup_ratio",
            (f"{ACTOR}.optim.lr_warmup_steps_ratio", f"{ACTOR}.optim.lr_warmup_steps"),
        ),
        EngineKey("loss_aggregation", (f"{ACTOR}.loss_agg_mode",)),
        EngineKey(
            "clip_ratio",
            (f"{ACTOR}.clip_ratio", f"{ACTOR}.clip_ratio_low", f"{ACTOR}.clip_ratio_high"),
        ),
        EngineKey("entropy_coef", (f"{ACTOR}.entropy_coeff",), to_common=float),
        EngineKey("eval_steps", ("trainer.test_freq",)),
        EngineKey("eval_limit"),
        EngineKey("log_samples", ("trainer.rollout_data_dir",)),
        EngineKey("model", ("actor_rollout_ref.model.path", "critic.model.path")),
        EngineKey("learning_rate", (f"{ACTOR}.optim.lr",), plain=True),
        EngineKey("max_steps", ("trainer.total_training_steps",), plain=True),
        EngineKey("num_epochs", ("trainer.total_epochs",)),
        EngineKey(
            "batch_size",
            ("data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size", "critic.ppo_mini_batch_size"),
        ),
        EngineKey("num_generations", ("actor_rollout_ref.rollout.n",), plain=True),
        EngineKey("max_prompt_length", ("data.max_prompt_length",), plain=True),
        EngineKey("max_completion_length", ("data.max_response_length",), plain=True),
        EngineKey(
            "seed",
            ("data.seed", f"{ACTOR}.data_loader_seed", "actor_rollout_ref.rollout.seed"),
            plain=True,
        ),
        EngineKey("logging_steps"),
        EngineKey("save_steps", ("trainer.save_freq",), plain=True),
    ),
    config_keys=CONFIG_KEYS,
)
