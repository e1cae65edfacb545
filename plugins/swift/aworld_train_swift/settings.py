"""The common settings on ms-swift: precision, LoRA, trackers, the RL knobs and evaluation
become swift's arguments, and the effective-settings table is read back from those arguments.

A common key and the ``swift:`` section's own key for the same setting may both be given only
when they agree. Where neither is given, the table shows the value ms-swift itself uses: its
argument dataclass's default, or the one its GRPO arguments fill in while they build.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import ConfigError, Lora, Setting
from aworld_train.engine.hf import arguments_class
from aworld_train.engine.settings import (
    DEFAULT_LOG_SAMPLES,
    GRPO_ONLY,
    TENSORBOARD_DIR,
    CommonKeys,
    describe_device,
    plain_value,
    refuse_grpo_only,
    resolve_precision,
    same_value,
    source_of,
    trainer_scheduler,
)

from aworld_train_swift.declaration import SETTINGS
from aworld_train_swift.schema import ARGUMENT_CLASSES

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig

# swift's dtype for each precision.
DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
# What ms-swift 4.6's RLHFArguments fill in for GRPO where the argument is left None
# (``_init_grpo``: beta 0.04; ``_set_default``: loss_type grpo).
_GRPO_FILLED = {"beta": 0.04, "loss_type": "grpo"}
_PRECISION_KEYS = SETTINGS.own_keys("precision")
# The parts of the common ``lora`` key, in the order of swift's keys after its tuner's.
LORA_PARTS = ("rank", "alpha", "dropout", "target_modules")


def common_arguments(
    config: TrainConfig, section: dict[str, Any], run_dir: Path, use_gpu: bool, has_test: bool
) -> dict[str, Any]:
    """swift's arguments for the common settings of ``config``, each carried onto swift's key
    that :data:`~aworld_train_swift.declaration.SETTINGS` declares for it.

    :param section: the validated ``swift:`` section; a key of it that carries a common setting
        the job also gives must hold the same value.
    :param run_dir: the run directory (tensorboard's event files go to its ``tensorboard/``).
    :param use_gpu: whether the run trains on a GPU.
    :param has_test: whether the job has a test set (evaluated during training).
    :raises ConfigError: one line for a value this engine cannot honour, or naming both places
        when a common key and the section disagree.
    """
    common = CommonKeys("swift", section, _same)
    refuse_grpo_only(config.algorithm, {name: getattr(config, name) for name in GRPO_ONLY}, "swift")
    _precision(config, common, use_gpu)
    _lora(config, common)
    if config.report_to:
        SETTINGS.carry(common, "report_to", config.report_to)
    else:
        common.arguments["report_to"] = ["none"]
    common.arguments["logging_dir"] = str(run_dir / TENSORBOARD_DIR)
    _rl_knobs(config, common)
    _evaluation(config, common, has_test)
    return common.arguments


def _lora(config: TrainConfig, common: CommonKeys) -> None:
    """``lora`` as swift's tuner and its LoRA arguments (``full`` fine-tuning without it)."""
    tuner, *own = SETTINGS.own_keys("lora")
    if config.lora is None:
        common.arguments[tuner] = "full"
        return
    lora = config.lora.to_dict()
    common.carry("lora", lora, tuner, "lora")
    modules = lora["target_modules"]
    values = (lora["rank"], lora["alpha"], lora["dropout"], modules)
    swift_values = (*values[:3], [modules] if isinstance(modules, str) else modules)
    for part, key, value, swift_value in zip(LORA_PARTS, own, values, swift_values, strict=True):
        common.carry(f"lora.{part}", value, key, swift_value)


def _rl_knobs(config: TrainConfig, common: CommonKeys) -> None:
    """The schedule and the GRPO knobs, each onto its declared key where the job sets it."""
    warmup = _warmup(config, common.section)
    for name in ("lr_scheduler", "warmup_ratio", "kl_coef", "loss_aggregation", "clip_ratio"):
        value = getattr(config, name)
        if value is None:
            continue
        to_engine = None
        if name == "lr_scheduler":
            to_engine = functools.partial(
                trainer_scheduler, common, warmup=warmup, engine="ms-swift"
            )
        SETTINGS.carry(common, name, value, to_engine)
    high = SETTINGS.own_keys("clip_ratio")[1]
    if config.clip_ratio is not None and high in common.section:
        common.carry("clip_ratio", config.clip_ratio, high, config.clip_ratio)
    if config.entropy_coef:
        raise ConfigError(
            f"config entropy_coef is {config.entropy_coef:g}: ms-swift's GRPO has no entropy "
            "bonus; leave it unset or 0 on the swift engine"
        )


def _evaluation(config: TrainConfig, common: CommonKeys, has_test: bool) -> None:
    steps_key, strategy_key = SETTINGS.own_keys("eval_steps")
    if has_test and config.eval_steps is not None:
        common.carry("eval_steps", config.eval_steps, strategy_key, "steps")
        common.carry("eval_steps", config.eval_steps, steps_key, config.eval_steps)
    elif end_only_eval(config, common.section, has_test):
        # swift's own default evaluates at every save_steps; the run's callback makes the
        # trainer's step-based evaluation fall on the last step only.
        common.arguments[strategy_key] = "steps"
        if config.max_steps is not None:
            common.arguments[steps_key] = config.max_steps


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
    """One :class:`Setting` per common name, read from swift's final ``arguments`` through
    :data:`~aworld_train_swift.declaration.SETTINGS`.

    :param config: the job's common config (which keys it gives).
    :param arguments: the arguments swift trains with.
    :param section: the validated ``swift:`` section (which keys it gives).
    """
    defaults = swift_defaults(config.algorithm)

    def value_of(key: str) -> Any:
        value = arguments.get(key)
        return plain_value(defaults.get(key) if value is None else value)

    use_gpu = not value_of("use_cpu")
    device = "cpu" if config.resources.device == "cpu" else None
    precision = None if config.precision == "auto" else config.precision
    settings = [
        Setting(
            "device", describe_device(use_gpu), "use_cpu", not use_gpu,
            source_of(device, section, "use_cpu"),
        ),
        _precision_setting(arguments, SETTINGS.source("precision", precision, section)),
        Setting(
            "lora", _lora_value(arguments, defaults), SETTINGS["lora"].key,
            value_of(SETTINGS["lora"].key), SETTINGS.source("lora", config.lora, section),
        ),
        SETTINGS.read("report_to", config.report_to or None, section, value_of),
        SETTINGS.read("lr_scheduler", config.lr_scheduler, section, value_of),
        SETTINGS.read("warmup_ratio", config.warmup_ratio, section, value_of),
    ]  # fmt: skip
    if config.algorithm == "grpo":
        settings += [
            SETTINGS.read("kl_coef", config.kl_coef, section, value_of),
            SETTINGS.read(
                "loss_aggregation",
                config.loss_aggregation,
                section,
                lambda key: _plain(value_of(key)),
            ),
            SETTINGS.read("clip_ratio", config.clip_ratio, section, value_of),
            SETTINGS.read("entropy_coef", config.entropy_coef, section, value_of),
        ]
    settings.append(_eval_setting(config, arguments, section))
    # No key of swift's: the engine keeps the first eval_limit rows of the test set.
    settings.append(Setting.without_key("eval_limit", config.eval_limit))
    if config.algorithm == "grpo":
        source = SETTINGS.source("log_samples", config.log_samples, section)
        settings.append(Setting("log_samples", samples_per_step(config), "", None, source))
    return settings


def _eval_setting(
    config: TrainConfig, arguments: dict[str, Any], section: dict[str, Any]
) -> Setting:
    """``eval_steps`` as swift evaluates: at the job's or the section's cadence, or once at the
    last step where neither sets one."""
    key = SETTINGS["eval_steps"].key
    if end_only_eval(config, section, bool(arguments.get("val_dataset"))):
        # The run's callback puts swift's step-based evaluation on the last step only.
        return Setting("eval_steps", "end", key, arguments.get(key) or "last step", "default")
    steps = config.eval_steps if config.eval_steps is not None else section.get(key)
    source = SETTINGS.source("eval_steps", config.eval_steps, section)
    return Setting("eval_steps", steps, key, arguments.get(key), source)


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
    tuner_key = SETTINGS["lora"].key
    tuner = arguments.get(tuner_key) or defaults[tuner_key]
    if tuner != "lora":
        return None if tuner == "full" else tuner
    own = SETTINGS.own_keys("lora")[1:]
    values = dict(zip(LORA_PARTS, (arguments.get(key, defaults[key]) for key in own), strict=True))
    modules = values["target_modules"]
    return Lora(
        rank=values["rank"],
        alpha=float(values["alpha"]),
        dropout=float(values["dropout"]),
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
