"""The VeRL config of a job: VeRL's own ``ppo_trainer`` config, composed with Hydra, with the
common keys and the ``verl:`` section applied as dotted overrides, then checked by VeRL's own
``validate_config``.

Composing needs only Hydra and the config folder inside the installed ``verl`` distribution;
``verl`` itself is imported only for ``validate_config``.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import (
    DEFAULT_LOG_SAMPLES,
    TENSORBOARD_DIR,
    TRACKERS,
    ConfigError,
    Setting,
    check_trackers,
    describe_device,
    did_you_mean,
    remember_secrets,
    resolve_precision,
    tracker_environment,
)

if TYPE_CHECKING:
    from omegaconf import DictConfig

    from aworld_train.engine import TrainConfig

    from aworld_train_verl.vault import Vault

CONFIG_NAME = "ppo_trainer"
SECTION = "verl"  # the section's name when the config names no engine (one built by hand)
SAVED_CONFIG_NAME = "verl_config"

# The common ``algorithm`` values and VeRL's advantage estimator for each; any other value is
# passed through and must be one of VeRL's own estimators.
ALGORITHMS = {"grpo": "grpo", "ppo": "gae"}
NOT_RL = ("sft", "dpo")

# Where VeRL reads whether a model folder's own code may run: the common key
# ``trust_remote_code`` sets them all, and the ``verl:`` section may not turn them on alone.
TRUST_REMOTE_CODE_KEYS = (
    "actor_rollout_ref.model.trust_remote_code",
    "critic.model.trust_remote_code",
    "data.trust_remote_code",
)

#: The key of VeRL's config that names the policy model; the core takes it as the job's model.
MODEL_KEY = "actor_rollout_ref.model.path"

# The keys the engine wires from the job itself, and what it writes there. A null there (as a
# VeRL config written for a framework leaves them) is filled in; any other value that differs
# is refused, since VeRL would then train on, score with or write to something no check saw.
WIRED: dict[str, str] = {
    "data.train_files": "the job's train_dataset",
    "data.val_files": "the job's test_dataset (else its train_dataset)",
    "actor_rollout_ref.rollout.agent.agent_loop_config_path": "the agent loop that runs the job's agent",
    "reward.custom_reward_function.path": "the job's reward",
    "reward.custom_reward_function.name": "the job's reward",
    "trainer.default_local_dir": "the run's checkpoints",
    MODEL_KEY: "the job's model",
}

# VeRL's legacy place for the reward function, each key with the one it stands for: VeRL copies
# the legacy node over the new one when any of its keys is set.
LEGACY_KEYS = {
    "custom_reward_function.path": "reward.custom_reward_function.path",
    "custom_reward_function.name": "reward.custom_reward_function.name",
}

# Choices VeRL leaves mandatory or sizes for an 8-GPU node; a job that names none of them
# starts on one GPU with these.
DEFAULTS: dict[str, Any] = {
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.mode": "async",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 4,
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": 4,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 4,
    "critic.ppo_micro_batch_size_per_gpu": 4,
    "trainer.logger": ["console", "file"],
    "trainer.project_name": "aworld-train",
    "trainer.val_before_train": False,
}

# VeRL's suffix for the per-GPU form of a micro batch size; a config may set the older global
# form instead, and VeRL refuses both at once ("You have set both").
PER_GPU = "_per_gpu"

# The FSDP engine configs that compute in the job's precision: the policy, its reference model
# and the critic (PPO). VeRL's FSDP engine reads ``mixed_precision.{param,reduce,buffer}_dtype``
# (no such node in the packaged YAML: unset, it is bf16/fp32/fp32) and keeps the master weights
# in ``model_dtype`` (fp32); ``dtype`` is the same choice for its Megatron and VeOmni engines.
FSDP_NODES = ("actor_rollout_ref.actor.fsdp_config", "actor_rollout_ref.ref.fsdp_config", "critic.fsdp")
PRECISION_KEY = "actor_rollout_ref.actor.fsdp_config.mixed_precision"
ROLLOUT_DTYPE_KEY = "actor_rollout_ref.rollout.dtype"
# The dtype names VeRL's ``dtype`` keys and vLLM's ``dtype`` take for each common precision.
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
# VeRL's own trackers beside the common ones: its console lines feed the progress bar and
# metrics.jsonl, its file logger writes verl_metrics.jsonl.
OWN_LOGGERS = ("console", "file")
# VeRL's FSDP optimizer schedules (FSDPOptimizerConfig asserts them).
LR_SCHEDULER_TYPES = ("constant", "cosine")
# The largest LoRA rank vLLM serves (VeRL's fallback list when vLLM does not say).
VLLM_MAX_LORA_RANK = 512
#: Where VeRL dumps each step's rollouts (``trainer.rollout_data_dir``), inside the run.
ROLLOUTS_DIR = "rollouts"

_ACTOR = "actor_rollout_ref.actor"


@dataclass
class VerlConfig:
    """The resolved VeRL config of a job.

    :ivar config: the composed config.
    :ivar path: where it was saved; ``main_ppo`` reads it with ``--config-path``/``--config-name``.
    :ivar overrides: the dotted overrides it was composed with, in order.
    :ivar environment: the job's secrets, by the environment variable VeRL's processes read
        each from (the saved files reference them, :mod:`aworld_train_verl.vault`).
    :ivar variables: the environment VeRL's processes need that is not secret: where each
        tracker writes inside the run directory.
    """

    config: DictConfig
    path: Path
    overrides: dict[str, Any]
    environment: dict[str, str] = field(default_factory=dict, repr=False)
    variables: dict[str, str] = field(default_factory=dict)

    @property
    def total_steps(self) -> int | None:
        steps = self.config.trainer.total_training_steps
        return int(steps) if steps is not None else None


def config_dir() -> Path:
    """The folder of VeRL's packaged trainer configs, found without importing ``verl``."""
    import importlib.util

    spec = importlib.util.find_spec("verl")
    if spec is None or spec.origin is None:
        raise ConfigError("VeRL is not installed: pip install 'verl[verl-core]>=0.9.1,<0.10'")
    return Path(spec.origin).parent / "trainer" / "config"


