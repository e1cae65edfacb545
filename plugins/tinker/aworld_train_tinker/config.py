"""check_config: the ``tinker:`` section and the common keys, resolved into a :class:`TinkerJob`.

Tinker trains LoRA adapters only, with the service's own losses and Adam; what a common key asks
that the service cannot do is refused by name, and everything the job will use is listed in the
effective settings.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, get_type_hints

from aworld_train.engine import ConfigError, Lora, Setting, TrainConfig, check_value, did_you_mean
from aworld_train.engine.settings import refuse_grpo_only, source_of

from aworld_train_tinker.declaration import SETTINGS

DEFAULT_BASE_URL_ENV = "TINKER_BASE_URL"
# The GRPO losses the service computes itself (its `forward_backward` loss functions).
RL_LOSSES = ("importance_sampling", "ppo")
ALGORITHMS = ("grpo", "sft")
# SkyRL tx's default limit (JaxBackendConfig.max_lora_rank); the cloud's is its own.
DEFAULT_MAX_LORA_RANK = 32


@dataclass(frozen=True)
class Section:
    """The keys of the ``tinker:`` section. The API key is never one of them: it stays in the
    environment variable ``api_key_env`` names."""

    #: The service, e.g. ``http://127.0.0.1:8000`` for SkyRL tx; unset: ``$TINKER_BASE_URL``,
    #: else the SDK's default (Thinking Machines' cloud).
    base_url: str | None = None
    #: The model the service trains; unset: the job's ``model``.
    base_model: str | None = None
    #: The environment variable holding the API key.
    api_key_env: str = "TINKER_API_KEY"
    #: The adapter's rank; unset: ``lora.rank``, else 32.
    lora_rank: int | None = None
    #: The largest rank the service takes (SkyRL tx: its backend's ``max_lora_rank``).
    max_lora_rank: int = DEFAULT_MAX_LORA_RANK
    #: GRPO's loss: ``importance_sampling`` or ``ppo`` (the service's clipped objective).
    loss_fn: str = "importance_sampling"
    #: GRPO's sampling temperature; unset: the agent's ``llm_temperature``, else 1.0.
    temperature: float | None = None
    #: Advantages divided by their group's standard deviation (GRPO's normalisation).
    scale_rewards: bool = True
    #: Seconds the checks wait for the service to answer.
    connect_timeout: float = 10.0
    #: Seconds one training call (sample, forward_backward, optim_step, save) may take before
    #: the run stops as failed and resumable; the first call of a run includes compilation.
    request_timeout: float = 600.0


SECTION_KEYS = tuple(f.name for f in fields(Section))
_BOUNDS: dict[str, dict[str, float]] = {
    "lora_rank": {"ge": 1},
    "max_lora_rank": {"ge": 1},
    "temperature": {"gt": 0},
    "connect_timeout": {"gt": 0},
    "request_timeout": {"gt": 0},
}


@dataclass(frozen=True)
class TinkerJob:
    """What ``train`` needs, resolved from the common keys and the section."""

    algorithm: str
    base_url: str | None
    base_model: str
    api_key_env: str
    lora_rank: int
    loss_fn: str
    loss_aggregation: str
    learning_rate: float
    max_steps: int | None
    num_epochs: float
    batch_size: int
    num_generations: int
    max_completion_length: int
    temperature: float
    scale_rewards: bool
    lr_scheduler: str
    warmup_ratio: float
    seed: int
    logging_steps: int
    save_steps: int | None
    log_samples: int
    request_timeout: float
    connect_timeout: float
    max_lora_rank: int
    settings: list[Setting] = field(default_factory=list, compare=False)

    @property
    def prompts_per_step(self) -> int:
        return self.batch_size // self.num_generations if self.algorithm == "grpo" else 1

    def api_key(self) -> str | None:
        return os.environ.get(self.api_key_env) or None

    def learning_rate_at(self, step: int, total: int) -> float:
        """The rate of ``step`` (1-based) of ``total``: warm-up, then the schedule."""
        warmup = int(self.warmup_ratio * total)
        if step <= warmup:
            return self.learning_rate * step / max(warmup, 1)
        progress = (step - warmup - 1) / max(total - warmup - 1, 1)
        if self.lr_scheduler == "linear":
            return self.learning_rate * (1 - progress)
        if self.lr_scheduler == "cosine":
            return self.learning_rate * 0.5 * (1 + math.cos(math.pi * progress))
        return self.learning_rate


def read_section(raw: dict[str, Any]) -> Section:
    """The section, each key known and of its field's type."""
    if "api_key" in raw:
        raise ConfigError(
            "config tinker.api_key: the key is not written into a job; set TINKER_API_KEY "
            "(or name another variable with tinker.api_key_env)"
        )
    for key in raw:
        if key not in SECTION_KEYS:
            raise ConfigError(
                f"config: unknown tinker key '{key}'{did_you_mean(key, SECTION_KEYS)}"
            )
    hints = get_type_hints(Section)
    for key, value in raw.items():
        if value is not None:
            check_value(hints[key], value, f"config tinker.{key}", bounds=_BOUNDS.get(key))
    section = Section(**{k: v for k, v in raw.items() if v is not None})
    if section.loss_fn not in RL_LOSSES:
        raise ConfigError(
            f"config tinker.loss_fn: '{section.loss_fn}' is not a GRPO loss of the service; "
            f"use one of {', '.join(RL_LOSSES)}{did_you_mean(section.loss_fn, RL_LOSSES)}"
        )
    return section


