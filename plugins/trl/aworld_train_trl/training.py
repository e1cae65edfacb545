"""train: build TRL's trainer from the checked inputs and run it, in this process or several."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import resume_checkpoint, scoped_environment, trainer_callback

from aworld_train_trl.tools import trl_tools

if TYPE_CHECKING:
    from aworld_train.engine import LogFn, RunContext, StartFn

    from aworld_train_trl.agent import TrlAgent
    from aworld_train_trl.config import TrlConfig
    from aworld_train_trl.dataset import TrlDatasets
    from aworld_train_trl.reward import TrlReward
    from aworld_train_trl.tools import SchemaTool

def run_training(
    agent: TrlAgent, data: TrlDatasets, reward: TrlReward, config: TrlConfig, ctx: RunContext
) -> dict[str, Any]:
    """Train the checked job, resuming from ``ctx.resume_from`` when set."""
    checkpoint = resume_checkpoint(ctx.resume_from) if ctx.resume_from is not None else None
    # Credentials reach TRL through the environment (workers inherit it), never through its
    # config object, which the trainer pickles into training_args.bin.
    with scoped_environment(config.secret_env):
        if config.distributed:
            from aworld_train_trl.launch import launch

            return launch(ctx, checkpoint, agent=agent, data=data, reward=reward, config=config)
        return train_in_process(
            agent=agent,
            data=data,
            reward=reward,
            config=config,
            run_dir=ctx.run_dir,
            on_start=lambda total, done: ctx.metrics.start(total, completed=done),
            on_log=ctx.metrics.log,
            checkpoint=checkpoint,
            tools=trl_tools(ctx.tools),
        )


def train_in_process(
    *,
    agent: TrlAgent,
    data: TrlDatasets,
    reward: TrlReward,
    config: TrlConfig,
    run_dir: Path,
    on_start: StartFn,
    on_log: LogFn,
    checkpoint: Path | None = None,
    tools: list[SchemaTool] | None = None,
) -> dict[str, Any]:
    """Train with TRL's trainer for ``config.algorithm`` and save the final model.

    Under ``accelerate launch`` every process runs this; only the main one reports and saves.

    :param on_start: called once with the total number of steps and the steps already done.
    :param on_log: called with the global step and the metrics of each logged step.
    :param checkpoint: a ``checkpoint-N`` folder to resume from.
    :param tools: the agent's tools (:func:`~aworld_train_trl.tools.trl_tools`): GRPO shows the
        model each one's schema as its server advertises it and calls it between turns.
    :returns: the latest value of every logged metric.
    """
    import datasets
    from transformers import AutoTokenizer, PrinterCallback, TrainerCallback
    from transformers.utils import logging as hf_logging

    from aworld_train_trl.config import build_trainer_args

    # aworld-train shows its own progress bar and metrics.
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    # TRL 1.16 calls an accessor transformers 5.23 deprecates; nothing the user can act on.
    warnings.filterwarnings(
        "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
    )
    args = build_trainer_args(config)
    tokenizer = AutoTokenizer.from_pretrained(
        agent.model, trust_remote_code=agent.trust_remote_code
    )
    if agent.response_template is not None:
        tokenizer.response_template = agent.response_template
    callback = trainer_callback(TrainerCallback, on_start, on_log)()
    if config.algorithm == "sft":
        from trl import SFTTrainer

        trainer = SFTTrainer(
            model=agent.model,
            args=args,
            train_dataset=data.train,
            eval_dataset=data.test,
            processing_class=tokenizer,
            callbacks=[callback],
        )
    else:
        from trl import GRPOTrainer

        trainer = GRPOTrainer(
            model=agent.model,
            reward_funcs=[reward],
            args=args,
            train_dataset=data.train,
            eval_dataset=data.test,
            processing_class=tokenizer,
            callbacks=[callback],
            tools=tools or None,
        )
    trainer.remove_callback(PrinterCallback)
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
    trainer.save_model(str(run_dir / "model"))
    final: dict[str, Any] = {}
    for entry in trainer.state.log_history:
        final.update(entry)
    final["step"] = trainer.state.global_step
    final["num_processes"] = trainer.accelerator.num_processes
    return final
