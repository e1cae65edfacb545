"""Secrets kept out of the files the verl engine writes into a run directory.

VeRL's workers read what they run from files: the agent's tool set and the AWorld agent are
pickled (``agent_tools.pkl``, ``agent.pkl``), unimportable rewards too, and the composed config
is saved as ``verl_config.yaml``. MCP servers' ``env`` and headers, credentials in URLs, the
values of ``--api-key`` arguments or a secret-named key of the ``verl:`` section would otherwise
sit in those files. Each string that holds a secret (by :mod:`aworld_train.redaction`'s rules)
is written instead as a reference to an environment variable, ``AWORLD_TRAIN_SECRET_<n>``: in a
pickle as a persistent id that :func:`loads` resolves, in the config as ``${oc.env:NAME}``.
The values reach VeRL's processes only through the environment of ``main_ppo``
(:attr:`Vault.environment`, see :func:`aworld_train_verl.launch.run`), which local Ray workers
inherit.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Mapping
from typing import Any

from aworld_train.engine import TrainingError

ENV_PREFIX = "AWORLD_TRAIN_SECRET_"
_TAG = "aworld-train-secret"


class Vault:
    """The secrets of one job, each under the environment variable that carries it."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    @property
    def environment(self) -> dict[str, str]:
        """What the processes that read the run's files need in their environment."""
        return {name: value for value, name in self._names.items()}

    def reference(self, text: str) -> str | None:
        """The variable that carries ``text`` when ``text`` holds a secret, else ``None``."""
        from aworld_train.engine import redact_text

        if redact_text(text) == text:
            return None
        if text not in self._names:
            self._names[text] = f"{ENV_PREFIX}{len(self._names)}"
        return self._names[text]

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

    def dumps(self, obj: Any, pickler: type | None = None) -> bytes:
        """``obj`` pickled (with cloudpickle, or ``pickler``, a subclass of it), each string
        that holds a secret written as a reference to its variable."""
        import cloudpickle

        vault = self

        class Pickler(pickler or cloudpickle.Pickler):  # type: ignore[misc]
            def persistent_id(self, item: Any) -> Any:
                if type(item) is str:
                    name = vault.reference(item)
                    if name is not None:
                        return (_TAG, name)
                return None

        buffer = io.BytesIO()
        Pickler(buffer).dump(obj)
        return buffer.getvalue()


def loads(data: bytes, environment: Mapping[str, str] | None = None) -> Any:
    """Unpickle what :meth:`Vault.dumps` wrote, each secret read from ``environment`` (by
    default this process's).

    :raises TrainingError: when a secret's variable is not set.
    """
    env = os.environ if environment is None else environment

    class Unpickler(pickle.Unpickler):
        def persistent_load(self, pid: Any) -> Any:
            tag, name = pid
            if tag != _TAG:
                raise pickle.UnpicklingError(f"unknown persistent id {tag!r}")
            if name not in env:
                raise TrainingError(
                    f"{name} is not set: it carries a secret of the job (an MCP server's env or "
                    f"header, a key argument, URL credentials) that aworld-train passes to VeRL's "
                    f"processes; set it when running launch.sh yourself"
                )
            return env[name]

    return Unpickler(io.BytesIO(data)).load()
