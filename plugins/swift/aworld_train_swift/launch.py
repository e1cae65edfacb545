"""Several training processes through torchrun, as ``swift sft`` launches them.

ms-swift's CLI re-executes itself under ``torchrun`` when ``NPROC_PER_NODE`` or ``NNODES`` is
set. Here the parent writes the checked job into the run directory (swift's arguments and
importable reward references), runs :mod:`aworld_train_swift.worker` under torchrun with those
variables set, and forwards the metrics the main worker prints to the run's metrics reporter.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine.launch import join_timeout, rendezvous, reward_references, run_workers

from aworld_train_swift.callbacks import scores_test_set

if TYPE_CHECKING:
    from aworld_train.engine import RunContext
    from aworld_train.engine.runtime import Secrets

    from aworld_train_swift.agent import SwiftAgent
    from aworld_train_swift.config import SwiftConfig
    from aworld_train_swift.reward import SwiftReward

JOB_FILE = "swift_job.json"
# The agent the runtime runs and its tools, pickled for every worker (its secrets left out).
AGENT_FILE = "swift_agent.pkl"
WORKER_LOG = "swift_workers.log"
# torchrun's flag for each variable of the nodes' rendezvous.
_RENDEZVOUS_FLAGS = {
    "NODE_RANK": "--node_rank",
    "MASTER_ADDR": "--master_addr",
    "MASTER_PORT": "--master_port",
}


def launch(
    ctx: RunContext,
    checkpoint: Path | None,
    environment: dict[str, str],
    *,
    config: SwiftConfig,
    reward: SwiftReward | None,
    agent: SwiftAgent | None = None,
) -> dict[str, Any]:
    """Run the checked job in ``nproc_per_node x nnodes`` processes and wait for them.

    :param environment: environment variables for the workers: credentials (the job file the
        workers read holds none) and where the trackers keep their files.
    :raises TrainingError: when a reward cannot be imported by other processes, the nodes'
        rendezvous is not configured, or a worker fails.
    """
    from aworld_train.engine.runtime import Secrets

    secrets = Secrets()  # the secrets of the agent the runtime runs
    job_file = write_job(
        ctx.run_dir, checkpoint, config=config, reward=reward, agent=agent, secrets=secrets
    )
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *torchrun_args(config),
        "-m",
        "aworld_train_swift.worker",
        str(job_file),
    ]
    env = dict(
        os.environ,
        **environment,
        **secrets.environment,
        NPROC_PER_NODE=str(config.nproc_per_node),
        NNODES=str(config.nnodes),
    )
    total = config.world_size
    return run_workers(
        command,
        ctx,
        ctx.run_dir / WORKER_LOG,
        env=env,
        nnodes=config.nnodes,
        what=f"torchrun of {total} swift processes",
    )


def write_job(
    run_dir: Path,
    checkpoint: Path | None,
    *,
    config: SwiftConfig,
    reward: SwiftReward | None,
    agent: SwiftAgent | None = None,
    secrets: Secrets | None = None,
) -> Path:
    """Write what every worker needs into ``run_dir`` and return the job file: the rewards
    for GRPO, and for SFT or DPO where rank 0 scores the test set with them. An agent the
    runtime runs goes, with its tools, to :data:`AGENT_FILE`
    (:func:`~aworld_train.engine.ship_agent`): each worker runs the episodes of its own
    prompts and opens its own MCP sessions; its secrets go into ``secrets``."""
    rewards = []
    if reward is not None and (config.algorithm == "grpo" or scores_test_set(config, reward)):
        references = reward_references(reward.spec)
        rewards = [dict(ref, orm=name) for ref, name in zip(references, reward.names)]
    agent_file = None
    if agent is not None and agent.runtime is not None:
        from aworld_train.engine.runtime import Secrets, ship_agent

        agent_file = ship_agent(
            agent.runtime,
            agent.tools,
            run_dir / AGENT_FILE,
            secrets if secrets is not None else Secrets(),
        )
    job = {
        "config": dataclasses.asdict(config),
        "agent_file": str(agent_file) if agent_file is not None else None,
        "rewards": rewards,
        "checkpoint": str(checkpoint) if checkpoint is not None else None,
    }
    job_file = run_dir / JOB_FILE
    job_file.write_text(json.dumps(job, indent=2), encoding="utf-8")
    return job_file


def torchrun_args(config: SwiftConfig) -> list[str]:
    """torchrun's arguments for ``config``; several nodes rendezvous at ``MASTER_ADDR``."""
    args = ["--nproc_per_node", str(config.nproc_per_node), "--nnodes", str(config.nnodes)]
    if config.nnodes == 1:
        return [*args, "--standalone"]
    for variable, value in rendezvous(config.nnodes).items():
        args += [_RENDEZVOUS_FLAGS[variable], value]
    # A node waits this long for the others, then fails (torch's default is 600 s).
    return [*args, "--rdzv_conf", f"timeout={join_timeout()}"]
