"""train: build TRL's trainer from the checked inputs and run it, in this process or several."""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import (
    ADAPTER_DIR,
    MODEL_DIR,
    append_samples,
    merge_adapter,
    resume_checkpoint,
)
from aworld_train.engine.hf import (
    completion_text,
    replay_shuffles,
    score_evaluations,
    trainer_callback,
)
from aworld_train.engine.launch import scoped_environment

from aworld_train_trl.reward import REWARD_COLUMN

if TYPE_CHECKING:
    from aworld_train.engine import RunContext, ToolSet
    from aworld_train.engine.hf import LogFn, StartFn

    from aworld_train_trl.agent import TrlAgent
    from aworld_train_trl.config import TrlConfig
    from aworld_train_trl.dataset import TrlDatasets
    from aworld_train_trl.reward import TrlReward

# Where the policy's weights pass to the vLLM engine before each step (vLLM rollouts on a CPU).
VLLM_WEIGHTS = "vllm_weights"


def run_training(
    agent: TrlAgent, data: TrlDatasets, reward: TrlReward | None, config: TrlConfig, ctx: RunContext
) -> dict[str, Any]:
    """Train the checked job, resuming from ``ctx.resume_from`` when set."""
    checkpoint = resume_checkpoint(ctx.resume_from) if ctx.resume_from is not None else None
    # Credentials reach TRL through the environment (workers inherit it), never through its
    # config object, which the trainer pickles into training_args.bin; so do the trackers'
    # folders inside the run directory.
    with scoped_environment({**config.environment, **config.secret_env}):
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
            tools=ctx.tools,
        )


def train_in_process(
    *,
    agent: TrlAgent,
    data: TrlDatasets,
    reward: TrlReward | None,
    config: TrlConfig,
    run_dir: Path,
    on_start: StartFn,
    on_log: LogFn,
    checkpoint: Path | None = None,
    tools: ToolSet | None = None,
) -> dict[str, Any]:
    """Train with TRL's trainer for ``config.algorithm`` and save the final model.

    With a test set, TRL's evaluation scores it at the cadence ``check_config`` set, or once
    after training: GRPO greedily, with the job's reward; SFT with its loss and, when the job
    has a reward, one greedy completion per row scored with it (``eval_reward``, rank 0).
    GRPO appends rollout samples to ``samples.jsonl``; a LoRA run keeps its adapter and saves
    the merged model. Under ``accelerate launch`` every process runs this; only the main one
    reports and saves.

    :param on_start: called once with the total number of steps and the steps already done.
    :param on_log: called with the global step and the metrics of each logged step.
    :param checkpoint: a ``checkpoint-N`` folder to resume from.
    :param tools: the agent's tools, which the spec form's episodes call.
    :returns: the latest value of every logged metric.
    """
    from transformers import PrinterCallback, TrainerCallback

    _quiet_libraries()
    renamed = eval_names(config.reward_names)
    callback = trainer_callback(
        TrainerCallback, on_start, lambda step, metrics: on_log(step, renamed(metrics))
    )()
    common = _trainer_arguments(agent, data, config, callback)
    if config.algorithm == "sft":
        trainer = _sft_trainer(common, agent=agent, data=data, reward=reward, config=config)
    else:
        trainer = _grpo_trainer(
            common, agent=agent, reward=reward, config=config, run_dir=run_dir, tools=tools
        )
    trainer.remove_callback(PrinterCallback)
    replay_shuffles(trainer)  # a resumed run shuffles each epoch as the run it continues
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint is not None else None)
    shutil.rmtree(run_dir / VLLM_WEIGHTS, ignore_errors=True)  # the last step's copy for vLLM
    if config.evaluate_at_end:
        trainer.evaluate()
    _save(trainer, agent, run_dir, lora=common["peft_config"] is not None)
    final: dict[str, Any] = {}
    for entry in trainer.state.log_history:
        final.update(renamed(entry))
    final["step"] = trainer.state.global_step
    final["num_processes"] = trainer.accelerator.num_processes
    return final