def flatten(section: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; dotted keys in the mapping are kept as they are.

    A mapping value is descended into, under a key starting with ``+`` or ``++`` too (``-o
    +trainer.x=1`` reads as ``{"+trainer": {"x": 1}}``, which is Hydra's ``+trainer.x=1``); an
    empty mapping sets nothing, except under such a key, where it adds an empty node.
    """
    flat: dict[str, Any] = {}
    for key, value in section.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and (value or not dotted.startswith("+")):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def section_keys() -> frozenset[str]:
    """The top-level keys of VeRL's ``ppo_trainer`` config: what a whole VeRL config file holds."""
    return frozenset(str(key) for key in base_config().keys())


def common_overrides(config: TrainConfig) -> dict[str, Any]:
    """The VeRL keys the engine-neutral config sets."""
    algorithm = config.algorithm.lower()
    if algorithm in NOT_RL:
        raise ConfigError(
            f"config key 'algorithm': the verl engine trains with RL (grpo, ppo or one of VeRL's "
            f"advantage estimators), not '{config.algorithm}'; use the trl or swift engine for it"
        )
    if algorithm not in ALGORITHMS:
        from aworld_train_verl.schema import check_choice

        check_choice(algorithm, "algorithm.adv_estimator", "config key 'algorithm'")
    out: dict[str, Any] = {}
    if config.is_set("algorithm") or not configures_critic(flatten(_section(config))):
        out["algorithm.adv_estimator"] = ALGORITHMS.get(algorithm, algorithm)
    if config.model is not None:
        out.update(model_overrides(config.model))
    for key in TRUST_REMOTE_CODE_KEYS:
        out[key] = config.trust_remote_code
    if config.learning_rate is not None:
        out["actor_rollout_ref.actor.optim.lr"] = config.learning_rate
    if config.max_steps is not None:
        out["trainer.total_training_steps"] = config.max_steps
    if config.num_epochs is not None:
        # VeRL counts whole epochs; a fractional request is rounded up, max_steps bounds it.
        out["trainer.total_epochs"] = max(1, math.ceil(config.num_epochs))
    if config.batch_size is not None:
        # batch_size counts completions per step, as in every engine; VeRL counts prompts, each
        # sampled rollout.n times, and normalises its mini batches by rollout.n the same way.
        generations = config.num_generations or 1
        if config.batch_size % generations:
            raise ConfigError(
                f"config key 'batch_size': {config.batch_size} completions per step do not divide "
                f"into groups of num_generations={generations}; make it a multiple of {generations}"
            )
        prompts = config.batch_size // generations
        out["data.train_batch_size"] = prompts
        out["actor_rollout_ref.actor.ppo_mini_batch_size"] = prompts
        out["critic.ppo_mini_batch_size"] = prompts
    if config.num_generations is not None:
        out["actor_rollout_ref.rollout.n"] = config.num_generations
    if config.max_prompt_length is not None:
        out["data.max_prompt_length"] = config.max_prompt_length
    if config.max_completion_length is not None:
        out["data.max_response_length"] = config.max_completion_length
    out["data.seed"] = config.seed
    out["actor_rollout_ref.actor.data_loader_seed"] = config.seed
    out["actor_rollout_ref.rollout.seed"] = config.seed
    if config.save_steps is not None:
        out["trainer.save_freq"] = config.save_steps
    out["trainer.nnodes"] = config.resources.nnodes
    out["trainer.n_gpus_per_node"] = config.resources.gpus_per_node or max(visible_gpus(), 1)
    return out


def _section(config: TrainConfig) -> dict[str, Any]:
    """The job's ``verl:`` section (or the section of the name the engine is installed under)."""
    return config.engine_section() if config.engine is not None else config.engine_section(SECTION)


def configures_critic(section: Mapping[str, Any]) -> bool:
    """Whether a flattened ``verl:`` section configures VeRL's critic (a value under
    ``critic.``, ``critic.enable: false`` aside): a VeRL PPO config, such as VeRL's own
    quickstart, which leaves ``algorithm.adv_estimator`` to VeRL's default (``gae``, the
    estimator that trains the critic). Such a config keeps VeRL's estimator unless the job sets
    the common ``algorithm`` itself; any other job trains ``grpo`` unless it says otherwise."""
    if section.get("critic.enable", section.get("++critic.enable")) is False:
        return False
    return any(key.lstrip("+").startswith("critic.") and value is not None for key, value in section.items())


def model_overrides(model: str) -> dict[str, Any]:
    """The policy's model folder, for the actor, its rollout and reference, and the critic (PPO)."""
    return {MODEL_KEY: model, "critic.model.path": model}


@dataclass(frozen=True)
class Carried:
    """A VeRL key that a common key of the job sets.

    :ivar common: the common key, as the job writes it (``kl_coef``).
    :ivar value: the common key's value.
    :ivar engine_value: what it sets the VeRL key to.
    :ivar agrees: whether a value the ``verl:`` section gives the same key says the same.
    """

    common: str
    value: Any
    engine_value: Any
    agrees: Callable[[Any], bool]


def setting_overrides(config: TrainConfig, run_dir: Path) -> tuple[dict[str, Any], dict[str, Carried]]:
    """The VeRL keys the common settings set (precision, LoRA, trackers, the RL knobs, evaluation
    and rollout samples), and, for each key a common key of the job set, what set it.

    A common key left unset sets nothing and keeps VeRL's default, except ``precision``
    (``auto`` is resolved, :func:`training_precision`) and ``log_samples`` (the rollout dump is on).

    :raises ConfigError: for a value VeRL cannot honour (``lr_scheduler: linear``, a LoRA
        dropout), naming the key and the engine.
    """
    out: dict[str, Any] = {}
    carried: dict[str, Carried] = {}

    def carry(common: str, key: str, value: Any, agrees: Callable[[Any], bool] | None = None,
              chosen: bool = True) -> None:
        """Set ``key``; when the job chose the common key, the section must agree with it."""
        out[key] = value
        if chosen:
            carried[key.lstrip("+")] = Carried(common, getattr(config, common), value,
                                               agrees or functools.partial(_equal, expected=value))

    precision = training_precision(config)
    same = functools.partial(_same_dtype, precision)
    chosen = config.precision != "auto"  # auto leaves the section free to choose the dtypes
    for node in FSDP_NODES:
        mixed = {"param_dtype": precision, "reduce_dtype": "fp32", "buffer_dtype": "fp32"}
        carry("precision", f"+{node}.mixed_precision", mixed, functools.partial(_same_dtypes, mixed), chosen)
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
        carry("lora", "actor_rollout_ref.model.target_modules", modules if isinstance(modules, str) else list(modules))

    if config.report_to:
        trackers = set(config.report_to)
        carry("report_to", "trainer.logger", [*OWN_LOGGERS, *config.report_to],
              lambda other: {str(t) for t in _as_list(other) if str(t) in TRACKERS} == trackers)

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
        carried[f"{_ACTOR}.optim.warmup_style"] = Carried(
            "lr_scheduler", config.lr_scheduler, config.lr_scheduler, lambda other: other == config.lr_scheduler)
    if config.warmup_ratio is not None:
        carry("warmup_ratio", f"{_ACTOR}.optim.lr_warmup_steps_ratio", config.warmup_ratio)
        # A positive step count wins over the ratio in VeRL.
        carried[f"{_ACTOR}.optim.lr_warmup_steps"] = Carried(
            "warmup_ratio", config.warmup_ratio, -1, lambda other: other is None or other <= 0)
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
    carry("log_samples", "trainer.rollout_data_dir", rollouts, lambda other: _same(other, rollouts),
          chosen=config.log_samples is not None)
    return out, carried


def effective_settings(resolved: VerlConfig, config: TrainConfig) -> list[Setting]:
    """The common settings as VeRL will train with them, read back from the composed config:
    one row per common name, with VeRL's key and value, and whether the job's common key, the
    ``verl:`` section or VeRL's default decided."""
    composed = resolved.config
    actor = composed.actor_rollout_ref.actor
    # A null of the section leaves the key to the engine (_fill_nulls).
    section = {key.lstrip("+") for key, value in flatten(config.engine_section()).items() if value is not None}

    def source(name: str, keys: tuple[str, ...], chosen: bool | None = None) -> str:
        if getattr(config, name) is not None if chosen is None else chosen:
            return "job"
        return "section" if any(key in section for key in keys) else "default"

    rows = [_device_row(config, composed)]

    mixed = actor.fsdp_config.get("mixed_precision") or {}
    precision = _precision_name(mixed.get("param_dtype", "bf16"))
    precision_keys = (PRECISION_KEY, ROLLOUT_DTYPE_KEY, *(f"{node}.{leaf}" for node in FSDP_NODES
                                                         for leaf in ("dtype", "mixed_precision")))
    rows.append(Setting("precision", precision, f"{PRECISION_KEY}.param_dtype", mixed.get("param_dtype", "bf16"),
                        source("precision", precision_keys, config.precision != "auto")))

    model = composed.actor_rollout_ref.model
    lora = None if not model.lora_rank else {
        "rank": int(model.lora_rank), "alpha": float(model.lora_alpha), "dropout": 0.0,
        "target_modules": _plain(model.target_modules)}
    rows.append(Setting("lora", lora, "actor_rollout_ref.model.lora_rank", int(model.lora_rank or 0),
                        source("lora", ("actor_rollout_ref.model.lora_rank",))))

    rows.append(Setting("report_to", list(trackers_of(composed)), "trainer.logger", _plain(composed.trainer.logger),
                        source("report_to", ("trainer.logger",), bool(config.report_to))))

    kl_keys = (f"{_ACTOR}.use_kl_loss", f"{_ACTOR}.kl_loss_coef")
    if actor.use_kl_loss:
        rows.append(Setting("kl_coef", float(actor.kl_loss_coef), kl_keys[1], actor.kl_loss_coef,
                            source("kl_coef", kl_keys)))
    else:
        rows.append(Setting("kl_coef", 0.0, kl_keys[0], False, source("kl_coef", kl_keys)))

    optim = actor.optim
    scheduler = optim.warmup_style or optim.lr_scheduler_type  # VeRL's deprecated name wins when set
    scheduler_keys = (f"{_ACTOR}.optim.lr_scheduler_type", f"{_ACTOR}.optim.warmup_style")
    rows.append(Setting("lr_scheduler", scheduler, scheduler_keys[0], scheduler,
                        source("lr_scheduler", scheduler_keys)))
    warmup_keys = (f"{_ACTOR}.optim.lr_warmup_steps_ratio", f"{_ACTOR}.optim.lr_warmup_steps")
    if optim.lr_warmup_steps is not None and optim.lr_warmup_steps > 0:
        # A step count wins over the ratio, which then says nothing.
        rows.append(Setting("warmup_ratio", None, warmup_keys[1], optim.lr_warmup_steps,
                            source("warmup_ratio", warmup_keys)))
    else:
        rows.append(Setting("warmup_ratio", float(optim.lr_warmup_steps_ratio), warmup_keys[0],
                            optim.lr_warmup_steps_ratio, source("warmup_ratio", warmup_keys)))
    rows.append(Setting("loss_aggregation", actor.loss_agg_mode, f"{_ACTOR}.loss_agg_mode", actor.loss_agg_mode,
                        source("loss_aggregation", (f"{_ACTOR}.loss_agg_mode",))))
    clip_keys = tuple(f"{_ACTOR}.{key}" for key in ("clip_ratio", "clip_ratio_low", "clip_ratio_high"))
    # VeRL clips with the low and the high ratio; clip_ratio only stands in for an unset one.
    low = actor.clip_ratio_low if actor.clip_ratio_low is not None else actor.clip_ratio
    high = actor.clip_ratio_high if actor.clip_ratio_high is not None else actor.clip_ratio
    rows.append(Setting("clip_ratio", float(low) if low == high else {"low": float(low), "high": float(high)},
                        f"{clip_keys[1]}, {clip_keys[2]}" if low != high else clip_keys[0],
                        low if low == high else [low, high], source("clip_ratio", clip_keys)))
    rows.append(Setting("entropy_coef", float(actor.entropy_coeff), f"{_ACTOR}.entropy_coeff", actor.entropy_coeff,
                        source("entropy_coef", (f"{_ACTOR}.entropy_coeff",))))

    test_freq = composed.trainer.test_freq
    eval_source = source("eval_steps", ("trainer.test_freq",))
    rows.append(Setting("eval_steps", _eval_every(config.eval_steps, test_freq, eval_source), "trainer.test_freq",
                        test_freq, eval_source))
    rows.append(Setting("eval_limit", config.eval_limit, "", config.eval_limit, source("eval_limit", ())))
    dump = composed.trainer.rollout_data_dir
    samples = (DEFAULT_LOG_SAMPLES if config.log_samples is None else config.log_samples) if dump else 0
    rows.append(Setting("log_samples", samples, "trainer.rollout_data_dir", dump,
                        source("log_samples", ("trainer.rollout_data_dir",))))
    return rows


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
    """Where VeRL trains: the GPUs visible here, or a Ray cluster's."""
    gpus = int(composed.trainer.n_gpus_per_node)
    nodes = int(composed.trainer.nnodes)
    if cluster_address(config):
        device = f"Ray cluster: {nodes} node(s) x {gpus} GPU(s)"
    else:
        device = describe_device(use_gpu=visible_gpus() > 0)
    chosen = config.resources.gpus_per_node is not None
    section = flatten(config.engine_section()).get("trainer.n_gpus_per_node") is not None
    return Setting("device", device, "trainer.n_gpus_per_node", gpus,
                   "job" if chosen else "section" if section else "default")


def _precision_name(dtype: Any) -> str:
    """The common name of one of VeRL's dtype names (``bfloat16`` -> ``bf16``)."""
    return next((name for name, names in _DTYPE_NAMES.items() if dtype in names), str(dtype))


def _plain(value: Any) -> Any:
    """An OmegaConf list or mapping as plain data (JSON-able), anything else as it is."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    return OmegaConf.to_container(value) if isinstance(value, (DictConfig, ListConfig)) else value


def schedule_overrides(
    config: TrainConfig, run_dir: Path, inputs: Mapping[str, Any], rows: int, has_test: bool
) -> dict[str, Any]:
    """When VeRL scores the test set (``trainer.test_freq``) and saves a checkpoint
    (``trainer.save_freq``). VeRL's trainer does either at a multiple of its frequency and at its
    last step, when the frequency is positive; so a frequency no earlier step reaches means the
    last step only.

    The test set is scored every ``eval_steps`` and after the last step; with ``eval_steps``
    unset, after the last step only; without a test set, never; never before training
    (``trainer.val_before_train`` stays off unless the ``verl:`` section turns it on). A
    checkpoint is saved every ``save_steps`` and after the last step, which the run's model is
    converted from; with ``save_steps`` unset, after the last step only.

    :param inputs: what the earlier checks produced, as for :func:`job_overrides`.
    :param rows: the training rows VeRL reads. (``eval_steps`` or ``eval_limit`` without a test
        set never reaches here: the core refuses it for every engine.)
    """
    last = _last_step(preview(config, run_dir, inputs), rows)
    out: dict[str, Any] = {}
    if config.eval_steps is None:  # else setting_overrides carries it
        out["trainer.test_freq"] = last if has_test else -1
    if config.save_steps is None:  # else common_overrides carries it
        out["trainer.save_freq"] = last
    return out


def _last_step(composed: DictConfig, rows: int) -> int:
    """VeRL's last step, or a step at least as late: its ``total_training_steps``, else whole
    batches of the training rows times the epochs (VeRL may drop overlong prompts: fewer)."""
    steps = composed.trainer.total_training_steps
    if steps is None:
        steps = rows // int(composed.data.train_batch_size) * int(composed.trainer.total_epochs)
    return max(int(steps), 1)


def training_precision(config: TrainConfig) -> str:
    """The precision VeRL computes in: the job's, with ``auto`` resolved by
    :func:`aworld_train.engine.resolve_precision` on the GPUs visible here. VeRL trains on GPUs
    only, so where this machine shows none (a check before training elsewhere, a Ray cluster's
    GPUs) ``auto`` is VeRL's own default, bf16."""
    if config.precision == "auto" and (visible_gpus() == 0 or cluster_address(config)):
        return "bf16"
    return resolve_precision(config.precision, use_gpu=True)


def _lora_alpha(alpha: float) -> int:
    """VeRL declares ``lora_alpha`` an int."""
    if not float(alpha).is_integer():
        raise ConfigError(
            f"config key 'lora.alpha': the verl engine takes a whole number (VeRL's "
            f"actor_rollout_ref.model.lora_alpha is an int), not {alpha!r}"
        )
    return int(alpha)


# VeRL's names for each precision (verl.utils.torch_dtypes.PrecisionType).
_DTYPE_NAMES = {"fp32": ("fp32", "float32", "32", 32), "bf16": ("bf16", "bfloat16"),
                "fp16": ("fp16", "float16", "16", 16)}


def _same_dtype(precision: str, other: Any) -> bool:
    return other in _DTYPE_NAMES[precision]


def _same_dtypes(mixed: Mapping[str, str], other: Any) -> bool:
    """A ``mixed_precision`` mapping agrees when each dtype it names is the engine's."""
    return isinstance(other, Mapping) and all(
        name in mixed and _same_dtype(mixed[name], value) for name, value in other.items())


def _as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, str) else list(value or [])


def _equal(value: Any, *, expected: Any) -> bool:
    """Equal as VeRL reads them: 1 and 1.0 alike, a list and a tuple alike."""
    if isinstance(expected, (list, tuple)):
        return isinstance(value, (list, tuple)) and list(value) == list(expected)
    if isinstance(expected, bool) or isinstance(value, bool):
        return value is expected
    return bool(value == expected)


def _check_carried(section: Mapping[str, Any], origins: Mapping[str, str], carried: Mapping[str, Carried]) -> None:
    """A key the ``verl:`` section sets that a common key of the job also sets must say the same.

    :raises ConfigError: naming both places.
    """
    for key, value in section.items():
        found = carried.get(key.lstrip("+"))
        if found is None or value is None or found.agrees(value):
            continue
        raise ConfigError(
            f"{origins[key]}: {value!r} contradicts config key '{found.common}' ({_shown(found.value)}), which "
            f"sets '{key.lstrip('+')}' to {found.engine_value!r}; set it in one place"
        )


def _shown(value: Any) -> str:
    return repr(value.to_dict()) if hasattr(value, "to_dict") else repr(value)


def cluster_address(config: TrainConfig) -> str | None:
    """The Ray cluster the job joins: ``resources.ray_address``, else ``RAY_ADDRESS``, else none."""
    return config.resources.ray_address or os.environ.get("RAY_ADDRESS") or None


def visible_gpus() -> int:
    """How many NVIDIA GPUs this process can use, without importing torch.

    ``CUDA_VISIBLE_DEVICES`` narrows what ``nvidia-smi -L`` lists, as it does for CUDA.
    """
    import shutil
    import subprocess

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    count = sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))
    if visible is not None:
        count = min(count, len([d for d in visible.split(",") if d.strip()]))
    return count


