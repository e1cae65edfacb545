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
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import TrainingError

if TYPE_CHECKING:
    from aworld_train.context import RunContext

    from aworld_train_swift.config import SwiftConfig

# The main worker prints each event on one line starting with this marker.
EVENT_MARKER = "@aworld-train-swift "
JOB_FILE = "swift_job.json"
WORKER_LOG = "swift_workers.log"


def launch(ctx: RunContext, checkpoint: Path | None) -> dict[str, Any]:
    """Run the job in ``nproc_per_node x nnodes`` processes and wait for them.

    :raises TrainingError: when a reward cannot be imported by other processes, the nodes'
        rendezvous is not configured, or a worker fails.
    """
    config: SwiftConfig = ctx.results["config"]
    job_file = write_job(ctx, checkpoint)
    command = [sys.executable, "-m", "torch.distributed.run", *torchrun_args(config),
               "-m", "aworld_train_swift.worker", str(job_file)]
    env = dict(os.environ, NPROC_PER_NODE=str(config.nproc_per_node), NNODES=str(config.nnodes))
    log_path = ctx.run_dir / WORKER_LOG
    final: dict[str, Any] = {}
    with log_path.open("w", encoding="utf-8") as log, subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env=env,
        start_new_session=True,
    ) as process:
        try:
            assert process.stdout is not None
            for line in process.stdout:
                if not line.startswith(EVENT_MARKER):
                    log.write(line)
                    continue
                event = json.loads(line[len(EVENT_MARKER):])
                if event["event"] == "start":
                    ctx.metrics.start(event["total"], completed=event["done"])
                elif event["event"] == "log":
                    ctx.metrics.log(event["step"], event["metrics"])
                elif event["event"] == "done":
                    final = event["metrics"]
            returncode = process.wait()
        except BaseException:
            process.terminate()
            process.wait()
            raise
    if returncode != 0:
        total = config.nproc_per_node * config.nnodes
        raise TrainingError(
            f"torchrun of {total} swift processes failed (exit {returncode}): "
            f"{_last_error(log_path)}; full log: {log_path}"
        )
    return final


def write_job(ctx: RunContext, checkpoint: Path | None) -> Path:
    """Write what every worker needs into the run directory and return the job file."""
    rewards = []
    reward = ctx.results.get("reward")
    if reward is not None and ctx.results["config"].algorithm == "grpo":
        for function, name in zip(reward.spec.functions, reward.names):
            if function.ref is None:
                raise TrainingError(
                    f"reward '{function.name}' is not importable by other processes: give it as "
                    "path/to/file.py:function or package.module:function to train with several "
                    "processes"
                )
            rewards.append({"name": function.name, "ref": function.ref, "orm": name})
    job = {
        "config": dataclasses.asdict(ctx.results["config"]),
        "rewards": rewards,
        "checkpoint": str(checkpoint) if checkpoint is not None else None,
    }
    job_file = ctx.run_dir / JOB_FILE
    job_file.write_text(json.dumps(job, indent=2), encoding="utf-8")
    return job_file


def torchrun_args(config: SwiftConfig) -> list[str]:
    """torchrun's arguments for ``config``; several nodes rendezvous at ``MASTER_ADDR``."""
    args = ["--nproc_per_node", str(config.nproc_per_node), "--nnodes", str(config.nnodes)]
    if config.nnodes > 1:
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK") if not os.environ.get(name)]
        if missing:
            raise TrainingError(
                f"resources.nnodes is {config.nnodes}: set {', '.join(missing)} on every node "
                "(the main node's address and port, and this node's rank from 0)"
            )
        args += [
            "--node_rank", os.environ["NODE_RANK"],
            "--master_addr", os.environ["MASTER_ADDR"],
            "--master_port", os.environ["MASTER_PORT"],
        ]
    else:
        args += ["--standalone"]
    return args


def _last_error(log_path: Path) -> str:
    lines = [line.strip() for line in log_path.read_text(encoding="utf-8").splitlines()]
    for line in reversed(lines):
        if line and ("Error" in line or "Exception" in line):
            return line
    return next((line for line in reversed(lines) if line), "no output")