def _quiet_libraries() -> None:
    """Silence the libraries' own progress bars and logs: aworld-train shows its own."""
    import datasets
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    # TRL 1.16 calls an accessor transformers 5.23 deprecates; nothing the user can act on.
    warnings.filterwarnings(
        "ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning
    )


def _trainer_arguments(
    agent: TrlAgent, data: TrlDatasets, config: TrlConfig, callback: Any
) -> dict[str, Any]:
    """What every TRL trainer takes: the model, its tokenizer, the trainer config, the data,
    the progress callback and the LoRA adapter (``None`` without one)."""
    from transformers import AutoTokenizer

    from aworld_train_trl.config import build_trainer_args

    return {
        "model": agent.model,
        "args": build_trainer_args(config),
        "train_dataset": data.train,
        "eval_dataset": data.test,
        "processing_class": AutoTokenizer.from_pretrained(
            agent.model, trust_remote_code=agent.trust_remote_code
        ),
        "callbacks": [callback],
        "peft_config": _peft_config(config.lora),
    }


def _sft_trainer(
    common: dict[str, Any],
    *,
    agent: TrlAgent,
    data: TrlDatasets,
    reward: TrlReward | None,
    config: TrlConfig,
) -> Any:
    """TRL's SFT trainer; with a reward and a test set, its evaluation also scores one greedy
    completion per test row with the reward."""
    from trl import SFTTrainer

    trainer = SFTTrainer(**common)
    if reward is not None and data.test_rows is not None:
        score_evaluations(
            trainer,
            [dict(row) for row in data.test_rows],
            system_prompt=agent.system_prompt,
            reward=reward.spec,
            max_new_tokens=config.eval_max_tokens,
        )
    return trainer


def _grpo_trainer(
    common: dict[str, Any],
    *,
    agent: TrlAgent,
    reward: TrlReward | None,
    config: TrlConfig,
    run_dir: Path,
    tools: ToolSet | None,
) -> Any:
    """TRL's GRPO trainer, rolling out through the agent's episodes (or vLLM) when it has them,
    evaluating greedily and logging rollout samples when the job asks."""
    from transformers import TrainerCallback

    if agent.episodes is not None or config.vllm_rollouts:
        from aworld_train_trl.rollout import AgentRollout, agent_trainer_class, prompt_agent

        # TRL warns that rollout_func is experimental: nothing the user can act on.
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
        rollout = AgentRollout(
            agent.episodes or prompt_agent(agent),
            tools,
            tokenizer=common["processing_class"],
            model=agent.model,
            max_tokens=common["args"].max_completion_length,
            scratch=run_dir / VLLM_WEIGHTS if config.vllm_rollouts else None,
        )
        trainer = agent_trainer_class()(reward_funcs=[reward], rollout_func=rollout, **common)
    else:
        from trl import GRPOTrainer

        trainer = GRPOTrainer(reward_funcs=[reward], **common)
    greedy_evaluation(trainer)
    if config.log_samples:
        trainer.add_callback(
            samples_callback(
                TrainerCallback,
                trainer,
                run_dir,
                config.log_samples,
                config.reward_names,
                records=getattr(trainer.rollout_func, "records", None),
            )
        )
    return trainer


def _peft_config(lora: dict[str, Any] | None) -> Any:
    if lora is None:
        return None
    from peft import LoraConfig

    from aworld_train_trl.settings import lora_arguments

    return LoraConfig(**lora_arguments(lora))


def _save(trainer: Any, agent: TrlAgent, run_dir: Path, *, lora: bool) -> None:
    """The final model into ``<run>/model``; with LoRA, the adapter into ``<run>/adapter`` and
    the base model merged with it into ``<run>/model``, which loads without peft."""
    if not lora:
        trainer.save_model(str(run_dir / MODEL_DIR))
        return
    trainer.save_model(str(run_dir / ADAPTER_DIR))
    trainer.accelerator.wait_for_everyone()
    if trainer.accelerator.is_main_process:
        merge_adapter(
            agent.model,
            run_dir / ADAPTER_DIR,
            run_dir / MODEL_DIR,
            trust_remote_code=agent.trust_remote_code,
        )