@contextlib.contextmanager
def _hydra() -> Iterator[None]:
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
        yield


def _keys(node: Any, prefix: str = "") -> Iterator[str]:
    from omegaconf import DictConfig

    for key in node.keys() if isinstance(node, DictConfig) else ():
        dotted = f"{prefix}{key}"
        yield dotted
        try:
            child = node._get_node(key)
        except Exception:  # noqa: BLE001 - a node that cannot be read still names a key
            continue
        if isinstance(child, DictConfig):
            yield from _keys(child, dotted + ".")


@functools.lru_cache(maxsize=1)
def base_config() -> DictConfig:
    """VeRL's ``ppo_trainer`` config as packaged, with no override (read it, never change it).

    Hydra composes it from VeRL's config folder once per installed VeRL; the result is kept as
    YAML beside the schema (:func:`aworld_train.engine.cached`).
    """
    from omegaconf import OmegaConf

    from aworld_train.engine import cached

    from aworld_train_verl.schema import cache_key

    def compose_packaged() -> str:
        from hydra import compose

        with _hydra():
            return OmegaConf.to_yaml(compose(CONFIG_NAME))

    text = cached(f"verl-{CONFIG_NAME}.yaml", compose_packaged, lambda text: "trainer:" in text, key=cache_key())
    base = OmegaConf.create(text)
    OmegaConf.set_struct(base, True)
    return base


