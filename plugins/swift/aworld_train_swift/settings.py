"""The common settings on ms-swift: precision, LoRA, trackers, the RL knobs and evaluation
become swift's arguments, and the effective-settings table is read back from those arguments.

A common key and the ``swift:`` section's own key for the same setting may both be given only
when they agree. Where neither is given, the table shows the value ms-swift itself uses: its
argument dataclass's default, or the one its GRPO arguments fill in while they build.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import ConfigError, Lora, Setting
from aworld_train.engine.hf import arguments_class
from aworld_train.engine.settings import (
    DEFAULT_LOG_SAMPLES,
    GRPO_ONLY,
    TENSORBOARD_DIR,
    TRAINER_LOSS_TYPES,
    TRAINER_SCHEDULERS,
    CommonKeys,
    describe_device,
    plain_value,
    refuse_grpo_only,
    resolve_precision,
    same_value,
    trainer_scheduler,
)

from aworld_train_swift.schema import ARGUMENT_CLASSES

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig

# swift's dtype for each precision.
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
# What ms-swift 4.6's RLHFArguments fill in for GRPO where the argument is left None
# (``_init_grpo``: beta 0.04; ``_set_default``: loss_type grpo).
_GRPO_FILLED = {"beta": 0.04, "loss_type": "grpo"}
_PRECISION_KEYS = ("torch_dtype", "bf16", "fp16")
_LORA_KEYS = ("tuner_type", "lora_rank", "lora_alpha", "lora_dropout", "target_modules")


def common_arguments(
    config: TrainConfig, section: dict[str, Any], run_dir: Path, use_gpu: bool, has_test: bool
) -> dict[str, Any]:
    """swift's arguments for the common settings of ``config``.

    :param section: the validated ``swift:`` section; a key of it that carries a common setting
        the job also gives must hold the same value.
    :param run_dir: the run directory (tensorboard's event files go to its ``tensorboard/``).
    :param use_gpu: whether the run trains on a GPU.
    :param has_test: whether the job has a test set (evaluated during training).
    :raises ConfigError: one line for a value this engine cannot honour, or naming both places
        when a common key and the section disagree.
    """
    common = CommonKeys("swift", section, _same)
    given, arguments, put = common.section, common.arguments, common.carry

    refuse_grpo_only(config.algorithm, {name: getattr(config, name) for name in GRPO_ONLY}, "swift")

    _precision(config, common, use_gpu)

    if config.lora is None:
        arguments["tuner_type"] = "full"
    else:
        lora = config.lora
        put("lora", lora.to_dict(), "tuner_type", "lora")
        put("lora.rank", lora.rank, "lora_rank", lora.rank)
        put("lora.alpha", lora.alpha, "lora_alpha", lora.alpha)
        put("lora.dropout", lora.dropout, "lora_dropout", lora.dropout)
        modules = lora.to_dict()["target_modules"]
        put(
            "lora.target_modules",
            modules,
            "target_modules",
            [modules] if isinstance(modules, str) else modules,
        )

    if config.report_to:
        put("report_to", list(config.report_to), "report_to", list(config.report_to))
    else:
        arguments["report_to"] = ["none"]
    arguments["logging_dir"] = str(run_dir / TENSORBOARD_DIR)

    warmup = _warmup(config, given)
    if config.lr_scheduler is not None:
        put(
            "lr_scheduler",
            config.lr_scheduler,
            "lr_scheduler_type",
            trainer_scheduler(common, config.lr_scheduler, warmup, "ms-swift"),
        )
    if config.warmup_ratio is not None:
        put("warmup_ratio", config.warmup_ratio, "warmup_ratio", config.warmup_ratio)

    if config.kl_coef is not None:
        put("kl_coef", config.kl_coef, "beta", config.kl_coef)
    if config.loss_aggregation is not None:
        if config.loss_aggregation not in TRAINER_LOSS_TYPES:
            choices = ", ".join(f"{name} ({loss})" for name, loss in TRAINER_LOSS_TYPES.items())
            raise ConfigError(
                f"config loss_aggregation: ms-swift has no loss_type for "
                f"{config.loss_aggregation}; the swift engine takes {choices}"
            )
        put(
            "loss_aggregation",
            config.loss_aggregation,
            "loss_type",
            TRAINER_LOSS_TYPES[config.loss_aggregation],
        )
    if config.clip_ratio is not None:
        put("clip_ratio", config.clip_ratio, "epsilon", config.clip_ratio)
        if "epsilon_high" in given:  # clip_ratio is both sides
            put("clip_ratio", config.clip_ratio, "epsilon_high", config.clip_ratio)
    if config.entropy_coef:
        raise ConfigError(
            f"config entropy_coef is {config.entropy_coef:g}: ms-swift's GRPO has no entropy "
            "bonus; leave it unset or 0 on the swift engine"
        )

    if has_test and config.eval_steps is not None:
        put("eval_steps", config.eval_steps, "eval_strategy", "steps")
        put("eval_steps", config.eval_steps, "eval_steps", config.eval_steps)
    elif end_only_eval(config, section, has_test):
        # swift's own default evaluates at every save_steps; the run's callback makes the
        # trainer's step-based evaluation fall on the last step only.
        arguments["eval_strategy"] = "steps"
        if config.max_steps is not None:
            arguments["eval_steps"] = config.max_steps
    return arguments


def _warmup(config: TrainConfig, given: dict[str, Any]) -> str | None:
    """The warmup the run has, as the message naming it says it (``warmup_ratio 0.1``,
    ``swift.warmup_steps 5``), or ``None`` for none."""
    if config.warmup_ratio is not None:
        return f"warmup_ratio {config.warmup_ratio:g}" if config.warmup_ratio > 0 else None
    for key in ("warmup_ratio", "warmup_steps"):
        value = given.get(key)
        if isinstance(value, int | float) and value > 0:
            return f"swift.{key} {value:g}"
    return None


def end_only_eval(config: TrainConfig, section: dict[str, Any], has_test: bool) -> bool:
    """Whether the test set is evaluated once, after the last step: the job sets no
    ``eval_steps`` and the section none of swift's own evaluation keys."""
    own = {key for key in ("eval_steps", "eval_strategy") if section.get(key) is not None}
    return has_test and config.eval_steps is None and not own


def samples_per_step(config: TrainConfig) -> int:
    """The rollout samples kept per logged step: ``log_samples``, by default
    :data:`DEFAULT_LOG_SAMPLES` for GRPO; SFT and DPO make no rollouts."""
    if config.algorithm != "grpo":
        return 0
    return DEFAULT_LOG_SAMPLES if config.log_samples is None else config.log_samples


def _precision(config: TrainConfig, common: CommonKeys, use_gpu: bool) -> None:
    """torch_dtype, bf16 and fp16 for the job's precision, or for the section's own keys when
    the job leaves it ``auto``.

    fp16 keeps float32 weights under fp16 autocast: full-parameter training cannot step float16
    weights through the gradient scaler. swift's own rule would switch fp16 on for float32 too.
    """
    given = common.section
    if config.precision == "auto" and _PRECISION_KEYS & given.keys():
        precision = section_precision(given)
        where = "swift." + _deciding_key(given, precision)
    else:
        precision = resolve_precision(config.precision, use_gpu)
        where = "precision"
    if precision == "fp16" and not use_gpu:
        raise ConfigError(
            f"config {where}: fp16 needs a GPU on the swift engine (on a CPU accelerate has no "
            "float16 autocast and would train in fp32); use bf16 or fp32"
        )
    wanted = {
        "torch_dtype": "bfloat16" if precision == "bf16" else "float32",
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
    }
    if where != "precision":
        common.arguments.update(
            wanted, **{key: given[key] for key in _PRECISION_KEYS if key in given}
        )
        return
    for key, value in wanted.items():
        common.carry("precision", precision, key, value)


def _deciding_key(given: dict[str, Any], precision: str) -> str:
    """The section's key that made ``precision`` (for fp16: ``fp16: true``, else
    ``torch_dtype: float16``), to name it in a message."""
    flag = {"fp16": "fp16", "bf16": "bf16"}.get(precision)
    if flag and given.get(flag):
        return flag
    return (
        "torch_dtype"
        if "torch_dtype" in given
        else next(key for key in _PRECISION_KEYS if key in given)
    )


def section_precision(arguments: dict[str, Any]) -> str:
    """The precision swift's ``torch_dtype``, ``bf16`` and ``fp16`` arguments train in."""
    if arguments.get("fp16"):
        return "fp16"
    if arguments.get("bf16"):
        return "bf16"
    dtypes = {dtype: precision for precision, dtype in DTYPES.items()}
    return dtypes.get(arguments.get("torch_dtype") or "float32", "fp32")


def effective_settings(
    config: TrainConfig, arguments: dict[str, Any], section: dict[str, Any]
) -> list[Setting]:
    """One :class:`Setting` per common name, read from swift's final ``arguments``.

    :param config: the job's common config (which keys it gives).
    :param arguments: the arguments swift trains with.
    :param section: the validated ``swift:`` section (which keys it gives).
    """
    defaults = swift_defaults(config.algorithm)

    def value_of(key: str) -> Any:
        value = arguments.get(key)
        return defaults.get(key) if value is None else value

    def source(name: str, *keys: str) -> str:
        common = getattr(config, name, None)
        if common not in (None, (), "auto"):
            return "job"
        return "section" if any(section.get(key) is not None for key in keys) else "default"

    use_gpu = not value_of("use_cpu")
    settings = [
        Setting(
            "device",
            describe_device(use_gpu),
            "use_cpu",
            not use_gpu,
            "job"
            if config.resources.device == "cpu"
            else "section"
            if section.get("use_cpu") is not None
            else "default",
        ),
        _precision_setting(arguments, source("precision", *_PRECISION_KEYS)),
        Setting(
            "lora",
            _lora_value(arguments, defaults),
            "tuner_type",
            value_of("tuner_type"),
            source("lora", *_LORA_KEYS),
        ),
        Setting(
            "report_to",
            [t for t in value_of("report_to") if t != "none"],
            "report_to",
            value_of("report_to"),
            source("report_to", "report_to"),
        ),
    ]
    scheduler = plain_value(value_of("lr_scheduler_type"))
    settings += [
        Setting(
            "lr_scheduler",
            TRAINER_SCHEDULERS.get(scheduler, scheduler),
            "lr_scheduler_type",
            scheduler,
            source("lr_scheduler", "lr_scheduler_type"),
        ),
        Setting(
            "warmup_ratio",
            value_of("warmup_ratio"),
            "warmup_ratio",
            value_of("warmup_ratio"),
            source("warmup_ratio", "warmup_ratio"),
        ),
    ]
    if config.algorithm == "grpo":
        loss = _plain(value_of("loss_type"))
        losses = {swift: name for name, swift in TRAINER_LOSS_TYPES.items()}
        settings += [
            Setting(
                "kl_coef", value_of("beta"), "beta", value_of("beta"), source("kl_coef", "beta")
            ),
            Setting(
                "loss_aggregation",
                losses.get(loss, loss),
                "loss_type",
                loss,
                source("loss_aggregation", "loss_type"),
            ),
            Setting(
                "clip_ratio",
                value_of("epsilon"),
                "epsilon",
                value_of("epsilon"),
                source("clip_ratio", "epsilon"),
            ),
            Setting(
                "entropy_coef",
                0.0,
                "",
                None,
                "job" if config.entropy_coef is not None else "default",
            ),
        ]
    has_test = bool(arguments.get("val_dataset"))
    if end_only_eval(config, section, has_test):
        # The run's callback puts swift's step-based evaluation on the last step only.
        settings.append(
            Setting(
                "eval_steps",
                "end",
                "eval_steps",
                arguments.get("eval_steps") or "last step",
                "default",
            )
        )
    else:
        eval_steps = (
            config.eval_steps if config.eval_steps is not None else section.get("eval_steps")
        )
        settings.append(
            Setting(
                "eval_steps",
                eval_steps,
                "eval_steps",
                arguments.get("eval_steps"),
                source("eval_steps", "eval_steps", "eval_strategy"),
            )
        )
    # No key of swift's: the engine keeps the first eval_limit rows of the test set.
    settings.append(Setting.without_key("eval_limit", config.eval_limit))
    if config.algorithm == "grpo":
        settings.append(
            Setting("log_samples", samples_per_step(config), "", None, source("log_samples"))
        )
    return settings


def _precision_setting(arguments: dict[str, Any], source: str) -> Setting:
    """fp16 shows under swift's fp16 flag (its weights stay float32), the others under
    torch_dtype."""
    precision = section_precision(arguments)
    if precision == "fp16" and arguments.get("torch_dtype") != "float16":
        return Setting("precision", precision, "fp16", True, source)
    return Setting("precision", precision, "torch_dtype", arguments.get("torch_dtype"), source)


def _lora_value(arguments: dict[str, Any], defaults: dict[str, Any]) -> Any:
    """The LoRA adapter swift trains, as the common ``lora`` key writes it (``None`` for full
    fine-tuning, the tuner's name for another tuner)."""
    tuner = arguments.get("tuner_type") or defaults["tuner_type"]
    if tuner != "lora":
        return None if tuner == "full" else tuner
    values = {key: arguments.get(key, defaults[key]) for key in _LORA_KEYS}
    modules = values["target_modules"]
    return Lora(
        rank=values["lora_rank"],
        alpha=float(values["lora_alpha"]),
        dropout=float(values["lora_dropout"]),
        target_modules=modules[0] if len(modules) == 1 else tuple(modules),
    ).to_dict()


def swift_defaults(algorithm: str) -> dict[str, Any]:
    """The value of each of swift's arguments where the job gives none, as swift trains."""
    cls = arguments_class(ARGUMENT_CLASSES, algorithm)
    defaults: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
    if algorithm == "grpo":
        defaults.update(_GRPO_FILLED)
    return defaults


def _plain(value: Any) -> Any:
    """A one-item list as its item: swift reads ``loss_type: [dapo]`` as ``dapo``."""
    return value[0] if isinstance(value, list) and len(value) == 1 else value


def _same(given: Any, expected: Any) -> bool:
    """Equal as swift reads them, a one-item list as its item."""
    return same_value(_plain(given), _plain(expected))