def eval_names(reward_names: list[str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A function that names TRL's eval metrics of each reward function as every engine names
    them: ``eval_rewards/<name>/mean`` (one function) and ``eval_rewards/<name>`` (each of
    several, logged by :class:`~aworld_train_trl.reward.TrlReward`) become ``eval_<name>``.
    TRL's ``eval_reward`` is already the job's weighted total."""
    names = {}
    for name in reward_names:
        names[f"eval_rewards/{name}/mean"] = names[f"eval_rewards/{name}"] = f"eval_{name}"

    def renamed(metrics: dict[str, Any]) -> dict[str, Any]:
        return {names.get(key, key): value for key, value in metrics.items()}

    return renamed


def greedy_evaluation(trainer: Any) -> None:
    """Make ``trainer.evaluate`` generate greedily, as every engine scores its test set.

    GRPOTrainer evaluates with the sampling settings it trains with; its generation config is
    swapped for the span of each evaluation (the transformers generation path; vLLM keeps its
    own sampling parameters).
    """
    from transformers import GenerationConfig

    sampling_keys = ("do_sample", "temperature", "top_p", "top_k", "min_p")
    kwargs = {k: v for k, v in trainer.generation_kwargs.items() if k not in sampling_keys}
    greedy = GenerationConfig(**kwargs, do_sample=False, disable_compile=True)
    evaluate = trainer.evaluate

    def evaluate_greedily(*args: Any, **kwargs: Any) -> Any:
        sampling = trainer.generation_config
        trainer.generation_config = greedy
        try:
            return evaluate(*args, **kwargs)
        finally:
            trainer.generation_config = sampling

    trainer.evaluate = evaluate_greedily


def samples_callback(
    base: type,
    trainer: Any,
    run_dir: Path,
    count: int,
    reward_names: list[str],
    records: Callable[[int], list[dict[str, Any]]] | None = None,
) -> Any:
    """A ``base`` (TrainerCallback) that appends ``count`` of the latest generation batch's
    (prompt, completion, reward, rewards) to ``<run>/samples.jsonl`` at each logged training
    step, from the main process; with ``records`` (an agent's rollout), each episode token by
    token too. The main process's episodes come first in the gathered batch, so its records
    line up with the first completions.

    The batch is the one GRPOTrainer keeps for its own completion logging (``_logs``, gathered
    from every process); each function's score comes from the column
    :class:`~aworld_train_trl.reward.TrlReward` adds to it. A logged step that generated
    nothing new (several steps per generation) adds nothing.
    """

    class SamplesCallback(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            self.written: list[Any] = []  # the completions the last call appended

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any
        ) -> None:
            if not state.is_world_process_zero or not logs or "reward" not in logs:
                return
            batch = trainer._logs
            completions = list(batch["completion"])[:count]
            if not completions or completions == self.written:
                return
            self.written = completions
            totals = next(iter(batch["rewards"].values()))
            columns = {name: batch["extra"].get(f"{REWARD_COLUMN}{name}") for name in reward_names}
            episodes = records(len(completions)) if records is not None else []
            rows = []
            for i, completion in enumerate(completions):
                rows.append(
                    {
                        **({"episode": episodes[i]} if i < len(episodes) else {}),
                        "prompt": prompt_text(batch["prompt"][i]),
                        "completion": completion_text(completion),
                        "reward": float(totals[i]),
                        "rewards": {
                            name: float(column[i])
                            for name, column in columns.items()
                            if column is not None and column[i] is not None
                        },
                    }
                )
            append_samples(run_dir, state.global_step, rows)

    return SamplesCallback()


def prompt_text(prompt: Any) -> str:
    """The text of a prompt: a string, or the last message of a chat (the row's question; the
    system prompt is the same for every row)."""
    if isinstance(prompt, str):
        return prompt
    return str(prompt[-1].get("content") or "") if prompt else ""
