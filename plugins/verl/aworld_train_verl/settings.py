"""The common settings of a job (precision, LoRA, trackers, the RL knobs, evaluation, rollout
samples) as VeRL's own keys, and the effective-settings table read back from the composed config.

A common key and the ``verl:`` section's own key for it may both be given only with the same
value (:class:`aworld_train.engine.CommonKeys`); either alone decides, and with neither VeRL's
own default applies (and is reported as such).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import ConfigError, Setting
from aworld_train.engine.settings import (
    DEFAULT_LOG_SAMPLES,
    TENSORBOARD_DIR,
    TRACKERS,
    CommonKeys,
    describe_device,
    resolve_precision,
    tracker_environment,
)

from aworld_train_verl.composition import flatten
from aworld_train_verl.device import PLATFORM, on_cpu
from aworld_train_verl.gpus import cluster_address, visible_gpus

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig
    from omegaconf import DictConfig

    from aworld_train_verl.config import VerlConfig

# The FSDP engine configs that compute in the job's precision: the policy, its reference model
# and the critic (PPO). VeRL's FSDP engine reads ``mixed_precision.{param,reduce,buffer}_dtype``
# (no such node in the packaged YAML: unset, it is bf16/fp32/fp32) and keeps the master weights
# in ``model_dtype`` (fp32); ``dtype`` is the same choice for its Megatron and VeOmni engines.
FSDP_NODES = (
    "actor_rollout_ref.actor.fsdp_config",
    "actor_rollout_ref.ref.fsdp_config",
    "critic.fsdp",
)

PRECISION_KEY = "actor_rollout_ref.actor.fsdp_config.mixed_precision"

ROLLOUT_DTYPE_KEY = "actor_rollout_ref.rollout.dtype"

# The dtype names VeRL's ``dtype`` keys and vLLM's ``dtype`` take for each common precision.
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}

# VeRL's own trackers beside the common ones: its console lines feed the progress bar and
# metrics.jsonl, its file logger writes verl_metrics.jsonl.
OWN_LOGGERS = ("console", "file")

# VeRL's FSDP optimizer schedules (FSDPOptimizerConfig asserts them).
LR_SCHEDULER_TYPES = ("constant", "cosine")

#: Where VeRL dumps each step's rollouts (``trainer.rollout_data_dir``), inside the run.
ROLLOUTS_DIR = "rollouts"

_ACTOR = "actor_rollout_ref.actor"

# VeRL's names for each precision (verl.utils.torch_dtypes.PrecisionType).
_DTYPE_NAMES = {
    "fp32": ("fp32", "float32", "32", 32),
    "bf16": ("bf16", "bfloat16"),
    "fp16": ("fp16", "float16", "16", 16),
}


def setting_overrides(config: TrainConfig, run_dir: Path, common: CommonKeys) -> dict[str, Any]:
    """The VeRL keys the common settings set (precision, LoRA, trackers, the RL knobs, evaluation
    and rollout samples).

    A common key left unset sets nothing and keeps VeRL's default, except ``precision``
    (``auto`` is resolved, :func:`training_precision`) and ``log_samples`` (the rollout dump is on).

    :param common: the ``verl:`` section's keys (flattened, a key added with ``+`` as the key it
        adds); one that a common key of the job also sets must say the same.
    :raises ConfigError: for a value VeRL cannot honour (``lr_scheduler: linear``, a LoRA
        dropout), naming the key and the engine; for a section key that disagrees with a
        common key (:func:`aworld_train.engine.disagreement`).
    """
    out: dict[str, Any] = {}

    def carry(
        name: str,
        key: str,
        value: Any,
        agrees: Callable[[Any], bool] | None = None,
        chosen: bool = True,
    ) -> None:
        """Set ``key``; when the job chose the common key, the section must agree with it."""
        if chosen:
            common.check(name, getattr(config, name), key.lstrip("+"), value, agrees)
        out[key] = value

    precision = training_precision(config)
    same = functools.partial(_same_dtype, precision)
    chosen = config.precision != "auto"  # auto leaves the section free to choose the dtypes
    for node in FSDP_NODES:
        mixed = {"param_dtype": precision, "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
        carry(
            "precision",
            f"+{node}.mixed_precision",
            mixed,
            functools.partial(_same_dtypes, mixed),
            chosen,
        )
        carry("precision", f"{node}.dtype", TORCH_DTYPES[precision], same, chosen)
    carry("precision", ROLLOUT_DTYPE_KEY, TORCH_DTYPES[precision], same, chosen)

    if config.lora is not None:
        if config.lora.dropout:
            raise ConfigError(
                f"config key 'lora.dropout': the verl engine cannot honour {config.lora.dropout!r}: VeRL's FSDP "
                f"LoRA builds peft's LoraConfig without dropout; set 0 or train with the trl or swift engine"
            )
        carry("lora", "actor_rollout_ref.model.lora_rank", config.lora.rank)
        carry("lora", "actor_rollout_ref.model.lora_alpha", _lora_alpha(config.lora.alpha))
        modules = config.lora.target_modules
        carry(
            "lora",
            "actor_rollout_ref.model.target_modules",
            modules if isinstance(modules, str) else list(modules),
        )

    if config.report_to:
        trackers = set(config.report_to)
        carry(
            "report_to",
            "trainer.logger",
            [*OWN_LOGGERS, *config.report_to],
            lambda other: {str(t) for t in _as_list(other) if str(t) in TRACKERS} == trackers,
        )

    if config.kl_coef is not None:
        carry("kl_coef", f"{_ACTOR}.use_kl_loss", config.kl_coef > 0)
        carry("kl_coef", f"{_ACTOR}.kl_loss_coef", config.kl_coef)
        if config.kl_coef == 0:
            # No KL at all, so no reference model: a KL penalty in the reward would load one.
            carry("kl_coef", "algorithm.use_kl_in_reward", False)
    if config.lr_scheduler is not None:
        if config.lr_scheduler not in LR_SCHEDULER_TYPES:
            raise ConfigError(
                f"config key 'lr_scheduler': the verl engine has no {config.lr_scheduler!r} schedule (VeRL's "
                f"{_ACTOR}.optim.lr_scheduler_type is one of {', '.join(LR_SCHEDULER_TYPES)}); choose one of those"
            )
        carry("lr_scheduler", f"{_ACTOR}.optim.lr_scheduler_type", config.lr_scheduler)
        # VeRL's deprecated name for the same key, which overwrites it when set.
        common.check(
            "lr_scheduler", config.lr_scheduler, f"{_ACTOR}.optim.warmup_style", config.lr_scheduler
        )
    if config.warmup_ratio is not None:
        carry("warmup_ratio", f"{_ACTOR}.optim.lr_warmup_steps_ratio", config.warmup_ratio)
        # A positive step count wins over the ratio in VeRL.
        common.check(
            "warmup_ratio",
            config.warmup_ratio,
            f"{_ACTOR}.optim.lr_warmup_steps",
            -1,
            lambda other: other <= 0,
        )
    if config.loss_aggregation is not None:
        carry("loss_aggregation", f"{_ACTOR}.loss_agg_mode", config.loss_aggregation)
    if config.clip_ratio is not None:
        for key in ("clip_ratio", "clip_ratio_low", "clip_ratio_high"):
            carry("clip_ratio", f"{_ACTOR}.{key}", config.clip_ratio)
    if config.entropy_coef is not None:
        carry("entropy_coef", f"{_ACTOR}.entropy_coeff", config.entropy_coef)
    if config.eval_steps is not None:
        carry("eval_steps", "trainer.test_freq", config.eval_steps)

    samples = DEFAULT_LOG_SAMPLES if config.log_samples is None else config.log_samples
    rollouts = str(run_dir / ROLLOUTS_DIR) if samples else None
    carry(
        "log_samples",
        "trainer.rollout_data_dir",
        rollouts,
        lambda other: same_target(other, rollouts),
        chosen=config.log_samples is not None,
    )
    return out


def effective_settings(resolved: VerlConfig, config: TrainConfig) -> list[Setting]:
    """The common settings as VeRL will train with them, read back from the composed config:
    one row per common name, with VeRL's key and value, and whether the job's common key, the
    ``verl:`` section or VeRL's default decided."""
    composed = resolved.config
    actor = composed.actor_rollout_ref.actor
    # A null of the section leaves the key to the engine (_fill_nulls).
    section = {
        key.lstrip("+")
        for key, value in flatten(config.engine_section()).items()
        if value is not None
    }

    def source(name: str, keys: tuple[str, ...], chosen: bool | None = None) -> str:
        if getattr(config, name) is not None if chosen is None else chosen:
            return "job"
        return "section" if any(key in section for key in keys) else "default"

    rows = [_device_row(config, composed)]

    mixed = actor.fsdp_config.get("mixed_precision") or {}
    precision = _precision_name(mixed.get("param_dtype", "bf16"))
    precision_keys = (
        PRECISION_KEY,
        ROLLOUT_DTYPE_KEY,
        *(f"{node}.{leaf}" for node in FSDP_NODES for leaf in ("dtype", "mixed_precision")),
    )
    rows.append(
        Setting(
            "precision",
            precision,
            f"{PRECISION_KEY}.param_dtype",
            mixed.get("param_dtype", "bf16"),
            source("precision", precision_keys, config.precision != "auto"),
        )
    )

    model = composed.actor_rollout_ref.model
    lora = (
        None
        if not model.lora_rank
        else {
            "rank": int(model.lora_rank),
            "alpha": float(model.lora_alpha),
            "dropout": 0.0,
            "target_modules": _as_data(model.target_modules),
        }
    )
    rows.append(
        Setting(
            "lora",
            lora,
            "actor_rollout_ref.model.lora_rank",
            int(model.lora_rank or 0),
            source("lora", ("actor_rollout_ref.model.lora_rank",)),
        )
    )

    rows.append(
        Setting(
            "report_to",
            list(trackers_of(composed)),
            "trainer.logger",
            _as_data(composed.trainer.logger),
            source("report_to", ("trainer.logger",), bool(config.report_to)),
        )
    )

    kl_keys = (f"{_ACTOR}.use_kl_loss", f"{_ACTOR}.kl_loss_coef")
    if actor.use_kl_loss:
        rows.append(
            Setting(
                "kl_coef",
                float(actor.kl_loss_coef),
                kl_keys[1],
                actor.kl_loss_coef,
                source("kl_coef", kl_keys),
            )
        )
    else:
        rows.append(Setting("kl_coef", 0.0, kl_keys[0], False, source("kl_coef", kl_keys)))

    optim = actor.optim
    scheduler = (
        optim.warmup_style or optim.lr_scheduler_type
    )  # VeRL's deprecated name wins when set
    scheduler_keys = (f"{_ACTOR}.optim.lr_scheduler_type", f"{_ACTOR}.optim.warmup_style")
    rows.append(
        Setting(
            "lr_scheduler",
            scheduler,
            scheduler_keys[0],
            scheduler,
            source("lr_scheduler", scheduler_keys),
        )
    )
    warmup_keys = (f"{_ACTOR}.optim.lr_warmup_steps_ratio", f"{_ACTOR}.optim.lr_warmup_steps")
    if optim.lr_warmup_steps is not None and optim.lr_warmup_steps > 0:
        # A step count wins over the ratio, which then says nothing.
        rows.append(
            Setting(
                "warmup_ratio",
                None,
                warmup_keys[1],
                optim.lr_warmup_steps,
                source("warmup_ratio", warmup_keys),
            )
        )
    else:
        rows.append(
            Setting(
                "warmup_ratio",
                float(optim.lr_warmup_steps_ratio),
                warmup_keys[0],
                optim.lr_warmup_steps_ratio,
                source("warmup_ratio", warmup_keys),
            )
        )
    rows.append(
        Setting(
            "loss_aggregation",
            actor.loss_agg_mode,
            f"{_ACTOR}.loss_agg_mode",
            actor.loss_agg_mode,
            source("loss_aggregation", (f"{_ACTOR}.loss_agg_mode",)),
        )
    )
    clip_keys = tuple(
        f"{_ACTOR}.{key}" for key in ("clip_ratio", "clip_ratio_low", "clip_ratio_high")
    )
    # VeRL clips with the low and the high ratio; clip_ratio only stands in for an unset one.
    low = actor.clip_ratio_low if actor.clip_ratio_low is not None else actor.clip_ratio
    high = actor.clip_ratio_high if actor.clip_ratio_high is not None else actor.clip_ratio
    rows.append(
        Setting(
            "clip_ratio",
            float(low) if low == high else {"low": float(low), "high": float(high)},
            f"{clip_keys[1]}, {clip_keys[2]}" if low != high else clip_keys[0],
            low if low == high else [low, high],
            source("clip_ratio", clip_keys),
        )
    )
    rows.append(
        Setting(
            "entropy_coef",
            float(actor.entropy_coeff),
            f"{_ACTOR}.entropy_coeff",
            actor.entropy_coeff,
            source("entropy_coef", (f"{_ACTOR}.entropy_coeff",)),
        )
    )

    test_freq = composed.trainer.test_freq
    eval_source = source("eval_steps", ("trainer.test_freq",))
    rows.append(
        Setting(
            "eval_steps",
            _eval_every(config.eval_steps, test_freq, eval_source),
            "trainer.test_freq",
            test_freq,
            eval_source,
        )
    )
    rows.append(
        Setting("eval_limit", config.eval_limit, "", config.eval_limit, source("eval_limit", ()))
    )
    dump = composed.trainer.rollout_data_dir
    samples = (
        (DEFAULT_LOG_SAMPLES if config.log_samples is None else config.log_samples) if dump else 0
    )
    rows.append(
        Setting(
            "log_samples",
            samples,
            "trainer.rollout_data_dir",
            dump,
            source("log_samples", ("trainer.rollout_data_dir",)),
        )
    )
    return rows


