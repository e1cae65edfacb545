"""A Ray cluster checked before launch: with ``resources.ray_address`` (or ``RAY_ADDRESS``),
``check`` asks the cluster what its nodes hold and refuses, in one line, a job that cannot fit,
instead of VeRL waiting for placement groups that never come.

What VeRL asks of a cluster: ``trainer.nnodes`` nodes, each with ``trainer.n_gpus_per_node``
GPUs in one placement group whose bundles hold one GPU and :data:`CPUS_PER_GPU` CPUs each (its
``ResourcePoolManager``'s ``max_colocate_count``), plus the CPUs its other actors hold for the
whole run (:func:`~aworld_train_verl.launch.ray_cpus_held`) anywhere in the cluster.

The cluster is asked in a child process with a hard deadline: an address where nothing answers
is refused after a TCP probe of :data:`PROBE_TIMEOUT_S`, and Ray's own client, which retries a
silent GCS for about 40 s, is never waited for longer than :data:`QUERY_TIMEOUT_S`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from aworld_train.engine import ConfigError
from aworld_train.engine.launch import redact_text

PROBE_TIMEOUT_S = 3.0
QUERY_TIMEOUT_S = 20.0
# VeRL's ResourcePoolManager bundles each GPU with this many CPUs (max_colocate_count, 0.9.1).
CPUS_PER_GPU = 3
# Ports Ray listens on when an address names none: the GCS, and the Ray Client server.
_GCS_PORT = 6379
_CLIENT_PORT = 10001

# Run in the child: the alive nodes' total resources as one JSON line. A GCS address is read
# through the GCS client alone (no driver, no local raylet needed); ray:// through Ray Client.
_QUERY = r"""
import json, sys
address = sys.argv[1]
if address.startswith("ray://"):
    import ray
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    ray.shutdown()
else:
    from ray._raylet import GcsClient
    if address == "auto":
        from ray._private.services import canonicalize_bootstrap_address_or_die
        address = canonicalize_bootstrap_address_or_die("auto")
    infos = GcsClient(address=address).get_all_node_info(timeout=10)
    nodes = [dict(info.resources_total) for info in infos.values() if info.state == 0]