def resolve(
    config: TrainConfig, section: Section, temperature: float | None, given: Any = None
) -> TinkerJob:
    """The job's common keys and section as one :class:`TinkerJob`, each common key the
    service cannot honour refused by name.

    :param temperature: the agent's ``llm_temperature``, when it sets one.
    :param given: the job's config as written (a mapping, or a file's path): ``lora: null``
        there asks for full fine-tuning, which the service does not do. A job that leaves
        ``lora`` out trains the service's LoRA adapter.
    """
    if isinstance(given, dict) and "lora" in given and given["lora"] is None:
        raise ConfigError(
            "config lora: null asks for full fine-tuning; a Tinker service trains LoRA "
            "adapters only: give lora: {rank: N} or leave lora out"
        )
    algorithm = config.algorithm
    if algorithm not in ALGORITHMS:
        raise ConfigError(
            f"config algorithm: the tinker engine trains {' and '.join(ALGORITHMS)}, "
            f"not '{algorithm}'"
        )
    refuse_grpo_only(algorithm, vars(config), "tinker")
    _refuse_unsupported(config)
    rank = _lora_rank(config, section)
    base_model = section.base_model or config.model
    if not base_model:
        raise ConfigError("config: name the model to train in `model` or tinker.base_model")
    generations, batch_size = _group_sizes(config)
    job = TinkerJob(
        algorithm=algorithm,
        base_url=section.base_url or os.environ.get(DEFAULT_BASE_URL_ENV) or None,
        base_model=str(base_model),
        api_key_env=section.api_key_env,
        lora_rank=rank,
        loss_fn=section.loss_fn if algorithm == "grpo" else "cross_entropy",
        loss_aggregation=config.loss_aggregation or "token-mean",
        learning_rate=config.learning_rate or 1e-4,
        max_steps=config.max_steps,
        num_epochs=config.num_epochs or 1.0,
        batch_size=batch_size,
        num_generations=generations if algorithm == "grpo" else 1,
        max_completion_length=config.max_completion_length or 256,
        temperature=section.temperature or temperature or 1.0,
        scale_rewards=section.scale_rewards,
        lr_scheduler=config.lr_scheduler or "constant",
        warmup_ratio=config.warmup_ratio or 0.0,
        seed=config.seed,
        logging_steps=config.logging_steps or 1,
        save_steps=config.save_steps,
        log_samples=config.log_samples if config.log_samples is not None else 4,
        request_timeout=section.request_timeout,
        connect_timeout=section.connect_timeout,
        max_lora_rank=section.max_lora_rank,
    )
    return TinkerJob(**{**vars(job), "settings": settings_of(job, config, section)})