def trackers_of(composed: DictConfig) -> tuple[str, ...]:
    """The common trackers among VeRL's ``trainer.logger`` (the job's ``report_to``, or what the
    ``verl:`` section chose)."""
    return tuple(str(name) for name in _as_list(composed.trainer.logger) if str(name) in TRACKERS)


def tracker_variables(trackers: tuple[str, ...], run_dir: Path) -> dict[str, str]:
    """The environment that keeps every tracker's files inside the run directory: VeRL's
    TensorBoard logger writes to ``TENSORBOARD_DIR``, the others read
    :func:`aworld_train.engine.tracker_environment`."""
    variables = tracker_environment(trackers, run_dir)
    if "tensorboard" in trackers:
        variables["TENSORBOARD_DIR"] = str(run_dir.absolute() / TENSORBOARD_DIR)
    return variables


def training_precision(config: TrainConfig) -> str:
    """The precision VeRL computes in: the job's, with ``auto`` resolved by
    :func:`aworld_train.engine.resolve_precision` on the device the job trains on here (fp32 on
    the CPU). For GPUs this machine does not show (a check before training elsewhere, a Ray
    cluster's) ``auto`` is VeRL's own default, bf16."""
    cpu = on_cpu(config)
    if config.precision == "auto" and not cpu and (visible_gpus() == 0 or cluster_address(config)):
        return "bf16"
    return resolve_precision(config.precision, use_gpu=not cpu)


