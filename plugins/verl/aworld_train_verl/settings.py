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
    source_of,
    tracker_environment,
)

from aworld_train_verl.composition import flatten
from aworld_train_verl.declaration import DTYPE_NAMES, SETTINGS
from aworld_train_verl.device import PLATFORM, on_cpu
from aworld_train_verl.gpus import cluster_address, visible_gpus

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig
    from omegaconf import DictConfig


# The FSDP engine configs that compute in the job's precision: the policy, its reference model
# and the critic (PPO). VeRL's FSDP engine reads ``mixed_precision.{param,reduce,buffer}_dtype``
# (no such node in the packaged YAML: unset, it is bf16/fp32/fp32) and keeps the master weights
# in ``model_dtype`` (fp32); ``dtype`` is the same choice for its Megatron and VeOmni engines.
FSDP_NODES = tuple(
    key.removesuffix(".mixed_precision")
    for key in SETTINGS.own_keys("precision")
    if key.endswith(".mixed_precision")
)

# The dtype names VeRL's ``dtype`` keys and vLLM's ``dtype`` take for each common precision.
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}

# VeRL's own trackers beside the common ones: its console lines feed the progress bar and
# metrics.jsonl, its file logger writes verl_metrics.jsonl.
OWN_LOGGERS = ("console", "file")

# VeRL's FSDP optimizer schedules (FSDPOptimizerConfig asserts them).
LR_SCHEDULER_TYPES = ("constant", "cosine")

#: Where VeRL dumps each step's rollouts (``trainer.rollout_data_dir``), inside the run.
ROLLOUTS_DIR = "rollouts"


def setting_overrides(config: TrainConfig, run_dir: Path, common: CommonKeys) -> dict[str, Any]:
    """The VeRL keys the common settings set (precision, LoRA, trackers, the RL knobs, evaluation
    and rollout samples), each under the key :data:`~aworld_train_verl.declaration.SETTINGS`
    declares for it.

    A common key left unset sets nothing and keeps VeRL's default, except ``precision``
    (``auto`` is resolved, :func:`training_precision`) and ``log_samples`` (the rollout dump is on).

    :param common: the ``verl:`` section's keys (flattened, a key added with ``+`` as the key it
        adds); one that a common key of the job also sets must say the same.
    :raises ConfigError: for a value VeRL cannot honour (``lr_scheduler: linear``, a LoRA
        dropout), naming the key and the engine; for a section key that disagrees with a
        common key (:func:`aworld_train.engine.disagreement`).
    """
    carry = _Carry(config, common)
    _precision_overrides(config, carry)
    _lora_overrides(config, carry)
    if config.report_to:
        trackers = set(config.report_to)
        carry(
            "report_to",
            SETTINGS["report_to"].key,
            [*OWN_LOGGERS, *config.report_to],
            lambda other: {str(t) for t in _as_list(other) if str(t) in TRACKERS} == trackers,
        )
    _rl_overrides(config, common, carry)
    samples = DEFAULT_LOG_SAMPLES if config.log_samples is None else config.log_samples
    rollouts = str(run_dir / ROLLOUTS_DIR) if samples else None
    carry(
        "log_samples",
        SETTINGS["log_samples"].key,
        rollouts,
        lambda other: same_target(other, rollouts),
        chosen=config.log_samples is not None,
    )
    return carry.out


class _Carry:
    """Sets VeRL's keys for the common keys; where the job chose the common key, the section
    must agree with it."""

    def __init__(self, config: TrainConfig, common: CommonKeys) -> None:
        self.config, self.common = config, common
        self.out: dict[str, Any] = {}

    def __call__(
        self,
        name: str,
        key: str,
        value: Any,
        agrees: Callable[[Any], bool] | None = None,
        chosen: bool = True,
    ) -> None:
        if chosen:
            self.common.check(name, getattr(self.config, name), key.lstrip("+"), value, agrees)
        self.out[key] = value


