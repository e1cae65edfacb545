"""Training: ``python -m verl.trainer.main_ppo`` on the saved config, in a child process.

The child gets its own process group (``run_process`` of the engine SDK) so that a signal reaches
it only through :func:`run`, which forwards SIGINT and SIGTERM to the whole group (VeRL's driver
and the local Ray it started) and waits for it to stop before the run is marked interrupted.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from aworld_train.engine import CHECKPOINTS, TrainingError
from aworld_train.engine.launch import remember_secrets, run_process

from aworld_train_verl.config import SAVED_CONFIG_NAME
from aworld_train_verl.gpus import visible_gpus

logger = logging.getLogger("aworld_train")

LAUNCH_SCRIPT = "launch.sh"
LOG_NAME = "verl_train.log"
METRICS_NAME = "verl_metrics.jsonl"

# VeRL's console logger prints one line per step: "step:3 - actor/pg_loss:0.1 - ...".
_STEP_LINE = re.compile(r"step:(\d+) - (.*)$")
# The core shows these beside its progress bar.
HEADLINES = {"critic/score/mean": "reward", "actor/pg_loss": "loss"}


def main_ppo_command(
    run_dir: Path, extra: Iterable[str] = (), python: str | None = None
) -> list[str]:
    """The command that trains the saved config of ``run_dir`` with VeRL directly."""
    return [
        python or sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        f"--config-path={run_dir}",
        f"--config-name={SAVED_CONFIG_NAME}",
        f"hydra.run.dir={run_dir / 'hydra'}",
        "hydra.output_subdir=null",
        *extra,
    ]


def write_launch_script(
    run_dir: Path, secrets: Iterable[str] = (), variables: Mapping[str, str] | None = None
) -> Path:
    """Write ``launch.sh``: the job as plain VeRL, for users who submit to a scheduler themselves.

    :param secrets: the environment variables that carry the job's secrets (the run's files
        reference them); the script refuses to start without them.
    :param variables: the environment VeRL's processes need besides (where trackers write),
        exported with the run directory's path relative to the script.
    """
    path = run_dir / LAUNCH_SCRIPT
    needed = "".join(
        f'if [[ -z "${{{name}:-}}" ]]; then echo "launch.sh: set {name}: it carries a secret of the job" >&2; exit 2; fi\n'
        for name in secrets
    )
    here = str(run_dir.absolute())
    exports = "".join(
        f"export {name}={_quoted_in(value, here)}\n"
        for name, value in sorted((variables or {}).items())
    )
    path.write_text(
        "#!/usr/bin/env bash\n"
        "# Trains this run's job with VeRL directly, on this machine's GPUs or on the Ray cluster\n"
        "# named by RAY_ADDRESS. Extra arguments are Hydra overrides, e.g. trainer.n_gpus_per_node=8.\n"
        "# The job's secrets are not in the run's files: they reference AWORLD_TRAIN_SECRET_<n>\n"
        "# environment variables, which aworld-train sets when it trains.\n"
        "set -euo pipefail\n"
        f"{needed}"
        'RUN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"\n'
        'cd "$RUN_DIR"\n'
        f'export VERL_FILE_LOGGER_PATH="$RUN_DIR/{METRICS_NAME}"\n'
        f"{exports}"
        "# Ray refuses a CPU count when it joins an existing cluster.\n"
        "cluster=()\n"
        'if [[ -n "${RAY_ADDRESS:-}" ]]; then cluster=(ray_kwargs.ray_init.num_cpus=null); fi\n'
        f'exec "${{PYTHON:-{shlex.quote(sys.executable)}}}" -m verl.trainer.main_ppo \\\n'
        f'  --config-path="$RUN_DIR" --config-name={SAVED_CONFIG_NAME} \\\n'
        '  hydra.run.dir="$RUN_DIR/hydra" hydra.output_subdir=null ${cluster[@]+"${cluster[@]}"} "$@"\n',
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


def _quoted_in(value: str, run_dir: str) -> str:
    """``value`` as one double-quoted shell word, with the run directory's path as ``$RUN_DIR``."""
    escaped = (re.sub(r'(["\\$`])', r"\\\1", part) for part in value.split(run_dir))
    return '"' + "$RUN_DIR".join(escaped) + '"'


def joins_cluster(config: Any) -> bool:
    """Whether main_ppo's ``ray.init`` joins an existing Ray cluster instead of starting one."""
    return bool(config.ray_kwargs.ray_init.get("address") or os.environ.get("RAY_ADDRESS"))


def ray_cpus_held(config: Any) -> int:
    """The CPUs VeRL's Ray actors hold for the whole run, beyond those placed and released.

    main_ppo's trainer keeps its data in a transfer queue: with the SimpleStorage backend, one
    actor per storage unit, each holding a CPU in one placement group, plus the queue's
    controller. One more CPU lets the actors that hold none be placed.
    """
    if not config.trainer.get("use_v1", False):
        return 1
    backend = config.transfer_queue.backend
    units = (
        int(backend.SimpleStorage.num_data_storage_units)
        if backend.storage_backend == "SimpleStorage"
        else 0
    )
    return units + 2


