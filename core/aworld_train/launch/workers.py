"""Training in worker processes, for engines that launch them (``accelerate``, ``torchrun``).

The parent writes the checked job to a file, starts the launcher with the engine's worker
module (through :func:`aworld_train.launch.launcher.run_process`, which stops every worker however the
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

from aworld_train.errors import RewardError, TrainingCrash, TrainingError
from aworld_train.launch.launcher import run_process

if TYPE_CHECKING:
    from aworld_train.plugins.context import RunContext
    from aworld_train.reward import RewardSpec

# The main worker prints each event on one line starting with this marker.
EVENT_MARKER = "@aworld-train-event "
RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK")
# How long a node waits for the others to join (seconds), and the variable that changes it:
# torch's own default (600 s) leaves a node that waits for a peer that never starts idle for ten
# minutes.
JOIN_TIMEOUT_VARIABLE = "AWORLD_TRAIN_JOIN_TIMEOUT"
DEFAULT_JOIN_TIMEOUT_S = 300


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
        references.append(
            {
                "name": function.name,
                "ref": function.ref,
                "weight": function.weight,
                "engine": function.engine,
            }
        )
    return references


def load_rewards(references: list[dict[str, Any]]) -> RewardSpec:
    """Worker side: import the rewards :func:`reward_references` listed."""
    from aworld_train.job.references import import_object
    from aworld_train.reward import RewardFunction, RewardSpec, engine_reward

    # An engine's own reward (swift:accuracy) is a name in the engine's registry, not an import.
    return RewardSpec(
        [
            engine_reward(r["engine"], r["name"], r["weight"])
            if r.get("engine")
            else RewardFunction(
                r["name"], import_object(r["ref"], RewardError, "reward"), r["weight"], r["ref"]
            )
            for r in references
        ]
    )


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


def join_timeout() -> int:
    """The seconds a node of several waits at the rendezvous for the others
    (``AWORLD_TRAIN_JOIN_TIMEOUT``, default :data:`DEFAULT_JOIN_TIMEOUT_S`): what torchrun and
    accelerate get as ``--rdzv_conf timeout=N``.

    :raises TrainingError: when the variable is not a whole number of seconds above 0.
    """
    value = os.environ.get(JOIN_TIMEOUT_VARIABLE, "").strip()
    if not value:
        return DEFAULT_JOIN_TIMEOUT_S
    if not value.isdigit() or int(value) < 1:
        raise TrainingError(
            f"{JOIN_TIMEOUT_VARIABLE} is {value!r}: give the seconds a node "
            "waits for the others to join, a whole number above 0"
        )
    return int(value)


def node_failure(log_path: Path, nnodes: int) -> str | None:
    """What ended a job on ``nnodes`` nodes, read from this node's launcher log, when it was
    another node: one that never joined (the rendezvous timed out) or one that left while
    training (the connection to it closed). ``None`` for any other failure."""
    if nnodes < 2 or not log_path.is_file():
        return None
    text = log_path.read_text(encoding="utf-8", errors="replace")
    address = f"{os.environ.get('MASTER_ADDR', '?')}:{os.environ.get('MASTER_PORT', '?')}"
    if any(sign in text for sign in _NEVER_JOINED):
        return (
            f"the {nnodes} nodes did not all join at {address} within {join_timeout()} s "
            f"({JOIN_TIMEOUT_VARIABLE}): start every node with the same MASTER_ADDR and "
            f"MASTER_PORT and its own NODE_RANK from 0 to {nnodes - 1} (full output in "
            f"{log_path})"
        )
    if any(sign in text for sign in _PEER_LEFT):
        return (
            f"another node of the {nnodes} stopped while training (the connection to it "
            f"closed); see that node's output (full output in {log_path})"
        )
    return None


# What torch prints when a node waited for the others in vain (the main node's store, or a
# node that could not reach it), and when a node it trains with went away.
_NEVER_JOINED = ("waiting for clients", "The client socket has timed out", "RendezvousTimeoutError")
_PEER_LEFT = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


def run_workers(
    command: list[str],
    ctx: RunContext,
    log_path: Path,
    what: str,
    env: dict[str, str] | None = None,
    nnodes: int = 1,
) -> dict[str, Any]:
    """Run the launcher ``command`` through :func:`~aworld_train.launch.launcher.run_process`, forward
    the main worker's events to ``ctx.metrics``; every line goes to ``log_path``. Returns the
    final metrics.

    :param what: what was launched, for the error (``"accelerate launch of 2 trl processes"``).
    :param nnodes: the nodes the job trains on; with several, a failure caused by another node
        (:func:`node_failure`) is named as such rather than by the library's own line.
    :raises TrainingError: when the launcher exits non-zero, with its last error line.
    :raises KeyboardInterrupt: after SIGINT or SIGTERM was forwarded and the workers stopped.
    """
    final: dict[str, Any] = {}

    def forward(line: str) -> None:
        if not line.startswith(EVENT_MARKER):
            return
        event = json.loads(line[len(EVENT_MARKER) :])
        if event["event"] == "start":
            ctx.metrics.start(event["total"], completed=event["done"])
        elif event["event"] == "log":
            ctx.metrics.log(event["step"], event["metrics"])
        elif event["event"] == "done":
            final.update(event["metrics"])

    try:
        run_process(command, what=what, log_path=log_path, on_line=forward, env=env)
    except TrainingCrash as crash:
        cause = node_failure(log_path, nnodes)
        if cause is None:
            raise
        raise TrainingError(f"{what} failed: {cause}") from crash
    return final