def compose_config(overrides: Mapping[str, Any]) -> DictConfig:
    """VeRL's ``ppo_trainer`` config with dotted overrides applied as Hydra applies a
    ``key=value`` override (``+key=value`` adds a key), to a copy of :func:`base_config`;
    :func:`job_overrides` has checked the keys.

    :raises ConfigError: when OmegaConf rejects an override.
    """
    import copy

    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    composed = copy.deepcopy(base_config())
    for key, value in overrides.items():
        try:
            OmegaConf.update(composed, key.lstrip("+"), value, merge=True, force_add=key.startswith("+"))
        except OmegaConfBaseException as error:
            raise ConfigError(f"VeRL's {CONFIG_NAME} config rejects '{key}': {_one_line(error)}") from error
    return composed


def known_keys(config: DictConfig) -> set[str]:
    """Every dotted key of a composed config."""
    return set(_keys(config))


def _check_keys(section: Mapping[str, Any], origins: Mapping[str, str], base: DictConfig) -> None:
    """Reject keys the composed config lacks, and keys added with ``+`` that it has (as Hydra
    does), naming where each was set."""
    keys = known_keys(base)
    for key, origin in origins.items():
        if key.startswith("+"):
            name = key.lstrip("+")
            if name in keys:  # Hydra: "Could not append to config. An item is already at ..."
                raise ConfigError(f"{origin}: '{name}' is already a key of VeRL's {CONFIG_NAME} config; "
                                  f"set it without the '+' (or with '++', which adds or overrides)")
            continue
        if key not in keys:
            parent = key.rsplit(".", 1)[0] if "." in key else ""
            scope = [k for k in keys if k.rsplit(".", 1)[0] == parent] if parent in keys else keys
            raise ConfigError(
                f"{origin}: '{key}' is not a key of VeRL's {CONFIG_NAME} config"
                f"{did_you_mean(key, scope) or did_you_mean(key, keys)}; "
                f"prefix it with '+' to add a new key"
            )