def _precision_overrides(config: TrainConfig, carry: _Carry) -> None:
    """Every FSDP config's mixed precision and every dtype key, in the run's precision."""
    precision = training_precision(config)
    same = functools.partial(_same_dtype, precision)
    chosen = config.precision != "auto"  # auto leaves the section free to choose the dtypes
    mixed = {"param_dtype": precision, "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
    for key in SETTINGS.own_keys("precision")[1:]:  # the first is a leaf of the second
        if key.endswith(".mixed_precision"):  # a node VeRL's packaged YAML does not have
            carry("precision", f"+{key}", mixed, functools.partial(_same_dtypes, mixed), chosen)
        else:
            carry("precision", key, TORCH_DTYPES[precision], same, chosen)


def _lora_overrides(config: TrainConfig, carry: _Carry) -> None:
    lora = config.lora
    if lora is None:
        return
    if lora.dropout:
        raise ConfigError(
            f"config key 'lora.dropout': the verl engine cannot honour {lora.dropout!r}: VeRL's FSDP "
            f"LoRA builds peft's LoraConfig without dropout; set 0 or train with the trl or swift engine"
        )
    rank, alpha, modules = SETTINGS.own_keys("lora")
    carry("lora", rank, lora.rank)
    carry("lora", alpha, _lora_alpha(lora.alpha))
    targets = lora.target_modules
    carry("lora", modules, targets if isinstance(targets, str) else list(targets))


def _rl_overrides(config: TrainConfig, common: CommonKeys, carry: _Carry) -> None:
    """The KL loss, the schedule and the other RL knobs the job sets, and its evaluation."""
    if config.kl_coef is not None:
        coef, use = SETTINGS.own_keys("kl_coef")
        carry("kl_coef", use, config.kl_coef > 0)
        carry("kl_coef", coef, config.kl_coef)
        if config.kl_coef == 0:
            # No KL at all, so no reference model: a KL penalty in the reward would load one.
            carry("kl_coef", "algorithm.use_kl_in_reward", False)
    if config.lr_scheduler is not None:
        scheduler, style = SETTINGS.own_keys("lr_scheduler")
        carry("lr_scheduler", scheduler, _scheduler(config.lr_scheduler))
        # VeRL's deprecated name for the same key, which overwrites it when set.
        common.check("lr_scheduler", config.lr_scheduler, style, config.lr_scheduler)
    if config.warmup_ratio is not None:
        ratio, steps = SETTINGS.own_keys("warmup_ratio")
        carry("warmup_ratio", ratio, config.warmup_ratio)
        # A positive step count wins over the ratio in VeRL.
        common.check("warmup_ratio", config.warmup_ratio, steps, -1, lambda other: other <= 0)
    for name in ("loss_aggregation", "clip_ratio", "entropy_coef", "eval_steps"):
        value = getattr(config, name)
        for key in SETTINGS.own_keys(name) if value is not None else ():
            carry(name, key, value)


def _scheduler(name: str) -> str:
    if name not in LR_SCHEDULER_TYPES:
        raise ConfigError(
            f"config key 'lr_scheduler': the verl engine has no {name!r} schedule (VeRL's "
            f"{SETTINGS['lr_scheduler'].key} is one of {', '.join(LR_SCHEDULER_TYPES)}); choose one of those"
        )
    return name


def effective_settings(composed: DictConfig, config: TrainConfig) -> list[Setting]:
    """The common settings as VeRL will train with them, read back from the ``composed`` config:
    one row per common name, with VeRL's key and value, and whether the job's common key, the
    ``verl:`` section or VeRL's default decided (:meth:`SettingsDeclaration.source
    <aworld_train.engine.SettingsDeclaration.source>`)."""
    from omegaconf import OmegaConf

    # A null of the section leaves the key to the engine (_fill_nulls).
    section = {key.lstrip("+"): value for key, value in flatten(config.engine_section()).items()}

    def value_of(key: str) -> Any:
        return _as_data(OmegaConf.select(composed, key))

    def source(name: str) -> str:
        return SETTINGS.source(name, _job_value(config, name), section)

    precision = None if config.precision == "auto" else config.precision
    return [
        _device_row(config, composed),
        SETTINGS.read("precision", precision, section, lambda key: value_of(key) or "bf16"),
        _lora_row(composed, source("lora")),
        SETTINGS.read("report_to", config.report_to or None, section, value_of),
        _kl_row(composed, source("kl_coef")),
        *_optim_rows(composed, source),
        SETTINGS.read("loss_aggregation", config.loss_aggregation, section, value_of),
        _clip_row(composed, source("clip_ratio")),
        SETTINGS.read("entropy_coef", config.entropy_coef, section, value_of),
        _eval_row(composed, config, source("eval_steps")),
        Setting("eval_limit", config.eval_limit, "", config.eval_limit, source("eval_limit")),
        _log_samples_row(composed, config, source("log_samples")),
    ]


def _job_value(config: TrainConfig, name: str) -> Any:
    """The job's value of a common key, ``None`` where it left it to the engine."""
    value = getattr(config, name)
    return None if value in ((), "auto") else value


def _lora_row(composed: DictConfig, source: str) -> Setting:
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
    return Setting("lora", lora, SETTINGS["lora"].key, int(model.lora_rank or 0), source)


def _kl_row(composed: DictConfig, source: str) -> Setting:
    actor = composed.actor_rollout_ref.actor
    coef, use = SETTINGS.own_keys("kl_coef")
    if actor.use_kl_loss:
        return Setting("kl_coef", float(actor.kl_loss_coef), coef, actor.kl_loss_coef, source)
    return Setting("kl_coef", 0.0, use, False, source)


def _optim_rows(composed: DictConfig, source: Callable[[str], str]) -> list[Setting]:
    """``lr_scheduler`` and ``warmup_ratio`` from the actor's optimizer config."""
    optim = composed.actor_rollout_ref.actor.optim
    scheduler = optim.warmup_style or optim.lr_scheduler_type  # the deprecated name wins when set
    ratio, steps = SETTINGS.own_keys("warmup_ratio")
    key = SETTINGS["lr_scheduler"].key
    rows = [Setting("lr_scheduler", scheduler, key, scheduler, source("lr_scheduler"))]
    if optim.lr_warmup_steps is not None and optim.lr_warmup_steps > 0:
        # A step count wins over the ratio, which then says nothing.
        warmup = Setting("warmup_ratio", None, steps, optim.lr_warmup_steps, source("warmup_ratio"))
    else:
        own = optim.lr_warmup_steps_ratio
        warmup = Setting("warmup_ratio", float(own), ratio, own, source("warmup_ratio"))
    return [*rows, warmup]


def _clip_row(composed: DictConfig, source: str) -> Setting:
    actor = composed.actor_rollout_ref.actor
    both, low_key, high_key = SETTINGS.own_keys("clip_ratio")
    # VeRL clips with the low and the high ratio; clip_ratio only stands in for an unset one.
    low = actor.clip_ratio_low if actor.clip_ratio_low is not None else actor.clip_ratio
    high = actor.clip_ratio_high if actor.clip_ratio_high is not None else actor.clip_ratio
    if low == high:
        return Setting("clip_ratio", float(low), both, low, source)
    common = {"low": float(low), "high": float(high)}
    return Setting("clip_ratio", common, f"{low_key}, {high_key}", [low, high], source)


def _eval_row(composed: DictConfig, config: TrainConfig, source: str) -> Setting:
    test_freq = composed.trainer.test_freq
    every = _eval_every(config.eval_steps, test_freq, source)
    return Setting("eval_steps", every, SETTINGS["eval_steps"].key, test_freq, source)


def _log_samples_row(composed: DictConfig, config: TrainConfig, source: str) -> Setting:
    dump = composed.trainer.rollout_data_dir
    samples = DEFAULT_LOG_SAMPLES if config.log_samples is None else config.log_samples
    return Setting("log_samples", samples if dump else 0, SETTINGS["log_samples"].key, dump, source)


def trackers_of(composed: DictConfig) -> tuple[str, ...]:
    """The common trackers among VeRL's ``trainer.logger`` (the job's ``report_to``, or what the
    ``verl:`` section chose)."""
    return tuple(SETTINGS["report_to"].common_value(composed.trainer.logger))


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
        chosen = "cpu" if config.resources.device == "cpu" else None
        return Setting("device", "cpu", "VERL_PLATFORM", PLATFORM, source_of(chosen, {}, ()))
    gpus = int(composed.trainer.n_gpus_per_node)
    nodes = int(composed.trainer.nnodes)
    if cluster_address(config):
        device = f"Ray cluster: {nodes} node(s) x {gpus} GPU(s)"
    else:
        device = describe_device(use_gpu=visible_gpus() > 0)
    key = "trainer.n_gpus_per_node"
    source = source_of(config.resources.gpus_per_node, flatten(config.engine_section()), key)
    return Setting("device", device, key, gpus, source)


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
    return other in DTYPE_NAMES[precision]


def _same_dtypes(mixed: Mapping[str, str], other: Any) -> bool:
    """A ``mixed_precision`` mapping agrees when each dtype it names is the engine's."""
    return isinstance(other, Mapping) and all(
        name in mixed and _same_dtype(mixed[name], value) for name, value in other.items()
    )


def _as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value or [])
