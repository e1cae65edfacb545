"""An agent and its tools sent to an engine's other training processes, its secrets kept out of
the file.

Each process of a job trained by several runs its own episodes for its share of the prompts,
so each needs the agent (the spec form's prompt, a Python agent's ``run``, an AWorld agent) and
its tool set, from which it opens its own MCP sessions. They are pickled with cloudpickle into
the run directory: Python tools as their references, the functions of files the job named
(``my_agent.py:run``) by value, since another process cannot import them under the name this
one gave them, and an AWorld agent's sandbox as its settings
(:func:`~aworld_train.runtime.agents.aworld_pickler`). Every string that holds a secret (by
:mod:`aworld_train.run.redaction`'s rules: an MCP server's ``env`` or headers, an API key) is
written as a reference to an environment variable, ``AWORLD_TRAIN_SECRET_<n>``; the processes
get the values through their environment (:attr:`Secrets.environment`).
"""

from __future__ import annotations

import io
import os
import pickle
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import AgentError, ConfigError, TrainingError

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec
    from aworld_train.tools import ToolSet

ENV_PREFIX = "AWORLD_TRAIN_SECRET_"
_TAG = "aworld-train-secret"
# The module names aworld_train.job.references gives the files a job names.
_USER_MODULES = "aworld_train_user_"


class Secrets:
    """The secrets of what one job ships, each under the environment variable that carries
    it."""

    def __init__(self) -> None:
        self._names: dict[str, str] = {}

    @property
    def environment(self) -> dict[str, str]:
        """What the processes that read the shipped files need in their environment."""
        return {name: value for value, name in self._names.items()}

    def reference(self, text: str) -> str | None:
        """The variable that carries ``text`` when it holds a secret, else ``None``."""
        from aworld_train.run.redaction import redact_text

        if redact_text(text) == text:
            return None
        return self._names.setdefault(text, f"{ENV_PREFIX}{len(self._names)}")

    def dumps(self, obj: Any, pickler: type | None = None) -> bytes:
        """``obj`` pickled with cloudpickle (or ``pickler``, a subclass of it), each string
        that holds a secret written as a reference to its variable."""
        import cloudpickle

        secrets = self

        class Pickler(pickler or cloudpickle.Pickler):  # type: ignore[misc]
            def persistent_id(self, item: Any) -> Any:
                if type(item) is str:
                    name = secrets.reference(item)
                    if name is not None:
                        return (_TAG, name)
                return None

        buffer = io.BytesIO()
        Pickler(buffer).dump(obj)
        return buffer.getvalue()


def secret_loads(data: bytes, environment: Mapping[str, str] | None = None, where: str = "") -> Any:
    """Unpickle what :meth:`Secrets.dumps` wrote, each secret read from ``environment`` (by
    default this process's).

    :param where: how the processes are started, for the error (``when running launch.sh
        yourself``).
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
                    f"header, a key argument, URL credentials) that aworld-train passes to the "
                    f"training processes{'; set it ' + where if where else ''}"
                )
            return env[name]

    return Unpickler(io.BytesIO(data)).load()


@dataclass
class Shipped:
    """What one training process runs episodes with."""

    agent: AgentSpec
    tools: ToolSet | None


def ship_agent(agent: AgentSpec, tools: ToolSet | None, path: Path, secrets: Secrets) -> Path:
    """Write ``agent`` and ``tools`` to ``path`` (readable by the owner only) for the job's
    other processes; returns ``path``.

    :raises AgentError: when they cannot be pickled for another process.
    """
    import cloudpickle

    folders = []
    for name, module in list(sys.modules.items()):
        if name.startswith(_USER_MODULES) and getattr(module, "__file__", None):
            cloudpickle.register_pickle_by_value(module)
            folders.append(str(Path(str(module.__file__)).parent))
    pickler = None
    if agent.form == "aworld":
        from aworld_train.runtime.agents import aworld_pickler

        pickler = aworld_pickler(cloudpickle.Pickler)
    try:
        payload = secrets.dumps(Shipped(agent, tools), pickler)
    except Exception as error:  # noqa: BLE001 - pickling fails in many ways
        raise AgentError(
            f"agent '{agent.name}' cannot be sent to the job's other training processes: "
            f"{error}; give it and its Python tools as 'file.py:function' references"
        ) from error
    path.touch(mode=0o600)
    # The folders first: the functions shipped by value import the modules beside them.
    path.write_bytes(pickle.dumps((folders, payload)))
    return path


def unship_agent(path: Path) -> Shipped:
    """What :func:`ship_agent` wrote, its secrets from this process's environment; the job's
    folders go on ``sys.path`` (last, as the checks left them)."""
    folders, payload = pickle.loads(path.read_bytes())
    for folder in folders:
        if folder not in sys.path:
            sys.path.append(folder)
    shipped = secret_loads(payload)
    if not isinstance(shipped, Shipped):
        raise TrainingError(f"{path} holds a {type(shipped).__name__}, not a shipped agent")
    return shipped


def refuse_sharded_episodes(
    agent: str, section: str, fsdp: Any, deepspeed: Any, processes: int
) -> None:
    """Refuse an agent the runtime runs in several processes whose weights are sharded over
    them (FSDP, DeepSpeed ZeRO-3): each process generates for its own episodes, as many model
    calls as they need, and each call would gather the weights from every process at once, so
    the processes would wait on each other for ever.

    :param section: the engine's config section (``trl``), naming the key.
    :param fsdp: the ``fsdp`` argument; ``deepspeed``: the DeepSpeed config (a dict or a file).
    :raises ConfigError: naming the key.
    """
    from aworld_train.model.memory import trainer_sharding

    stage, _ = trainer_sharding(None, deepspeed)
    if processes <= 1 or not (fsdp or stage >= 3):
        return
    key, what = ("fsdp", "FSDP") if fsdp else ("deepspeed", "DeepSpeed ZeRO-3")
    raise ConfigError(
        f"config {section}.{key}: agent '{agent}' runs its episodes in each of the {processes} "
        f"processes, each making the model calls its own episodes need, which weights sharded "
        f"over the processes ({what}) cannot answer (every call gathers them from all of them "
        f"at once): use DDP or ZeRO stage 1 or 2, or one process"
    )
