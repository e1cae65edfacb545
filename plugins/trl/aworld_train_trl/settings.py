"""The common settings of a job (precision, LoRA, trackers, the RL knobs, evaluation, samples)
as TRL's own keys, and the effective-settings table the engine reports for them.

A common key and the ``trl:`` section's own key for it may both be given only with the same
value; either alone decides, and with neither TRL's own default applies (and is reported as
such). Nothing heavy is imported here.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import ConfigError, EngineKey, Setting, SettingsDeclaration
from aworld_train.engine.settings import (
    DEFAULT_LOG_SAMPLES,
    GRPO_ONLY,
    TENSORBOARD_DIR,
    TRACKERS,
    CommonKeys,
    check_trackers,
    common_aggregation,
    common_scheduler,
    describe_device,
    plain_value,
    refuse_grpo_only,
    resolve_precision,
    source_of,
    tracker_environment,
    trainer_loss_type,
    trainer_scheduler,
)

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig

# transformers' TensorBoardCallback writes its event files here when the variable is set
# (else under <output_dir>/runs/<date>), in every training process.
TENSORBOARD_VARIABLE = "TENSORBOARD_LOGGING_DIR"


@dataclass
class Resolved:
    """The common settings as TRL arguments and what the training code does besides.

    :ivar arguments: ``GRPOConfig`` / ``SFTConfig`` fields set from common keys.
    :ivar settings: the effective-settings table, one row per common name.
    :ivar lora: the LoRA adapter to train (``Lora.to_dict()``), or ``None``.
    :ivar environment: variables that keep each tracker's files inside the run directory.
    :ivar evaluate_at_end: score the test set once after training (no cadence was set).
    :ivar log_samples: rollout samples kept per logged step in ``samples.jsonl``.
    """

    arguments: dict[str, Any] = field(default_factory=dict)
    settings: list[Setting] = field(default_factory=list)
    lora: dict[str, Any] | None = None
    environment: dict[str, str] = field(default_factory=dict)
    evaluate_at_end: bool = False
    log_samples: int = 0


def resolve_settings(
    config: TrainConfig,
    section: dict[str, Any],
    args_class: type,
    *,
    use_gpu: bool,
    has_test: bool,
    run_dir: Path,
    lora: dict[str, Any] | None = None,
) -> Resolved:
    """Map the common keys onto TRL's for ``config.algorithm`` and tabulate the result.

    :param section: the checked ``trl:`` section, which TRL receives as it is.
    :param args_class: ``GRPOConfig`` or ``SFTConfig``, whose defaults fill unset keys.
    :param use_gpu: whether training runs on the visible GPUs.
    :param has_test: whether the job has a test set.
    :param lora: the adapter a TRL config file's ``use_peft`` asks for (``Lora.to_dict()``
        form), when the common ``lora`` key is unset.
    :raises ConfigError: one line for a value TRL cannot honour, or a common key and its
        ``trl.`` key set to different values.
    """
    refuse_grpo_only(config.algorithm, {name: getattr(config, name) for name in GRPO_ONLY}, "trl")
    defaults = {f.name: _default(f) for f in dataclasses.fields(args_class)}
    grpo = config.algorithm == "grpo"
    resolved = Resolved()
    common = CommonKeys("trl", section)
    resolved.arguments = common.arguments
    device = "cpu" if config.resources.device == "cpu" else None
    rows = resolved.settings
    rows.append(
        Setting(
            "device",
            describe_device(use_gpu),
            "use_cpu",
            not use_gpu,
            source_of(device, section, "use_cpu"),
        )
    )
    rows.append(_precision(config, common, use_gpu))
    rows.append(_lora(config, resolved, lora))
    rows.append(_report_to(config, common, run_dir, resolved))
    rows += _schedule(config, common, defaults)
    for name in ("kl_coef", "loss_aggregation", "clip_ratio", "entropy_coef") if grpo else ():
        rows.append(SETTINGS.row(common, name, getattr(config, name), defaults))
    rows.append(_evaluation(config, common, has_test, resolved))
    # No key of TRL's: the engine keeps the first eval_limit rows of the test set.
    rows.append(Setting.without_key("eval_limit", config.eval_limit))
    if grpo and has_test and "num_generations_eval" not in section:
        # Greedy decoding gives one completion per prompt: more would repeat it.
        resolved.arguments["num_generations_eval"] = 1
    if grpo:
        resolved.log_samples = (
            DEFAULT_LOG_SAMPLES if config.log_samples is None else config.log_samples
        )
        source = SETTINGS.source("log_samples", config.log_samples, section)
        rows.append(Setting("log_samples", resolved.log_samples, "", resolved.log_samples, source))
    return resolved


def _schedule(config: TrainConfig, common: CommonKeys, defaults: dict[str, Any]) -> list[Setting]:
    """``lr_scheduler`` and ``warmup_ratio``: ``constant`` with a warmup is TRL's
    ``constant_with_warmup``."""
    warmup = SETTINGS.row(common, "warmup_ratio", config.warmup_ratio, defaults)
    given = (
        None
        if not warmup.engine_value
        else f"warmup_ratio {config.warmup_ratio:g}"
        if config.warmup_ratio is not None
        else f"trl.{warmup.engine_key} {warmup.engine_value:g}"
    )
    scheduler = SETTINGS.row(
        common,
        "lr_scheduler",
        config.lr_scheduler,
        defaults,
        lambda name: trainer_scheduler(common, name, given, "TRL"),
    )
    return [scheduler, warmup]


def _precision(config: TrainConfig, common: CommonKeys, use_gpu: bool) -> Setting:
    """``precision`` as TRL's ``bf16``/``fp16`` flags (mixed precision through accelerate).

    On CPU, ``bf16`` is real bf16 arithmetic where TRL allows it: transformers hands
    ``bf16=True`` with ``use_cpu`` to accelerate, which runs every training forward pass under
    ``torch.autocast("cpu", dtype=torch.bfloat16)`` with fp32 master weights, as it does on a
    GPU; generation, as on a GPU, runs on the fp32 weights.
    """
    section = common.section
    flags = {key: section[key] for key in ("bf16", "fp16") if key in section}
    where = "precision"  # the key the precision comes from, as a message names it
    if config.precision == "auto" and flags:
        used = "fp16" if flags.get("fp16") else "bf16" if flags.get("bf16") else "fp32"
        source = "section"
        where = "trl." + (used if used in flags else next(iter(flags)))
    else:
        used = resolve_precision(config.precision, use_gpu)
        source = "default" if config.precision == "auto" else "job"
        for key in ("bf16", "fp16"):
            common.carry("precision", used, key, used == key)
    if used == "fp16" and not use_gpu:
        why = (
            "trl.use_cpu keeps the run on the CPU" if section.get("use_cpu") else "none is visible"
        )
        raise ConfigError(
            f"config {where}: fp16 needs a GPU on the trl engine ({why}): use bf16 or fp32"
        )
    key = "fp16" if used == "fp16" else "bf16"
    return Setting("precision", used, key, used == key, source)


def _lora(config: TrainConfig, resolved: Resolved, script_lora: dict[str, Any] | None) -> Setting:
    """``lora`` as the ``peft_config`` TRL's trainers take; a TRL config file's ``use_peft``
    (with ModelConfig's ``lora_*`` keys) when the common key is unset."""
    if config.lora is None and script_lora is not None:
        resolved.lora = script_lora
        return Setting("lora", script_lora, "peft_config", lora_arguments(script_lora), "section")
    if config.lora is None:
        return Setting("lora", None, "peft_config", None, "default")
    if importlib.util.find_spec("peft") is None:
        raise ConfigError(
            "config lora: peft is not installed: pip install 'aworld-train-trl[lora]'"
        )
    resolved.lora = config.lora.to_dict()
    return Setting("lora", resolved.lora, "peft_config", lora_arguments(resolved.lora), "job")


def lora_arguments(lora: dict[str, Any]) -> dict[str, Any]:
    """The ``peft.LoraConfig`` arguments of a ``Lora.to_dict()``."""
    modules = lora["target_modules"]
    # None: PEFT's own default modules for the architecture, as TRL's get_peft_config leaves it.
    return {
        "r": lora["rank"],
        "lora_alpha": lora["alpha"],
        "lora_dropout": lora["dropout"],
        "target_modules": modules if modules is None or isinstance(modules, str) else list(modules),
        "task_type": "CAUSAL_LM",
    }


def _report_to(
    config: TrainConfig, common: CommonKeys, run_dir: Path, resolved: Resolved
) -> Setting:
    """``report_to`` as TRL's own, with every tracker's files inside the run directory."""
    chosen = list(config.report_to)
    own = common.section.get("report_to")
    if own is not None:
        own = [] if own in ("none", ["none"]) else [own] if isinstance(own, str) else list(own)
    if chosen:
        common.check(
            "report_to", chosen, "report_to", chosen, lambda _: own is None or own == chosen
        )
    trackers = chosen or own or []
    source = "job" if chosen else "section" if own is not None else "default"
    check_trackers(tuple(name for name in trackers if name in TRACKERS))
    resolved.arguments["report_to"] = trackers or "none"
    resolved.environment = {
        TENSORBOARD_VARIABLE: str(Path(run_dir).absolute() / TENSORBOARD_DIR),
        **tracker_environment(trackers, run_dir),
    }
    return Setting("report_to", trackers, "report_to", trackers or "none", source)


def _evaluation(
    config: TrainConfig, common: CommonKeys, has_test: bool, resolved: Resolved
) -> Setting:
    """``eval_steps``: with a test set, TRL's evaluation at that cadence (transformers also
    evaluates after the last step); unset, once after training."""
    steps = config.eval_steps
    section = common.section
    own = section.get("eval_steps")
    if steps is not None:
        common.check("eval_steps", steps, "eval_steps", steps)
    if not has_test:
        return Setting(
            "eval_steps",
            steps,
            "eval_strategy",
            section.get("eval_strategy", "no"),
            "job" if steps is not None else "default",
        )
    if steps is not None:
        resolved.arguments.update(eval_strategy="steps", eval_steps=steps)
        return Setting("eval_steps", steps, "eval_steps", steps, "job")
    if section.get("eval_strategy", "no") != "no":
        return Setting("eval_steps", own, "eval_steps", own, "section")
    # TRL's own loop does not evaluate (eval_strategy "no"): the engine scores the test set
    # once, with trainer.evaluate(), after the last step.
    resolved.evaluate_at_end = True
    return Setting("eval_steps", "end", "trainer.evaluate()", "after the last step", "default")


_loss_type = partial(
    trainer_loss_type,
    refusal="config loss_aggregation: {aggregation} has no TRL loss_type on the trl engine, "
    "which takes {choices}",
)


def _warmup_steps(ratio: float) -> float:
    # TRL has no warmup_ratio: warmup_steps below 1 is the ratio of the run's steps, and 1 or
    # more a number of steps.
    if ratio >= 1:
        raise ConfigError(
            "config warmup_ratio: the trl engine takes a ratio below 1 (TRL's "
            "warmup_steps reads 1 as one step)"
        )
    return float(ratio)


def _warmup_ratio(steps: Any) -> float | None:
    return float(steps) if isinstance(steps, int | float) and steps < 1 else None


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return plain_value(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


# TRL's keys for each common key; its defaults are its config classes' (GRPOConfig, SFTConfig).
SETTINGS = SettingsDeclaration(
    "TRL",
    (
        EngineKey("precision", ("bf16", "fp16")),
        EngineKey("lora", ("peft_config",)),
        EngineKey("report_to", ("report_to",)),
        EngineKey("kl_coef", ("beta",), float, float),
        EngineKey("lr_scheduler", ("lr_scheduler_type",), None, common_scheduler),
        EngineKey("warmup_ratio", ("warmup_steps",), _warmup_steps, _warmup_ratio),
        EngineKey("loss_aggregation", ("loss_type",), _loss_type, common_aggregation),
        EngineKey("clip_ratio", ("epsilon",), float, float),
        EngineKey("entropy_coef", ("entropy_coef",), float, float),
        EngineKey("eval_steps", ("eval_steps", "eval_strategy")),
        EngineKey("eval_limit"),
        EngineKey("log_samples"),
        EngineKey("model", ("model_name_or_path",)),
        *EngineKey.same("learning_rate", "max_steps", plain=True),
        EngineKey("num_epochs", ("num_train_epochs",), plain=True),
        EngineKey("batch_size", ("per_device_train_batch_size",), plain=True),
        *EngineKey.same("num_generations"),
        EngineKey("max_prompt_length"),
        *EngineKey.same("max_completion_length", "seed", "logging_steps", "save_steps"),
    ),
)