def preflight(config: Any, num_cpus: int, gpus: bool = True) -> None:
    """Fail in seconds when this machine cannot start the job, instead of in VeRL after Ray starts
    (or never: Ray waits forever for CPUs it will not get).

    :param num_cpus: the CPUs the local Ray gets.
    :param gpus: whether the job trains on GPUs (else on the CPU, :mod:`aworld_train_verl.device`).
    :raises TrainingError: when fewer GPUs are visible than the config asks for on this node, or
        the local Ray gets fewer CPUs than VeRL's actors hold.
    """
    if joins_cluster(config):
        return  # the cluster's nodes hold the GPUs and CPUs, not necessarily this one
    wanted = int(config.trainer.n_gpus_per_node) * int(config.trainer.nnodes)
    visible = visible_gpus()
    if gpus and visible < wanted:
        raise TrainingError(
            f"VeRL needs {wanted} GPU(s) (trainer.n_gpus_per_node={config.trainer.n_gpus_per_node} "
            f"x trainer.nnodes={config.trainer.nnodes}) but {visible} NVIDIA GPU(s) are visible here; "
            f"train on a GPU machine, or join a Ray cluster with resources.ray_address or RAY_ADDRESS"
        )
    held = ray_cpus_held(config)
    if num_cpus < held:
        units = "transfer_queue.backend.SimpleStorage.num_data_storage_units"
        raise TrainingError(
            f"Ray gets {num_cpus} CPU(s) here but VeRL's transfer queue holds {held} "
            f"({units}={config.transfer_queue.backend.SimpleStorage.num_data_storage_units} plus its "
            f"controller and one spare), so Ray would wait forever; set verl.{units} to at most "
            f"{max(num_cpus - 2, 1)} or train on a machine with more CPUs"
        )


def last_checkpoint(resume_from: Path) -> tuple[int, Path]:
    """The step and folder of the last checkpoint VeRL saved in the run directory ``resume_from``.

    :raises TrainingError: when that run saved no checkpoint.
    """
    checkpoints = resume_from / CHECKPOINTS
    marker = checkpoints / "latest_checkpointed_iteration.txt"
    if not marker.is_file():
        raise TrainingError(
            f"{resume_from}: no VeRL checkpoint to resume from ({marker} is missing); "
            f"set config key 'save_steps' so the next run saves some"
        )
    step = marker.read_text(encoding="utf-8").strip()
    target = checkpoints / f"global_step_{step}"
    if not step.isdigit() or not target.is_dir():
        raise TrainingError(f"{marker} names step {step!r}, but {target} does not exist")
    # VeRL names a checkpoint in the marker once it is whole: a later folder was cut short.
    later = sorted(
        (int(match[1]), folder)
        for folder in checkpoints.glob("global_step_*")
        if (match := re.fullmatch(r"global_step_(\d+)", folder.name)) and int(match[1]) > int(step)
    )
    if later:
        logger.warning(
            "%s was cut short while being saved (%s does not name it): resuming from %s, the "
            "last whole checkpoint",
            ", ".join(str(folder) for _, folder in later),
            marker.name,
            target,
        )
    return int(step), target


def resume_overrides(checkpoint: Path) -> list[str]:
    """Hydra overrides that continue from ``checkpoint`` through VeRL's own resume mode."""
    return ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={checkpoint}"]


def parse_step(line: str) -> tuple[int, dict[str, float]] | None:
    """The step and metrics of a VeRL console-logger line, or ``None`` for any other line."""
    match = _STEP_LINE.search(line.rstrip())
    if match is None:
        return None
    metrics: dict[str, float] = {}
    for item in match.group(2).split(" - "):
        key, sep, value = item.rpartition(":")
        if not sep:
            continue
        try:
            metrics[key.strip()] = float(value)
        except ValueError:
            continue
    for source, alias in HEADLINES.items():
        if source in metrics:
            metrics[alias] = metrics[source]
    return int(match.group(1)), metrics


def run(
    command: list[str],
    run_dir: Path,
    on_step: Callable[[int, dict[str, float]], None],
    echo: Callable[[str], None] = print,
    environment: Mapping[str, str] | None = None,
    variables: Mapping[str, str] | None = None,
) -> None:
    """Run ``command`` in ``run_dir``, streaming its output to ``echo`` and ``verl_train.log`` and
    each step's metrics to ``on_step``.

    :param environment: the job's secrets (:mod:`aworld_train_verl.vault`), set in the child's
        environment only; its output is redacted, since VeRL prints its resolved config.
    :param variables: more of the child's environment, not secret (where trackers write); Ray
        hands the child's environment on to the workers it starts.
    :raises TrainingError: when it exits with an error, with the end of its output.
    :raises KeyboardInterrupt: after SIGINT or SIGTERM was forwarded and the child stopped.
    """
    remember_secrets({"env": dict(environment or {})})  # every value is one
    env = {
        **os.environ,
        **(variables or {}),
        **(environment or {}),
        "PYTHONUNBUFFERED": "1",
        "HYDRA_FULL_ERROR": "1",
        "VERL_FILE_LOGGER_PATH": str(run_dir / METRICS_NAME),
    }

    def on_line(line: str) -> None:
        echo(line.rstrip())
        parsed = parse_step(line)
        if parsed is not None:
            on_step(*parsed)

    run_process(
        command,
        what="VeRL's main_ppo",
        log_path=run_dir / LOG_NAME,
        on_line=on_line,
        cwd=run_dir,
        env=env,
    )
