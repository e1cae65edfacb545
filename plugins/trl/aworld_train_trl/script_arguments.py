"""TRL's script arguments: what ``trl grpo|sft --config`` reads besides the trainer config,
as a job's TRL config file may hold it, and how each maps onto the trl engine.

ScriptArguments names the data (the job's datasets replace it), ModelConfig the model's loading
and its LoRA adapter, and the launcher keys go to ``accelerate launch``.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from aworld_train.engine import ConfigError
from aworld_train.engine.hf import arguments_class
from aworld_train.engine.settings import require_package

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig

# TRL's ModelConfig key for the policy model, at the top level of a TRL config file.
MODEL_KEY = "model_name_or_path"
# The classes whose fields a TRL config file may hold besides the trainer config's, and the keys
# TRL's CLI hands to ``accelerate launch``; each maps onto the engine as :func:`script_keys` says.
SCRIPT_CLASSES = ("trl:ScriptArguments", "trl:ModelConfig")
LAUNCHER_KEYS = ("num_processes", "accelerate_config")
# accelerate_config presets that TRL ships, and the package each needs.
_ACCELERATE_PRESETS = {
    "zero1": "deepspeed",
    "zero2": "deepspeed",
    "zero3": "deepspeed",
    "fsdp1": None,
    "fsdp2": None,
    "multi_gpu": None,
    "single_gpu": None,
}
# ModelConfig's LoRA keys and the common lora key each becomes.
_LORA_KEYS = {
    "lora_r": "rank",
    "lora_alpha": "alpha",
    "lora_dropout": "dropout",
    "lora_target_modules": "target_modules",
}
# Attention implementations and the package each loads.
ATTENTION_PACKAGES = {"flash_attention_2": "flash_attn", "flash_attention_3": "flash_attn"}


@functools.cache
def script_defaults() -> dict[str, Any]:
    """Every field of TRL's ScriptArguments and ModelConfig with its default (read once, no
    model), except the model name and ``trust_remote_code``, which the job owns."""
    defaults: dict[str, Any] = {}
    for reference in SCRIPT_CLASSES:
        for item in dataclasses.fields(arguments_class({"": reference}, "")):
            defaults[item.name] = item.default
    for key in (MODEL_KEY, "trust_remote_code"):
        defaults.pop(key, None)
    return defaults


def script_keys(
    section: dict[str, Any], config: TrainConfig
) -> tuple[dict[str, Any], dict[str, Any] | None, int | None]:
    """Take TRL's script, model and launcher keys out of the ``trl:`` section and map them.

    ``dataset_*`` keys name TRL's data, which the job's datasets replace: null or TRL's default
    only. ``dtype``, ``attn_implementation`` and ``model_revision`` go to ``model_init_kwargs``
    as TRL's script passes them to ``from_pretrained``; ``use_peft`` with the ``lora_*`` keys
    is the job's LoRA adapter; ``num_processes`` the processes per node; ``accelerate_config``
    a preset of TRL's, whose package must be installed.

    :returns: the section without those keys, the LoRA adapter they ask for (as
        ``Lora.to_dict()``, or ``None``), and the processes per node (or ``None``).
    :raises ConfigError: one line for a key the engine cannot honour, or a missing package.
    """
    defaults = script_defaults()
    rest = {
        key: value
        for key, value in section.items()
        if key not in defaults and key not in LAUNCHER_KEYS
    }
    given = {
        key: value
        for key, value in section.items()
        if key in defaults and value is not None and value != defaults[key]
    }
    model_kwargs = _model_init_kwargs(dict(rest.get("model_init_kwargs") or {}), given)
    if model_kwargs:
        rest["model_init_kwargs"] = model_kwargs
    lora = _lora_adapter(section, given, config)
    _refuse_script_keys(given)
    return rest, lora, _launcher_processes(section)


def _model_init_kwargs(model_kwargs: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """Add the model keys TRL's script passes to ``from_pretrained`` (taken out of ``given``) to
    ``model_kwargs``; an attention implementation's package must be installed."""
    for key in ("dtype", "attn_implementation"):
        if key in given:
            model_kwargs[key] = given.pop(key)
    if "model_revision" in given:
        model_kwargs["revision"] = given.pop("model_revision")
    attention = model_kwargs.get("attn_implementation")
    if attention in ATTENTION_PACKAGES:
        require_package(ATTENTION_PACKAGES[attention], "trl.attn_implementation", attention)
    return model_kwargs


def _lora_adapter(
    section: dict[str, Any], given: dict[str, Any], config: TrainConfig
) -> dict[str, Any] | None:
    """The LoRA adapter ``use_peft`` asks for, as ``Lora.to_dict()`` (or ``None``); takes the
    ``use_peft`` and ``lora_*`` keys out of ``given``."""
    lora = None
    if given.pop("use_peft", False) or section.get("use_peft"):
        require_package("peft", "trl.use_peft", "LoRA")
        if config.lora is not None:
            raise ConfigError(
                "config trl.use_peft and lora both ask for a LoRA adapter: set one of them"
            )
        defaults = script_defaults()
        lora = {common: section.get(key, defaults[key]) for key, common in _LORA_KEYS.items()}
    for key in list(given):
        if key.startswith("lora_") or key == "use_peft":
            given.pop(key)  # LoRA settings without use_peft: TRL trains no adapter either
    return lora


def _refuse_script_keys(given: dict[str, Any]) -> None:
    """Refuse the first script key left in ``given``: the engine has no use for it."""
    if not given:
        return
    key = next(iter(given))
    fix = (
        "the job's train_dataset and test_dataset hold the data"
        if key.startswith("dataset")
        else "the trl engine does not take it"
    )
    raise ConfigError(
        f"config trl.{key}: {given[key]!r} is a key of TRL's script, not of "
        f"its trainer config; {fix}: leave it out or null"
    )


def _launcher_processes(section: dict[str, Any]) -> int | None:
    """The processes per node the launcher keys ask for (or ``None``); an ``accelerate_config``
    preset must be one of TRL's, and DeepSpeed's are refused with the key that replaces them."""
    preset = section.get("accelerate_config")
    if preset is not None:
        if preset not in _ACCELERATE_PRESETS:
            raise ConfigError(
                f"config trl.accelerate_config: {preset!r} is not one of TRL's "
                f"presets ({', '.join(_ACCELERATE_PRESETS)})"
            )
        package = _ACCELERATE_PRESETS[preset]
        if package:
            require_package(package, "trl.accelerate_config", preset)
            raise ConfigError(
                f"config trl.accelerate_config: {preset} (DeepSpeed through "
                "accelerate) is not launched by the trl engine: set trl.deepspeed "
                "to a DeepSpeed config file instead"
            )
    processes = section.get("num_processes")
    if processes is not None and (not isinstance(processes, int) or processes < 1):
        raise ConfigError(
            f"config trl.num_processes: expected a count of at least 1, got {processes!r}"
        )
    return processes