def _lora_rank(config: TrainConfig, section: Section) -> int:
    """The adapter's rank: the section's, else the job's ``lora.rank``, else 32; one the
    service takes."""
    lora = config.lora
    rank = section.lora_rank or (lora.rank if lora else 32)
    if lora is not None and section.lora_rank is not None and lora.rank != section.lora_rank:
        raise ConfigError(
            f"config lora.rank: {lora.rank} and tinker.lora_rank: {section.lora_rank} "
            "disagree: set one of them"
        )
    if rank > section.max_lora_rank:
        raise ConfigError(
            f"config lora rank {rank}: the service trains ranks up to {section.max_lora_rank} "
            "(tinker.max_lora_rank); choose a smaller rank"
        )
    return rank


def _group_sizes(config: TrainConfig) -> tuple[int, int]:
    """``num_generations`` and ``batch_size``, the service's defaults where the job sets none."""
    grpo = config.algorithm == "grpo"
    generations = config.num_generations or (8 if grpo else 1)
    batch_size = config.batch_size or (generations * 4 if grpo else 8)
    if grpo and batch_size % generations:
        raise ConfigError(
            f"config batch_size: {batch_size} completions do not split into groups of "
            f"num_generations {generations}; make batch_size a multiple of it"
        )
    return generations, batch_size


def _refuse_unsupported(config: TrainConfig) -> None:
    """The common keys whose meaning the service's API cannot carry out."""
    if config.report_to:
        raise ConfigError(
            "config report_to: the tinker engine logs to metrics.jsonl only; remove report_to"
        )
    if config.kl_coef:
        raise ConfigError(
            f"config kl_coef: {config.kl_coef}: the service's losses have no KL term; "
            "set kl_coef: 0 or leave it out"
        )
    SETTINGS.refuse(config, "tinker")
    lora = config.lora
    if lora is not None and (lora.dropout or lora.target_modules != Lora(rank=1).target_modules):
        raise ConfigError(
            "config lora: the service adapts every linear layer without dropout; keep "
            "lora.dropout 0 and lora.target_modules all-linear"
        )


def settings_of(job: TinkerJob, config: TrainConfig, section: Section) -> list[Setting]:
    """The effective-settings rows: each common setting as the service will use it."""

    given = vars(section)

    def source(name: str) -> str:
        return SETTINGS.source(name, getattr(config, name) if config.is_set(name) else None, given)

    # The service computes in its own dtype; the job's choice is recorded, `auto` read as the
    # service's full precision on this machine's side (fp32).
    precision = "fp32" if config.precision == "auto" else config.precision
    lora = {"rank": job.lora_rank, "alpha": 32.0, "dropout": 0.0, "target_modules": "all-linear"}
    rows = [
        Setting("device", f"tinker service {job.base_url or 'default'}", "base_url",
                job.base_url, source_of(None, given, "base_url")),
        Setting("precision", precision, "", precision, source("precision")),
        Setting("lora", lora, SETTINGS["lora"].key, job.lora_rank, source("lora")),
        Setting("learning_rate", job.learning_rate, "AdamParams.learning_rate",
                job.learning_rate, source("learning_rate")),
        Setting("lr_scheduler", job.lr_scheduler, "", job.lr_scheduler, source("lr_scheduler")),
        Setting("warmup_ratio", job.warmup_ratio, "", job.warmup_ratio, source("warmup_ratio")),
        Setting("kl_coef", 0.0, "", 0.0, source("kl_coef")),
        Setting("report_to", [], "", [], source("report_to")),
    ]  # fmt: skip
    if job.algorithm == "grpo":
        rows += [
            # The service sums its loss over tokens; the advantages are scaled to aggregate.
            Setting("loss_aggregation", job.loss_aggregation, "advantages", "scaled",
                    source("loss_aggregation")),
            Setting("log_samples", job.log_samples, "", job.log_samples, source("log_samples")),
        ]  # fmt: skip
    return rows
