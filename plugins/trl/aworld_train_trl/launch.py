"""Several training processes through ``accelerate launch``, TRL's own distributed path.

The parent writes the checked job into the run directory (converted datasets, TRL arguments,
importable reward references), launches :mod:`aworld_train_trl.worker` in every process, and
forwards the metrics the main worker prints to the run's metrics reporter.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine.launch import (
    join_timeout,
    rendezvous,
    reward_references,
    run_workers,
    scoped_environment,
)

if TYPE_CHECKING:
    from aworld_train.engine import RunContext, ToolSet
    from aworld_train.engine.runtime import Secrets

    from aworld_train_trl.agent import TrlAgent
    from aworld_train_trl.config import TrlConfig
    from aworld_train_trl.dataset import TrlDatasets
    from aworld_train_trl.reward import TrlReward

JOB_FILE = "trl_job.json"
# The agent the runtime runs and its tools, pickled for every worker (its secrets left out).
AGENT_FILE = "trl_agent.pkl"
WORKER_LOG = "trl_workers.log"
# accelerate launch's flag for each variable of the nodes' rendezvous.
_RENDEZVOUS_FLAGS = {
    "NODE_RANK": "--machine_rank",
    "MASTER_ADDR": "--main_process_ip",
    "MASTER_PORT": "--main_process_port",
}


def launch(
    ctx: RunContext,
    checkpoint: Path | None,
    *,
    agent: TrlAgent,
    data: TrlDatasets,
    reward: TrlReward | None,
    config: TrlConfig,
) -> dict[str, Any]:
    """Run the checked job in ``config.nproc_per_node x config.nnodes`` processes and wait for
    them.

    :raises TrainingError: when a reward cannot be imported by other processes, the nodes'
        rendezvous is not configured, or a worker fails.
    """
    from aworld_train.engine.runtime import Secrets

    secrets = Secrets()
    job_file = write_job(
        ctx.run_dir,
        checkpoint,
        agent=agent,
        data=data,
        reward=reward,
        config=config,
        tools=ctx.tools,
        secrets=secrets,
    )
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        *_launcher_args(config),
        "-m",
        "aworld_train_trl.worker",
        str(job_file),
    ]
    total = config.world_size
    with scoped_environment(secrets.environment):  # the shipped agent's secrets
        return run_workers(
            command,
            ctx,
            ctx.run_dir / WORKER_LOG,
            nnodes=config.nnodes,
            what=f"accelerate launch of {total} trl processes",
        )


def write_job(
    run_dir: Path,
    checkpoint: Path | None,
    *,
    agent: TrlAgent,
    data: TrlDatasets,
    reward: TrlReward | None,
    config: TrlConfig,
    tools: ToolSet | None = None,
    secrets: Secrets | None = None,
) -> Path:
    """Write what every worker needs into ``run_dir`` and return the job file.

    The file holds no credential: :func:`~aworld_train_trl.training.run_training` sets them in
    the environment the launcher and its workers inherit. SFT's canonical test rows go beside
    the converted datasets, so that rank 0 scores them with the reward at each evaluation. An
    agent the runtime runs goes, with its tools, to :data:`AGENT_FILE`
    (:func:`~aworld_train.engine.ship_agent`): each worker runs the episodes of its own
    prompts and opens its own MCP sessions; its secrets go into ``secrets``.
    """
    rewards = reward_references(reward.spec) if reward is not None else []
    fields = dataclasses.asdict(config)
    # Credentials reach the workers through the environment they inherit, not through this file;
    # the settings table is the parent's report.
    del fields["secret_env"], fields["settings"]
    data_dir = run_dir / "trl_data"
    data.train.save_to_disk(str(data_dir / "train"))
    if data.test is not None:
        data.test.save_to_disk(str(data_dir / "test"))
    if data.test_rows is not None:
        data.test_rows.save_to_disk(str(data_dir / "test_rows"))
    agent_file = None
    if agent.episodes is not None:
        from aworld_train.engine.runtime import Secrets, ship_agent

        agent_file = ship_agent(
            agent.episodes,
            tools,
            run_dir / AGENT_FILE,
            secrets if secrets is not None else Secrets(),
        )
    job = {
        "run_dir": str(run_dir),
        "agent": dataclasses.asdict(dataclasses.replace(agent, episodes=None)),
        "agent_file": str(agent_file) if agent_file is not None else None,
        "config": fields,
        "rewards": rewards,
        "train": str(data_dir / "train"),
        "test": str(data_dir / "test") if data.test is not None else None,
        "test_rows": str(data_dir / "test_rows") if data.test_rows is not None else None,
        "checkpoint": str(checkpoint) if checkpoint is not None else None,
    }
    job_file = run_dir / JOB_FILE
    job_file.write_text(json.dumps(job, indent=2), encoding="utf-8")
    return job_file


def _launcher_args(config: TrlConfig) -> list[str]:
    total = config.world_size
    # accelerate's multi-GPU launcher is torchrun; on CPU its processes join over gloo.
    args = ["--multi_gpu", "--num_processes", str(total), "--num_machines", str(config.nnodes)]
    args += ["--mixed_precision", "no", "--dynamo_backend", "no"]
    if config.nnodes > 1:
        for variable, value in rendezvous(config.nnodes).items():
            args += [_RENDEZVOUS_FLAGS[variable], value]
        # A node waits this long for the others, then fails (torch's default is 600 s).
        args += ["--rdzv_conf", f"timeout={join_timeout()}"]
    return args