def _check_remote_code(section: Mapping[str, Any], origins: Mapping[str, str], config: TrainConfig) -> None:
    """Code from a model folder runs only when the job says so with the common key."""
    for key in section:
        if key.lstrip("+").endswith("trust_remote_code") and section[key] is True and not config.trust_remote_code:
            raise ConfigError(
                f"{origins[key]}: VeRL would run code from the model folder; set the config key "
                f"'trust_remote_code: true' instead, if you trust that code"
            )


def job_overrides(
    config: TrainConfig, run_dir: Path, inputs: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The dotted overrides of a job, and where each key of the ``verl:`` section came from.

    They apply in this order, each winning over the one before: the engine's defaults,
    ``inputs`` (what the earlier checks produced: the model, data files, the wired reward), the
    common keys, then the ``verl:`` section, less its nulls for keys the engine sets
    (:func:`_fill_nulls`).

    :raises ConfigError: for an unknown key of the section (with a suggestion), a value VeRL
        would reject (:func:`aworld_train_verl.schema.check_values`), a value that contradicts
        the engine's wiring, or a model folder's code turned on without the common key
        ``trust_remote_code``.
    """
    from aworld_train_verl.schema import check_values

    section = flatten(_section(config))
    origins = {key: f"config key '{config.engine or SECTION}.{key}'" for key in section}
    base = base_config()
    section, origins = normalise_added(section, origins, base)
    _check_keys(section, origins, base)
    _check_remote_code(section, origins, config)
    settings, carried = setting_overrides(config, run_dir)
    _check_carried(section, origins, carried)
    engine: dict[str, Any] = {
        **engine_defaults(section),
        "trainer.experiment_name": run_dir.name,
        "trainer.default_local_dir": str(run_dir / "checkpoints"),
        # Ray refuses num_cpus when it joins an existing cluster.
        "ray_kwargs.ray_init.num_cpus": None if cluster_address(config) else os.cpu_count() or 1,
        **(inputs or {}),
        **common_overrides(config),
        **settings,
    }
    section = _fill_nulls(section, origins, engine)
    origins = {key: origin for key, origin in origins.items() if key in section}
    check_values(section, origins, base)
    overrides = {**engine, **section}
    if config.resources.ray_address:
        overrides["+ray_kwargs.ray_init.address"] = config.resources.ray_address
    return overrides, origins


def engine_defaults(section: Mapping[str, Any]) -> dict[str, Any]:
    """:data:`DEFAULTS`, less each per-GPU micro batch size whose older global twin
    (``actor.ppo_micro_batch_size`` for ``actor.ppo_micro_batch_size_per_gpu``) the section sets:
    VeRL takes either, and refuses both."""
    chosen = {key.lstrip("+") for key, value in section.items() if value is not None}
    return {key: value for key, value in DEFAULTS.items()
            if not (key.endswith(PER_GPU) and key.removesuffix(PER_GPU) in chosen)}


def normalise_added(section: Mapping[str, Any], origins: Mapping[str, str],
                    base: DictConfig) -> tuple[dict[str, Any], dict[str, str]]:
    """The section with Hydra's ``++key`` (add, or override when present) written as the key
    itself where VeRL's config has it, else as ``+key`` (a new key); each key's origin kept, so
    an error still names what the user wrote."""
    keys = known_keys(base)
    normal: dict[str, Any] = {}
    where: dict[str, str] = {}
    for key, value in section.items():
        name = key
        if key.startswith("++"):
            name = key[2:] if key[2:] in keys else key[1:]
        normal[name] = value
        where[name] = origins[key]
    return normal, where


def _fill_nulls(section: Mapping[str, Any], origins: Mapping[str, str], engine: Mapping[str, Any]) -> dict[str, Any]:
    """The section less what the engine fills in: a null for a key the engine sets, for a key
    of :data:`WIRED` (unset, it keeps VeRL's default) and for a legacy key of
    :data:`LEGACY_KEYS`, and a legacy key that agrees with the engine's wiring (which holds it
    already). Any other null keeps VeRL's meaning of null.

    :raises ConfigError: when a wired key (or its legacy alias) names something other than
        what the engine wires there.
    """
    kept: dict[str, Any] = {}
    for key, value in section.items():
        target = LEGACY_KEYS.get(key, key)
        wired = target in WIRED and target in engine
        if wired and value is not None and not _same(value, engine[target]):
            where = "there" if key == target else f"at '{target}'"
            raise ConfigError(
                f"{origins[key]}: {value!r} contradicts {engine[target]!r}, which the engine wires "
                f"{where}; leave it null: the engine writes {WIRED[target]} there"
            )
        if value is None and (target in WIRED or key in LEGACY_KEYS or key in engine):
            continue
        if wired and key != target:
            continue
        kept[key] = value
    return kept


def _same(value: Any, wired: Any) -> bool:
    """Whether a user's value names what the engine wires: equal, or paths to the same file."""

    def named(item: Any) -> Any:
        path = Path(item).expanduser() if isinstance(item, str) else None
        return path.resolve() if path is not None and path.exists() else item

    return bool(named(value) == named(wired))


def preview(config: TrainConfig, run_dir: Path, inputs: Mapping[str, Any] | None = None) -> DictConfig:
    """The job's composed config, for the checks that run before :func:`resolve`; not validated."""
    return compose_config(job_overrides(config, run_dir, inputs)[0])


def resolve(
    config: TrainConfig, run_dir: Path, inputs: Mapping[str, Any] | None = None, vault: Vault | None = None
) -> VerlConfig:
    """Compose VeRL's config for a job, validate it with VeRL's own code, and save it as
    ``run_dir/verl_config.yaml``, each secret in it replaced by a reference to the environment.

    :param inputs: dotted VeRL keys the earlier checks produced.
    :param vault: the job's secrets so far (a new one when not given); the result carries them.
    :raises ConfigError: for an unknown key (with a suggestion), a value of the wrong type, or
        a config VeRL's own checks reject.
    """
    from omegaconf import OmegaConf

    from aworld_train_verl.vault import Vault

    vault = vault or Vault()
    overrides, origins = job_overrides(config, run_dir, inputs)
    composed = compose_config(overrides)
    _validate(composed, origins)
    trackers = trackers_of(composed)
    check_trackers(trackers)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / f"{SAVED_CONFIG_NAME}.yaml"
    OmegaConf.save(_without_secrets(composed, overrides, vault), path)
    return VerlConfig(config=composed, path=path, overrides=overrides, environment=vault.environment,
                      variables=tracker_variables(trackers, run_dir))


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


def _without_secrets(composed: DictConfig, overrides: Mapping[str, Any], vault: Vault) -> DictConfig:
    """``composed`` as it is saved: each override that holds a secret (by its value, or by its
    key: ``...env_vars.HF_TOKEN``) as ``${oc.env:NAME}``, which VeRL resolves when it starts."""
    import copy

    from omegaconf import OmegaConf

    remember_secrets(unflatten(overrides))
    saved = composed
    for key, value in overrides.items():
        hidden = vault.hide(value)
        if hidden != value:
            if saved is composed:
                saved = copy.deepcopy(composed)
            OmegaConf.update(saved, key.lstrip("+"), hidden, force_add=True)
    return saved


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"a.b": 1}`` → ``{"a": {"b": 1}}`` (a leading ``+`` dropped), so that key names count."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, last = key.lstrip("+").split(".")
        node = nested
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[last] = value
    return nested


