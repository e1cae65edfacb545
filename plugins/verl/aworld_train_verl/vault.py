"""Secrets kept out of the files the verl engine writes into a run directory.

VeRL's workers read what they run from files: the agent's tool set and the AWorld agent are
pickled (``agent_tools.pkl``, ``agent.pkl``), unimportable rewards too, and the composed config
is saved as ``verl_config.yaml``. MCP servers' ``env`` and headers, credentials in URLs, the
values of ``--api-key`` arguments or a secret-named key of the ``verl:`` section would otherwise
sit in those files. Each string that holds a secret (by :mod:`aworld_train.run.redaction`'s rules)
is written instead as a reference to an environment variable, ``AWORLD_TRAIN_SECRET_<n>``: in a
pickle as a persistent id that :func:`loads` resolves, in the config as ``${oc.env:NAME}``.
The values reach VeRL's processes only through the environment of ``main_ppo``
(:attr:`Vault.environment`, see :func:`aworld_train_verl.launch.run`), which local Ray workers
inherit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aworld_train.engine.launch import remember_secrets
from aworld_train.engine.runtime import ENV_PREFIX  # noqa: F401 - named here by the docs and tests
from aworld_train.engine.runtime import Secrets, secret_loads

from aworld_train_verl.composition import unflatten

if TYPE_CHECKING:
    from omegaconf import DictConfig


class Vault(Secrets):
    """The secrets of one job, each under the environment variable that carries it: what the
    core's :class:`~aworld_train.engine.Secrets` pickles, and the config's values."""

    def hide(self, value: Any) -> Any:
        """A copy of ``value`` with every string that holds a secret replaced by
        ``${oc.env:NAME}``, which OmegaConf resolves from the environment."""
        if isinstance(value, str):
            name = self.reference(value)
            return value if name is None else f"${{oc.env:{name}}}"
        if isinstance(value, Mapping):
            return {key: self.hide(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.hide(item) for item in value]
        return value

    def hide_in_config(self, composed: DictConfig, overrides: Mapping[str, Any]) -> DictConfig:
        """``composed`` as it is saved: each override that holds a secret (by its value, or by
        its key: ``...env_vars.HF_TOKEN``) as ``${oc.env:NAME}``, which VeRL resolves when it
        starts."""
        import copy

        from omegaconf import OmegaConf

        remember_secrets(unflatten(overrides))
        saved = composed
        for key, value in overrides.items():
            hidden = self.hide(value)
            if hidden != value:
                if saved is composed:
                    saved = copy.deepcopy(composed)
                OmegaConf.update(saved, key.lstrip("+"), hidden, force_add=True)
        return saved


def loads(data: bytes, environment: Mapping[str, str] | None = None) -> Any:
    """Unpickle what :meth:`Vault.dumps` wrote, each secret read from ``environment`` (by
    default this process's).

    :raises TrainingError: when a secret's variable is not set.
    """
    return secret_loads(data, environment, where="when running launch.sh yourself")
