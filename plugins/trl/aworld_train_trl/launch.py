"""Several training processes through ``accelerate launch``, TRL's own distributed path.

The parent writes the checked job into the run directory (converted datasets, TRL arguments,
importable reward references), launches :mod:`aworld_train_trl.worker` in every process, and
forwards the metrics the main worker prints to the run's metrics reporter.
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

    from aworld_train_trl.config import TrlConfig

# The main worker prints each event on one line starting with this marker.
EVENT_MARKER = "@aworld-train-trl "
JOB_FILE = "trl_job.json"
WORKER_LOG = "trl_workers.log"


def launch(ctx: RunContext, checkpoint: Path | None) -> dict[str, Any]:
    """Run the job in ``config.num_processes x config.nnodes`` processes and wait for them.

    :raises TrainingError: when a reward cannot be imported by other processes, the nodes'
        rendezvous is not configured, or a worker fails.
    """
    config: TrlConfig = ctx.results["config"]
    job_file = write_job(ctx, checkpoint)
    command = [
        sys.executable, "-m", "accelerate.commands.launch",
        *_launcher_args(config),
        "-m", "aworld_train_trl.worker", str(job_file),
    ]
    log_path = ctx.run_dir / WORKER_LOG
    final: dict[str, Any] = {}
    with log_path.open("w", encoding="utf-8") as log, subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
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
        raise TrainingError(
            f"accelerate launch of {config.num_processes * config.nnodes} trl processes failed "
            f"(exit {returncode}): {_last_error(log_path)}; full log: {log_path}"
        )
    return final


def write_job(ctx: RunContext, checkpoint: Path | None) -> Path:
    """Write what every worker needs into the run directory and return the job file."""
    rewards = []
    for function in ctx.results["reward"].spec.functions:
        if function.ref is None:
            raise TrainingError(
                f"reward '{function.name}' is not importable by other processes: give it as "
                "path/to/file.py:function or package.module:function to train with several "
                "processes"
            )
        rewards.append({"name": function.name, "ref": function.ref, "weight": function.weight})
    data = ctx.results["dataset"]
    data_dir = ctx.run_dir / "trl_data"
    data.train.save_to_disk(str(data_dir / "train"))
    if data.test is not None:
        data.test.save_to_disk(str(data_dir / "test"))
    job = {
        "run_dir": str(ctx.run_dir),
        "agent": dataclasses.asdict(ctx.results["agent"]),
        "config": dataclasses.asdict(ctx.results["config"]),
        "rewards": rewards,
        "train": str(data_dir / "train"),
        "test": str(data_dir / "test") if data.test is not None else None,
        "checkpoint": str(checkpoint) if checkpoint is not None else None,
    }
    job_file = ctx.run_dir / JOB_FILE
    job_file.write_text(json.dumps(job, indent=2), encoding="utf-8")
    return job_file


def _launcher_args(config: TrlConfig) -> list[str]:
    total = config.num_processes * config.nnodes
    # accelerate's multi-GPU launcher is torchrun; on CPU its processes join over gloo.
    args = ["--multi_gpu", "--num_processes", str(total), "--num_machines", str(config.nnodes)]
    args += ["--mixed_precision", "no", "--dynamo_backend", "no"]
    if config.nnodes > 1:
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT", "NODE_RANK") if not os.environ.get(name)]
        if missing:
            raise TrainingError(
                f"resources.nnodes is {config.nnodes}: set {', '.join(missing)} on every node "
                "(the main node's address and port, and this node's rank from 0)"
            )
        args += [
            "--machine_rank", os.environ["NODE_RANK"],
            "--main_process_ip", os.environ["MASTER_ADDR"],
            "--main_process_port", os.environ["MASTER_PORT"],
        ]
    return args


def _last_error(log_path: Path) -> str:
    lines = [line.strip() for line in log_path.read_text(encoding="utf-8").splitlines()]
    for line in reversed(lines):
        if line and ("Error" in line or "Exception" in line):
            return line
    return next((line for line in reversed(lines) if line), "no output")