def _validate(composed: DictConfig, origins: Mapping[str, str]) -> None:
    """Run what ``main_ppo`` runs before it starts Ray: ``validate_config`` and the conversion of
    the typed sections into VeRL's config dataclasses (whose ``__post_init__`` checks choices
    such as ``loss_agg_mode``).

    :param origins: the keys the user set, and where; a rejection that names one of them is
        reported as that key's.
    """
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    if composed.actor_rollout_ref.model.path == base_config().actor_rollout_ref.model.path:
        raise ConfigError("no model: set config key 'model' (or the agent's model) to a model folder")
    validated = _without_vllm_lora_lookup(composed, origins)
    steps = (
        ("algorithm", lambda: omega_conf_to_dataclass(composed.algorithm)),
        ("actor_rollout_ref.rollout", lambda: omega_conf_to_dataclass(composed.actor_rollout_ref.rollout)),
        (
            "validate_config",
            lambda: validate_config(
                validated,
                use_reference_policy=need_reference_policy(composed),
                use_critic=need_critic(composed),
            ),
        ),
    )
    for where, step in steps:
        try:
            with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                step()
        except Exception as error:  # noqa: BLE001 - VeRL raises asserts, ValueError, KeyError, ...
            text = _one_line(_root_cause(error))
            raise ConfigError(f"{_named_origin(text, origins)}VeRL's {where} rejects the config: {text}") from error
    _check_model_len(composed, origins)


