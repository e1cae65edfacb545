"""The VeRL config of a job: VeRL's own ``ppo_trainer`` config composed with the job's overrides
(:mod:`aworld_train_verl.overrides`), checked by VeRL's own ``validate_config`` and saved for
``main_ppo`` without the job's secrets (:mod:`aworld_train_verl.vault`).

``verl`` itself is imported only for ``validate_config``.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import ConfigError
from aworld_train.engine.settings import check_trackers

from aworld_train_verl.composition import base_config, compose_config, one_line
from aworld_train_verl.device import ENVIRONMENT as CPU_ENVIRONMENT
from aworld_train_verl.device import check_cpu_job, on_cpu
from aworld_train_verl.overrides import job_overrides
from aworld_train_verl.settings import tracker_variables, trackers_of
from aworld_train_verl.vault import Vault

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig
    from omegaconf import DictConfig

SAVED_CONFIG_NAME = "verl_config"

# The largest LoRA rank vLLM serves (VeRL's fallback list when vLLM does not say).
VLLM_MAX_LORA_RANK = 512


@dataclass
class VerlConfig:
    """The resolved VeRL config of a job.

    :ivar config: the composed config.
    :ivar path: where it was saved; ``main_ppo`` reads it with ``--config-path``/``--config-name``.
    :ivar overrides: the dotted overrides it was composed with, in order.
    :ivar environment: the job's secrets, by the environment variable VeRL's processes read
        each from (the saved files reference them, :mod:`aworld_train_verl.vault`).
    :ivar variables: the environment VeRL's processes need that is not secret: where each
        tracker writes inside the run directory, and on the CPU the platform VeRL loads.
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


def resolve(
    config: TrainConfig,
    run_dir: Path,
    inputs: Mapping[str, Any] | None = None,
    vault: Vault | None = None,
) -> VerlConfig:
    """Compose VeRL's config for a job, validate it with VeRL's own code, and save it as
    ``run_dir/verl_config.yaml``, each secret in it replaced by a reference to the environment.

    :param inputs: dotted VeRL keys the earlier checks produced.
    :param vault: the job's secrets so far (a new one when not given); the result carries them.
    :raises ConfigError: for an unknown key (with a suggestion), a value of the wrong type, or
        a config VeRL's own checks reject.
    """
    from omegaconf import OmegaConf

    vault = vault or Vault()
    cpu = on_cpu(config)
    if cpu:
        check_cpu_job(config)
    overrides, origins = job_overrides(config, run_dir, inputs)
    composed = compose_config(overrides)
    _validate(composed, origins)
    trackers = trackers_of(composed)
    check_trackers(trackers)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / f"{SAVED_CONFIG_NAME}.yaml"
    OmegaConf.save(vault.hide_in_config(composed, overrides), path)
    return VerlConfig(
        config=composed,
        path=path,
        overrides=overrides,
        environment=vault.environment,
        variables={**tracker_variables(trackers, run_dir), **(CPU_ENVIRONMENT if cpu else {})},
    )


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
        raise ConfigError(
            "no model: set config key 'model' (or the agent's model) to a model folder"
        )
    validated = _without_vllm_lora_lookup(composed, origins)
    steps = (
        ("algorithm", lambda: omega_conf_to_dataclass(composed.algorithm)),
        (
            "actor_rollout_ref.rollout",
            lambda: omega_conf_to_dataclass(composed.actor_rollout_ref.rollout),
        ),
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
            text = one_line(_root_cause(error))
            raise ConfigError(
                f"{_named_origin(text, origins)}VeRL's {where} rejects the config: {text}"
            ) from error
    _check_model_len(composed, origins)


def _without_vllm_lora_lookup(composed: DictConfig, origins: Mapping[str, str]) -> DictConfig:
    """``composed`` for ``validate_config``: with LoRA and the vLLM rollout, ``validate_config``
    imports vLLM to look up its largest LoRA rank. The rank is checked here first against the
    ranks VeRL falls back to (one message wherever the check runs); where vLLM is not installed
    (a machine that checks, not trains), ``validate_config`` sees the config without LoRA (its
    only LoRA check is that look-up).

    :raises ConfigError: for a rank past vLLM's largest.
    """
    import copy
    import importlib.util

    rank = composed.actor_rollout_ref.model.lora_rank
    if not rank or composed.actor_rollout_ref.rollout.name != "vllm":
        return composed
    if rank > VLLM_MAX_LORA_RANK:
        origin = origins.get("actor_rollout_ref.model.lora_rank", "config key 'lora.rank'")
        raise ConfigError(
            f"{origin}: {rank} is past vLLM's largest LoRA rank, {VLLM_MAX_LORA_RANK}, which VeRL's rollout "
            f"refuses; lower it"
        )
    if importlib.util.find_spec("vllm"):
        return composed
    validated = copy.deepcopy(composed)
    validated.actor_rollout_ref.model.lora_rank = 0
    return validated


def _check_model_len(composed: DictConfig, origins: Mapping[str, str]) -> None:
    """VeRL's rollout server refuses at start-up a ``rollout.max_model_len`` past the model's
    positions (unset, it takes the positions)."""
    from aworld_train.engine.settings import max_positions

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
