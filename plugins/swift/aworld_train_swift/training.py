"""train: run ms-swift's own pipeline (``sft_main`` / ``rlhf_main``) on the checked job.

One process trains in this one. Several (``resources.gpus_per_node`` or ``nnodes`` above one)
go through torchrun, as ``swift sft`` does with ``NPROC_PER_NODE`` / ``NNODES``: see
:mod:`aworld_train_swift.launch`.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import (
    AWorldTrainError,
    TrainingError,
    last_checkpoint,
    resume_checkpoint,
    trainer_callback,
)

from aworld_train_swift.config import (
    CHECKPOINTS,
    build_arguments,
    secret_environment,
    swift_environment,
)
from aworld_train_swift.logs import output_to_log

if TYPE_CHECKING:
    from aworld_train.engine import LogFn, RunContext, StartFn

    from aworld_train_swift.config import SwiftConfig
    from aworld_train_swift.reward import SwiftReward

# The name of this engine's metrics callback in swift's ``callbacks_map``.
CALLBACK = "aworld_train_metrics"
# Where the final model goes in the run directory.
MODEL_DIR = "model"
_RESUME_ONLY = ("optimizer.pt", "scheduler.pt", "rng_state*.pth", "trainer_state.json",
                "training_args.bin", "global_step*")


def run_training(
    config: SwiftConfig, reward: SwiftReward | None, ctx: RunContext
) -> dict[str, Any]:
    """Train the checked job, resuming from the last checkpoint of ``ctx.resume_from``."""
    checkpoint = resume_checkpoint(ctx.resume_from) if ctx.resume_from is not None else None
    secrets = secret_environment(ctx.config.engine_section(), config.arguments)
    if config.distributed:
        from aworld_train_swift.launch import launch

        final = launch(ctx, checkpoint, secrets, config=config, reward=reward)
    else:
        final = train_in_process(
            config=config,
            reward=reward,
            on_start=lambda total, done: ctx.metrics.start(total, completed=done),
            on_log=ctx.metrics.log,
            checkpoint=checkpoint,
            environment=dict(secrets),
        )
    saved = last_checkpoint(ctx.run_dir / CHECKPOINTS)
    if saved is not None:
        save_final_model(saved, ctx.run_dir / MODEL_DIR)
    return final


def save_final_model(checkpoint: Path, target: Path) -> None:
    """Copy the weights (or LoRA adapter), config and tokenizer of ``checkpoint`` to ``target``,
    leaving out the optimizer and trainer state only resuming needs."""
    shutil.copytree(checkpoint, target, ignore=shutil.ignore_patterns(*_RESUME_ONLY))


def train_in_process(
    *,
    config: SwiftConfig,
    reward: SwiftReward | None,
    on_start: StartFn,
    on_log: LogFn,
    checkpoint: Path | None = None,
    environment: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    """Train through ``sft_main`` or ``rlhf_main`` in this process.

    Under torchrun every process runs this; only the main one reports. swift's own output goes
    to ``config.log_file``: aworld-train reports progress and metrics itself.

    :param on_start: called once with the total number of steps and the steps already done.
    :param on_log: called with the global step and the metrics of each logged step.
    :param checkpoint: a ``checkpoint-N`` folder to resume from.
    :param environment: variables to set while training (the credentials swift reads).
    :returns: the latest value of every logged metric, plus ``step``.
    """
    with swift_environment(config, environment), output_to_log(Path(config.log_file)):
        from swift.callbacks import TrainerCallback, callbacks_map

        from aworld_train_swift import patches
        from aworld_train_swift.remote_code import model_code
        from aworld_train_swift.reward import register

        if config.algorithm == "grpo":
            patches.apply()
        if reward is not None:
            register(reward)
        # swift builds each callback as cls(args, trainer): register the class.
        callbacks_map[CALLBACK] = trainer_callback(TrainerCallback, on_start, on_log)
        extra: dict[str, Any] = {
            "callbacks": [*config.arguments.get("callbacks", []), CALLBACK],
        }
        if checkpoint is not None:
            extra["resume_from_checkpoint"] = str(checkpoint)
        args = build_arguments(config, **extra)
        if config.algorithm == "sft":
            from swift import sft_main as main
        else:
            from swift import rlhf_main as main
        try:
            with model_code(config.trust_remote_code, str(config.arguments["model"])):
                result = main(args)
        except AWorldTrainError:
            raise
        except (RuntimeError, ValueError) as error:
            raise TrainingError(f"ms-swift {config.algorithm} training failed: {error}") from error
    final: dict[str, Any] = {}
    for entry in result.get("log_history", []):
        final.update(entry)
    final["step"] = result.get("global_step", final.get("step", 0))
    return final