def _without_vllm_lora_lookup(composed: DictConfig, origins: Mapping[str, str]) -> DictConfig:
    """``composed`` for ``validate_config``: with LoRA and the vLLM rollout, ``validate_config``
    imports vLLM to look up its largest LoRA rank. Where vLLM is not installed (a machine that
    checks, not trains), the rank is checked here against the ranks VeRL falls back to, and
    ``validate_config`` sees the config without LoRA (its only LoRA check is that look-up).

    :raises ConfigError: for a rank past vLLM's largest.
    """
    import copy
    import importlib.util

    rank = composed.actor_rollout_ref.model.lora_rank
    if not rank or composed.actor_rollout_ref.rollout.name != "vllm" or importlib.util.find_spec("vllm"):
        return composed
    if rank > VLLM_MAX_LORA_RANK:
        origin = origins.get("actor_rollout_ref.model.lora_rank", "config key 'lora.rank'")
        raise ConfigError(
            f"{origin}: {rank} is past vLLM's largest LoRA rank, {VLLM_MAX_LORA_RANK}, which VeRL's rollout "
            f"refuses; lower it"
        )
    validated = copy.deepcopy(composed)
    validated.actor_rollout_ref.model.lora_rank = 0
    return validated


def _check_model_len(composed: DictConfig, origins: Mapping[str, str]) -> None:
    """VeRL's rollout server refuses at start-up a ``rollout.max_model_len`` past the model's
    positions (unset, it takes the positions)."""
    from aworld_train.engine import max_positions

    key = "actor_rollout_ref.rollout.max_model_len"
    max_model_len = composed.actor_rollout_ref.rollout.max_model_len
    folder = Path(str(composed.actor_rollout_ref.model.path))
    found = max_positions(folder) if max_model_len is not None and folder.is_dir() else None
    if found is not None and max_model_len > found[0]:
        origin = origins.get(key, f"VeRL key '{key}'")
        raise ConfigError(
            f"{origin}: {max_model_len} is past the model's {found[0]} positions ({found[1]} in "
            f"{folder / 'config.json'}), which VeRL's rollout refuses at start-up; lower it or leave it unset"
        )


def _root_cause(error: BaseException) -> BaseException:
    """The error VeRL's own code raised, beneath Hydra's instantiation wrapper."""
    from hydra.errors import InstantiationException

    while isinstance(error, InstantiationException) and error.__cause__ is not None:
        error = error.__cause__
    return error


def _named_origin(text: str, origins: Mapping[str, str]) -> str:
    """``"config key 'verl.x.y': "`` for the first key the user set whose name the message
    mentions, else nothing."""
    import re

    for key, origin in origins.items():
        name = key.lstrip("+").rsplit(".", 1)[-1]
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text) or key.lstrip("+") in text:
            return f"{origin}: "
    return ""


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= 400 else text[:397] + "..."