print(json.dumps(nodes))
"""


@dataclass(frozen=True)
class Demand:
    """What the job asks of the cluster."""

    nnodes: int
    gpus_per_node: int
    cpus_held: int  # by actors outside the GPU bundles, anywhere in the cluster

    @property
    def gpus(self) -> int:
        return self.nnodes * self.gpus_per_node

    @property
    def cpus_per_node(self) -> int:
        return self.gpus_per_node * CPUS_PER_GPU

    @property
    def cpus(self) -> int:
        return self.nnodes * self.cpus_per_node + self.cpus_held


@dataclass(frozen=True)
class ClusterNode:
    """What one alive node of the cluster holds."""

    gpus: float
    cpus: float


def address_of(composed: Any) -> str | None:
    """The cluster main_ppo joins: ``ray_kwargs.ray_init.address``, else ``RAY_ADDRESS``."""
    return composed.ray_kwargs.ray_init.get("address") or os.environ.get("RAY_ADDRESS") or None


def demand_of(composed: Any) -> Demand:
    """What the composed VeRL config asks of a cluster."""
    from aworld_train_verl.launch import ray_cpus_held

    return Demand(
        nnodes=int(composed.trainer.nnodes),
        gpus_per_node=int(composed.trainer.n_gpus_per_node),
        cpus_held=ray_cpus_held(composed),
    )


def check_cluster(composed: Any) -> str | None:
    """Ask the job's Ray cluster, if it names one, whether the job fits; the summary when it
    does, ``None`` when the job starts a Ray of its own.

    :raises ConfigError: in one line, when the cluster does not answer or cannot hold the job.
    """
    address = address_of(composed)
    if address is None:
        return None
    demand = demand_of(composed)
    cluster = query_nodes(address)
    missing = shortfall(cluster, demand)
    shown = redact_text(address)  # an address may carry credentials: ray://user:pass@head
    if missing is not None:
        raise ConfigError(
            f"the Ray cluster at {shown} cannot hold this job: {missing}; set "
            "resources.gpus_per_node and resources.nnodes to what it holds, or "
            "add nodes to it"
        )
    return (
        f"Ray cluster at {shown}: {describe(cluster)}; the job takes {demand.gpus} "
        f"GPU(s) on {demand.nnodes} node(s) and {demand.cpus} CPU(s)"
    )


def query_nodes(address: str) -> list[ClusterNode]:
    """What each alive node of the cluster at ``address`` holds.

    :raises ConfigError: when nothing answers at the address within :data:`PROBE_TIMEOUT_S`,
        the cluster does not answer within :data:`QUERY_TIMEOUT_S`, or it asks for a token
        the environment does not send.
    """
    where = endpoint(address)
    shown = redact_text(address)  # an address may carry credentials: ray://user:pass@head
    if where is not None and not reachable(*where):
        raise ConfigError(
            f"the Ray cluster at {shown} does not answer: nothing accepted a "
            f"connection at {where[0]}:{where[1]} within {PROBE_TIMEOUT_S:g} s; "
            "start it, or fix resources.ray_address / RAY_ADDRESS"
        )
    try:
        done = subprocess.run(
            [sys.executable, "-c", _QUERY, address],
            capture_output=True,
            text=True,
            timeout=QUERY_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"the Ray cluster at {shown} does not answer within "
            f"{QUERY_TIMEOUT_S:g} s; check that it is a running Ray head "
            "(resources.ray_address / RAY_ADDRESS)"
        ) from None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 and "AuthenticationError" in done.stderr:
        # Ray sends a token to an address it is given only when RAY_AUTH_MODE=token, and
        # VeRL's own ray.init would be refused the same way.
        raise ConfigError(
            f"the Ray cluster at {shown} asks for an authentication token: set "
            "RAY_AUTH_MODE=token, with the cluster's token in RAY_AUTH_TOKEN, "
            "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"
        )
    if done.returncode != 0 or not lines:
        reason = next(
            (line for line in reversed(done.stderr.splitlines()) if line.strip()),
            f"exit status {done.returncode}",
        )
        raise ConfigError(
            f"could not ask the Ray cluster at {shown} what it holds: {redact_text(reason.strip())}"
        )
    return [
        ClusterNode(gpus=float(node.get("GPU", 0)), cpus=float(node.get("CPU", 0)))
        for node in json.loads(lines[-1])
    ]


def endpoint(address: str) -> tuple[str, int] | None:
    """The host and port a TCP probe tries for ``address`` (``host:port``, ``ray://host:port``),
    or ``None`` for an address only Ray resolves (``auto``)."""
    rest, default = (
        (address[len("ray://") :], _CLIENT_PORT)
        if address.startswith("ray://")
        else (address, _GCS_PORT)
    )
    rest = rest.rpartition("@")[2]  # user:password@ is not part of where to connect
    if rest in ("auto", "local", ""):
        return None
    host, _, port = rest.rpartition(":") if ":" in rest else (rest, "", "")
    return host.strip("[]"), int(port) if port.isdigit() else default


def reachable(host: str, port: int) -> bool:
    """Whether something accepts a TCP connection at ``host:port`` within
    :data:`PROBE_TIMEOUT_S`."""
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def shortfall(cluster: list[ClusterNode], demand: Demand) -> str | None:
    """What the cluster lacks for ``demand``, as the middle of the refusal; ``None`` when the
    job fits."""
    total_gpus = sum(node.gpus for node in cluster)
    holds = f"it holds {describe(cluster)}"
    if total_gpus < demand.gpus:
        return (
            f"the job asks for {demand.gpus} GPU(s) (n_gpus_per_node {demand.gpus_per_node} "
            f"x nnodes {demand.nnodes}), {holds}"
        )
    fitting = [
        node
        for node in cluster
        if node.gpus >= demand.gpus_per_node and node.cpus >= demand.cpus_per_node
    ]
    if len(fitting) < demand.nnodes:
        return (
            f"the job asks for {demand.nnodes} node(s) with {demand.gpus_per_node} GPU(s) and "
            f"{demand.cpus_per_node} CPU(s) each ({CPUS_PER_GPU} per GPU for VeRL's workers), "
            f"{len(fitting)} of its nodes hold that ({holds})"
        )
    total_cpus = sum(node.cpus for node in cluster)
    if total_cpus < demand.cpus:
        return (
            f"the job asks for {demand.cpus} CPU(s) ({CPUS_PER_GPU} per GPU and "
            f"{demand.cpus_held} for VeRL's other actors), {holds}"
        )
    return None


def describe(cluster: list[ClusterNode]) -> str:
    """``2 node(s): 2 GPU 8 CPU, 0 GPU 4 CPU``."""
    if not cluster:
        return "no alive node"
    shown = ", ".join(f"{node.gpus:g} GPU {node.cpus:g} CPU" for node in cluster)
    return f"{len(cluster)} node(s): {shown}"
