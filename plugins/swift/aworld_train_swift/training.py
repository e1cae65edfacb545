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
    ADAPTER_DIR,
    CHECKPOINTS,
    MODEL_DIR,
    merge_adapter,
    resume_checkpoint,
)
from aworld_train.engine.hf import last_checkpoint
from aworld_train.engine.settings import TRACKERS, tracker_environment

from aworld_train_swift.callbacks import (
    CALLBACK,
    REWARD_EVAL_CALLBACK,
    common_metrics,
    reward_eval_callback,
    run_callback,
    scores_test_set,
)
from aworld_train_swift.config import (
    build_arguments,
    own_process_group,
    secret_environment,
    swift_environment,
)
from aworld_train_swift.logs import output_to_log

if TYPE_CHECKING:
    from aworld_train.engine import RunContext
    from aworld_train.engine.hf import LogFn, StartFn

    from aworld_train_swift.agent import SwiftAgent
    from aworld_train_swift.config import SwiftConfig
    from aworld_train_swift.reward import SwiftReward
    from aworld_train_swift.rollout import AgentRollouts

_RESUME_ONLY = (
    "optimizer.pt",
    "scheduler.pt",
    "rng_state*.pth",
    "trainer_state.json",
    "training_args.bin",
    "global_step*",
)


def run_training(
    config: SwiftConfig,
    reward: SwiftReward | None,
    ctx: RunContext,
    agent: SwiftAgent | None = None,
) -> dict[str, Any]:
    """Train the checked job, resuming from the last checkpoint of ``ctx.resume_from``.

    :param agent: the checked agent; one whose episodes run through the agent runtime trains
        on them, in each training process for its own prompts.
    """
    checkpoint = resume_checkpoint(ctx.resume_from) if ctx.resume_from is not None else None
    trackers = tuple(t for t in config.arguments["report_to"] if t in TRACKERS)
    # Credentials, and where the trackers keep their files (inside the run directory).
    environment = {
        **secret_environment(ctx.config.engine_section(), config.arguments),
        **tracker_environment(trackers, ctx.run_dir),
    }
    if config.distributed:
        from aworld_train_swift.launch import launch

        final = launch(ctx, checkpoint, environment, config=config, reward=reward, agent=agent)
    else:
        final = train_in_process(
            config=config,
            reward=reward,
            on_start=lambda total, done: ctx.metrics.start(total, completed=done),
            on_log=ctx.metrics.log,
            checkpoint=checkpoint,
            environment=dict(environment),
            rollouts=agent_rollouts(agent, config),
        )
    saved = last_checkpoint(ctx.run_dir / CHECKPOINTS)
    if saved is not None:
        save_final_model(saved, ctx.run_dir, config)
    return final


def agent_rollouts(agent: SwiftAgent | None, config: SwiftConfig) -> AgentRollouts | None:
    """What the scheduler needs to run ``agent``'s episodes, or ``None`` for an agent swift
    generates for itself."""
    if agent is None or agent.runtime is None:
        return None
    from aworld_train_swift.rollout import AgentRollouts

    return AgentRollouts(agent.runtime, agent.tools, str(config.arguments["model"]))


def save_final_model(checkpoint: Path, run_dir: Path, config: SwiftConfig) -> None:
    """Leave the trained model in ``run_dir/model``, without the optimizer and trainer state
    only resuming needs.

    A LoRA checkpoint (a PEFT adapter) is kept in ``run_dir/adapter`` and merged into the base
    model, so that ``model/`` loads without peft; other checkpoints are copied.
    """
    ignore = shutil.ignore_patterns(*_RESUME_ONLY)
    if not (checkpoint / "adapter_config.json").is_file():
        shutil.copytree(checkpoint, run_dir / MODEL_DIR, ignore=ignore)
        return
    adapter = run_dir / ADAPTER_DIR
    shutil.copytree(checkpoint, adapter, ignore=ignore)
    merge_adapter(
        str(config.arguments["model"]),
        adapter,
        run_dir / MODEL_DIR,
        trust_remote_code=config.trust_remote_code,
    )


def train_in_process(
    *,
    config: SwiftConfig,
    reward: SwiftReward | None,
    on_start: StartFn,
    on_log: LogFn,
    checkpoint: Path | None = None,
    environment: dict[str, str | None] | None = None,
    rollouts: AgentRollouts | None = None,
) -> dict[str, Any]:
    """Train through ``sft_main`` or ``rlhf_main`` in this process.

    With a test set, SFT and DPO evaluate with their loss and, when the job has a reward, score
    the test set with it (``eval_reward``, rank 0). Under torchrun every process runs this;
    only the main one reports. swift's own output goes
    to ``config.log_file``: aworld-train reports progress and metrics itself.

    :param on_start: called once with the total number of steps and the steps already done.
    :param on_log: called with the global step and the metrics of each logged step, under the
        common names (:func:`~aworld_train_swift.callbacks.common_metrics`).
    :param checkpoint: a ``checkpoint-N`` folder to resume from.
    :param environment: variables to set while training (the credentials swift reads).
    :param rollouts: the agent whose episodes GRPO trains on, through the agent runtime.
    :returns: the latest value of every logged metric, plus ``step``.
    """
    with swift_environment(config, environment), output_to_log(Path(config.log_file)):
        from aworld_train_swift import patches
        from aworld_train_swift.remote_code import model_code
        from aworld_train_swift.reward import register

        if config.algorithm == "grpo":
            patches.apply()
        if reward is not None:
            register(reward)
        extra: dict[str, Any] = {
            "callbacks": _register_callbacks(config, reward, on_start, on_log, rollouts),
        }
        if checkpoint is not None:
            extra["resume_from_checkpoint"] = str(checkpoint)
        args = build_arguments(config, **extra)
        if config.algorithm == "sft":
            from swift import sft_main as main
        else:
            from swift import rlhf_main as main
        # A failure inside ms-swift reaches the core as it was raised: the core's line names
        # its type and where it was raised, and the run's error.log keeps its traceback.
        with (
            model_code(config.trust_remote_code, str(config.arguments["model"])),
            own_process_group(),
        ):
            result = main(args)
    final: dict[str, Any] = {}
    for entry in result.get("log_history", []):
        final.update(common_metrics(entry))
    final["step"] = result.get("global_step", final.get("step", 0))
    return final


def _register_callbacks(
    config: SwiftConfig,
    reward: SwiftReward | None,
    on_start: StartFn,
    on_log: LogFn,
    rollouts: AgentRollouts | None,
) -> list[str]:
    """Register the run's callbacks with swift (which builds each as ``cls(args, trainer)``):
    progress and metrics, the test set's reward scores when the job asks, and the agent's
    rollouts.

    :returns: the callback names for swift's ``callbacks`` argument, the config's own first.
    """
    from swift.callbacks import TrainerCallback, callbacks_map

    callbacks_map[CALLBACK] = run_callback(
        TrainerCallback,
        on_start,
        on_log,
        run_dir=Path(config.run_dir),
        log_samples=config.log_samples,
        end_only_eval=config.end_only_eval,
    )
    names = [*config.arguments.get("callbacks", []), CALLBACK]
    if reward is not None and scores_test_set(config, reward):
        callbacks_map[REWARD_EVAL_CALLBACK] = reward_eval_callback(TrainerCallback, config, reward)
        names.append(REWARD_EVAL_CALLBACK)
    if rollouts is not None:
        from aworld_train_swift.rollout import AGENT_CALLBACK, register_rollouts

        register_rollouts(rollouts)
        names.append(AGENT_CALLBACK)
    return names