def same_target(value: Any, wired: Any) -> bool:
    """Whether a user's value names what the engine wires: equal, or paths to the same file."""

    def named(item: Any) -> Any:
        path = Path(item).expanduser() if isinstance(item, str) else None
        return path.resolve() if path is not None and path.exists() else item

    return bool(named(value) == named(wired))


def _eval_every(eval_steps: int | None, test_freq: int | None, source: str) -> int | str | None:
    """The common ``eval_steps`` VeRL's ``test_freq`` amounts to: the job's or the section's
    frequency; ``"end"`` where the job left it unset and :func:`schedule_overrides` set the
    frequency to the last step (as the other engines' tables say it), never ``None`` beside a
    positive frequency; ``None`` where VeRL does not validate."""
    every = eval_steps if eval_steps is not None else test_freq if source == "section" else None
    if every is not None:
        return every if every > 0 else None
    return "end" if test_freq is not None and test_freq > 0 else None


def _device_row(config: TrainConfig, composed: DictConfig) -> Setting:
    """Where VeRL trains: this machine's CPU (under the platform VeRL's processes select through
    ``VERL_PLATFORM``), the GPUs visible here, or a Ray cluster's."""
    if on_cpu(config):
        chosen = config.resources.device == "cpu"
        return Setting("device", "cpu", "VERL_PLATFORM", PLATFORM, "job" if chosen else "default")
    gpus = int(composed.trainer.n_gpus_per_node)
    nodes = int(composed.trainer.nnodes)
    if cluster_address(config):
        device = f"Ray cluster: {nodes} node(s) x {gpus} GPU(s)"
    else:
        device = describe_device(use_gpu=visible_gpus() > 0)
    chosen = config.resources.gpus_per_node is not None
    section = flatten(config.engine_section()).get("trainer.n_gpus_per_node") is not None
    return Setting(
        "device",
        device,
        "trainer.n_gpus_per_node",
        gpus,
        "job" if chosen else "section" if section else "default",
    )


def _precision_name(dtype: Any) -> str:
    """The common name of one of VeRL's dtype names (``bfloat16`` -> ``bf16``)."""
    return next((name for name, names in _DTYPE_NAMES.items() if dtype in names), str(dtype))


def _as_data(value: Any) -> Any:
    """An OmegaConf list or mapping as plain data (JSON-able), anything else as it is."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    return OmegaConf.to_container(value) if isinstance(value, (DictConfig, ListConfig)) else value


def _lora_alpha(alpha: float) -> int:
    """VeRL declares ``lora_alpha`` an int."""
    if not float(alpha).is_integer():
        raise ConfigError(
            f"config key 'lora.alpha': the verl engine takes a whole number (VeRL's "
            f"actor_rollout_ref.model.lora_alpha is an int), not {alpha!r}"
        )
    return int(alpha)


def _same_dtype(precision: str, other: Any) -> bool:
    return other in _DTYPE_NAMES[precision]


def _same_dtypes(mixed: Mapping[str, str], other: Any) -> bool:
    """A ``mixed_precision`` mapping agrees when each dtype it names is the engine's."""
    return isinstance(other, Mapping) and all(
        name in mixed and _same_dtype(mixed[name], value) for name, value in other.items()
    )


def _as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value or [])
