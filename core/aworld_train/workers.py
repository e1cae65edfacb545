"""Training in worker processes, for engines that launch them (``accelerate``, ``torchrun``).

The parent writes the checked job to a file, starts the launcher with the engine's worker
module (through :func:`aworld_train.launcher.run_process`, which stops every worker however the
run ends), and forwards the metrics events the main worker prints — one marked JSON line each —
to the run's metrics reporter. Rewards reach the workers as importable references.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import RewardError, TrainingError
from aworld_train.launcher import run_process

if TYPE_CHECKING:
    from aworld_train.context import RunContext
    from aworld_train.reward import RewardSpec

# The main worker prints each event on one line starting with this marker.
EVENT_MARKER = "@aworld-train-event "
RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK")


@contextlib.contextmanager
def scoped_environment(variables: Mapping[str, str | None]) -> Iterator[None]:
    """Set ``variables`` in this process's environment for the block (``None`` unsets one),
    then restore what was there: how secrets reach an engine without entering its arguments,
    which engines pickle into checkpoints."""
    saved = {name: os.environ.get(name) for name in variables}

    def apply(values: Mapping[str, str | None]) -> None:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    apply(variables)
    try:
        yield
    finally:
        apply(saved)


def emit(event: str, **fields: Any) -> None:
    """Worker side: print one event (``start`` with ``total``/``done``, ``log`` with ``step``/
    ``metrics``, ``done`` with ``metrics``) for the parent to forward."""
    print(EVENT_MARKER + json.dumps({"event": event, **fields}, default=float), flush=True)


def finish_distributed() -> None:
    """Worker side, last: wait for every process, then close the process group. A process that
    exits with the group still open can abort ("terminate called without an active
    exception"), which fails the whole launch."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def reward_references(spec: RewardSpec) -> list[dict[str, Any]]:
    """The rewards as ``{name, ref, weight}`` that another process can import.

    :raises TrainingError: for a reward that is not importable (a lambda, a closure).
    """
    references = []
    for function in spec.functions:
        if function.ref is None:
            raise TrainingError(
                f"reward '{function.name}' is not importable by other processes: give it as "
                "path/to/file.py:function or package.module:function to train with several "
                "processes"
            )
        references.append({"name": function.name, "ref": function.ref, "weight": function.weight,
                           "engine": function.engine})
    return references


def load_rewards(references: list[dict[str, Any]]) -> RewardSpec:
    """Worker side: import the rewards :func:`reward_references` listed."""
    from aworld_train.references import import_object
    from aworld_train.reward import RewardFunction, RewardSpec, engine_reward

    # An engine's own reward (swift:accuracy) is a name in the engine's registry, not an import.
    return RewardSpec([
        engine_reward(r["engine"], r["name"], r["weight"]) if r.get("engine") else
        RewardFunction(r["name"], import_object(r["ref"], RewardError, "reward"), r["weight"], r["ref"])
        for r in references
    ])


def rendezvous(nnodes: int) -> dict[str, str]:
    """The main node's address and port and this node's rank, needed when ``nnodes > 1``.

    :raises TrainingError: naming the variables that are not set.
    """
    missing = [name for name in RENDEZVOUS if not os.environ.get(name)]
    if missing:
        raise TrainingError(
            f"resources.nnodes is {nnodes}: set {', '.join(missing)} on every node "
            "(the main node's address and port, and this node's rank from 0)"
        )
    return {name: os.environ[name] for name in RENDEZVOUS}


def run_workers(
    command: list[str],
    ctx: RunContext,
    log_path: Path,
    what: str,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run the launcher ``command`` through :func:`~aworld_train.launcher.run_process`, forward
    the main worker's events to ``ctx.metrics``; every line goes to ``log_path``. Returns the
    final metrics.

    :param what: what was launched, for the error (``"accelerate launch of 2 trl processes"``).
    :raises TrainingError: when the launcher exits non-zero, with its last error line.
    :raises KeyboardInterrupt: after SIGINT or SIGTERM was forwarded and the workers stopped.
    """
    final: dict[str, Any] = {}

    def forward(line: str) -> None:
        if not line.startswith(EVENT_MARKER):
            return
        event = json.loads(line[len(EVENT_MARKER):])
        if event["event"] == "start":
            ctx.metrics.start(event["total"], completed=event["done"])
        elif event["event"] == "log":
            ctx.metrics.log(event["step"], event["metrics"])
        elif event["event"] == "done":
            final.update(event["metrics"])

    run_process(command, what=what, log_path=log_path, on_line=forward, env=env)
    return final
