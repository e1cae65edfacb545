"""The dotted overrides of a VeRL job: the engine's defaults, what the earlier checks produced
(the model, data files, the wired reward), the common keys, then the ``verl:`` section, checked
key by key against VeRL's ``ppo_trainer`` config (:mod:`aworld_train_verl.composition`) and
value by value against VeRL's own types (:mod:`aworld_train_verl.schema`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import CHECKPOINTS, ConfigError, did_you_mean
from aworld_train.engine.settings import CommonKeys

from aworld_train_verl.composition import (
    CONFIG_NAME,
    SECTION,
    base_config,
    compose_config,
    flatten,
    known_keys,
    section_of,
)
from aworld_train_verl.declaration import SETTINGS
from aworld_train_verl.device import CPU_OVERRIDES, on_cpu
from aworld_train_verl.gpus import cluster_address, visible_gpus
from aworld_train_verl.schema import check_choice, check_values
from aworld_train_verl.settings import same_target, setting_overrides

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig
    from omegaconf import DictConfig


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


def common_overrides(config: TrainConfig) -> dict[str, Any]:
    """The VeRL keys the engine-neutral config sets."""
    algorithm = config.algorithm.lower()
    if algorithm in NOT_RL:
        raise ConfigError(
            f"config key 'algorithm': the verl engine trains with RL (grpo, ppo or one of VeRL's "
            f"advantage estimators), not '{config.algorithm}'; use the trl or swift engine for it"
        )
    if algorithm not in ALGORITHMS:
        check_choice(algorithm, "algorithm.adv_estimator", "config key 'algorithm'")
    out: dict[str, Any] = {}
    if config.is_set("algorithm") or not configures_critic(flatten(section_of(config))):
        out["algorithm.adv_estimator"] = ALGORITHMS.get(algorithm, algorithm)
    if config.model is not None:
        out.update(model_overrides(config.model))
    for key in TRUST_REMOTE_CODE_KEYS:
        out[key] = config.trust_remote_code
    out.update(SETTINGS.plain_arguments(config))  # the keys VeRL takes as the job sets them
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
        out.update(dict.fromkeys(SETTINGS.own_keys("batch_size"), config.batch_size // generations))
    out["trainer.nnodes"] = config.resources.nnodes
    out["trainer.n_gpus_per_node"] = config.resources.gpus_per_node or max(visible_gpus(), 1)
    return out


def configures_critic(section: Mapping[str, Any]) -> bool:
    """Whether a flattened ``verl:`` section configures VeRL's critic (a value under
    ``critic.``, ``critic.enable: false`` aside): a VeRL PPO config, such as VeRL's own
    quickstart, which leaves ``algorithm.adv_estimator`` to VeRL's default (``gae``, the
    estimator that trains the critic). Such a config keeps VeRL's estimator unless the job sets
    the common ``algorithm`` itself; any other job trains ``grpo`` unless it says otherwise."""
    if section.get("critic.enable", section.get("++critic.enable")) is False:
        return False
    return any(
        key.lstrip("+").startswith("critic.") and value is not None
        for key, value in section.items()
    )


def model_overrides(model: str) -> dict[str, Any]:
    """The policy's model folder, for the actor, its rollout and reference, and the critic (PPO)."""
    return {MODEL_KEY: model, "critic.model.path": model}


def job_overrides(
    config: TrainConfig, run_dir: Path, inputs: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The dotted overrides of a job, and where each key of the ``verl:`` section came from.

    They apply in this order, each winning over the one before: the engine's defaults,
    ``inputs`` (what the earlier checks produced: the model, data files, the wired reward), the
    common keys, what training on the CPU takes (:data:`aworld_train_verl.device.CPU_OVERRIDES`,
    when it does), then the ``verl:`` section, less its nulls for keys the engine sets
    (:func:`_fill_nulls`).

    :raises ConfigError: for an unknown key of the section (with a suggestion), a value VeRL
        would reject (:func:`aworld_train_verl.schema.check_values`), a value that contradicts
        the engine's wiring or a common key of the job, or a model folder's code turned on without the common key
        ``trust_remote_code``.
    """
    name = config.engine or SECTION
    section = flatten(section_of(config))
    origins = {key: f"config key '{name}.{key}'" for key in section}
    base = base_config()
    section, origins = normalise_added(section, origins, base)
    _check_keys(section, origins, base)
    _check_remote_code(section, origins, config)
    settings = setting_overrides(
        config,
        run_dir,
        CommonKeys(name, {key.lstrip("+"): value for key, value in section.items()}),
    )
    engine: dict[str, Any] = {
        **engine_defaults(section),
        "trainer.experiment_name": run_dir.name,
        "trainer.default_local_dir": str(run_dir / CHECKPOINTS),
        # Ray refuses num_cpus when it joins an existing cluster.
        "ray_kwargs.ray_init.num_cpus": None if cluster_address(config) else os.cpu_count() or 1,
        **(inputs or {}),
        **common_overrides(config),
        **settings,
        **(CPU_OVERRIDES if on_cpu(config) else {}),
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
    return {
        key: value
        for key, value in DEFAULTS.items()
        if not (key.endswith(PER_GPU) and key.removesuffix(PER_GPU) in chosen)
    }


def normalise_added(
    section: Mapping[str, Any], origins: Mapping[str, str], base: DictConfig
) -> tuple[dict[str, Any], dict[str, str]]:
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


def _check_keys(section: Mapping[str, Any], origins: Mapping[str, str], base: DictConfig) -> None:
    """Reject keys the composed config lacks, and keys added with ``+`` that it has (as Hydra
    does), naming where each was set."""
    keys = known_keys(base)
    for key, origin in origins.items():
        if key.startswith("+"):
            name = key.lstrip("+")
            if name in keys:  # Hydra: "Could not append to config. An item is already at ..."
                raise ConfigError(
                    f"{origin}: '{name}' is already a key of VeRL's {CONFIG_NAME} config; "
                    f"set it without the '+' (or with '++', which adds or overrides)"
                )
            continue
        if key not in keys:
            parent = key.rsplit(".", 1)[0] if "." in key else ""
            scope = [k for k in keys if k.rsplit(".", 1)[0] == parent] if parent in keys else keys
            raise ConfigError(
                f"{origin}: '{key}' is not a key of VeRL's {CONFIG_NAME} config"
                f"{did_you_mean(key, scope) or did_you_mean(key, keys)}; "
                f"prefix it with '+' to add a new key"
            )


def _check_remote_code(
    section: Mapping[str, Any], origins: Mapping[str, str], config: TrainConfig
) -> None:
    """Code from a model folder runs only when the job says so with the common key."""
    for key in section:
        if (
            key.lstrip("+").endswith("trust_remote_code")
            and section[key] is True
            and not config.trust_remote_code
        ):
            raise ConfigError(
                f"{origins[key]}: VeRL would run code from the model folder; set the config key "
                f"'trust_remote_code: true' instead, if you trust that code"
            )


def _fill_nulls(
    section: Mapping[str, Any], origins: Mapping[str, str], engine: Mapping[str, Any]
) -> dict[str, Any]:
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
        if wired and value is not None and not same_target(value, engine[target]):
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


def preview(
    config: TrainConfig, run_dir: Path, inputs: Mapping[str, Any] | None = None
) -> DictConfig:
    """The job's composed config, for the checks that run before :func:`resolve`; not validated."""
    return compose_config(job_overrides(config, run_dir, inputs)[0])


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
