"""What every engine built on a Hugging Face ``Trainer`` (TRL, ms-swift, ...) needs from the core.

The metrics callback a trainer reports through, the checkpoint a run resumes from, the model
the job trains, the text of a completion whatever form the trainer hands it in, the shape of a trainer engine's resolved
config, and the names of its trainer's arguments (cached per library version). Importing this
module is cheap: transformers and the trainer's library are imported only by the engine, which
passes their classes in.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import logging
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from aworld_train.cache import cached
from aworld_train.errors import AgentError, RunDirectoryError
from aworld_train.plugins import installed_versions
from aworld_train.run.files import CHECKPOINTS, cut_short, last_checkpoint
from aworld_train.run.metrics import LogFn, StartFn
from aworld_train.model import check_lengths
from aworld_train.dataset.loading import quiet_progress_bars

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec
    from aworld_train.job.config import TrainConfig
    from aworld_train.reward import RewardSpec

#: For engines built on a Hugging Face ``Trainer``; :mod:`aworld_train.engine` holds what every
#: engine needs (``resume_checkpoint``, ``merge_adapter`` and ``policy_model``, defined here,
#: among them).
__all__ = [
    "TrainerConfig",
    "arguments_class",
    "argument_names",
    "all_argument_names",
    "trainer_callback",
    "LogFn",
    "StartFn",
    "score_evaluations",
    "replay_shuffles",
    "completion_text",
    "last_checkpoint",
    "check_lengths",
    "quiet_progress_bars",
]

logger = logging.getLogger("aworld_train")


def trainer_callback(base: type, on_start: StartFn, on_log: LogFn) -> type:
    """A subclass of ``base`` (transformers' ``TrainerCallback``, or an engine's own subclass of
    it) that forwards the trainer's progress and log entries from the main process.

    The base class is passed in, so that this module does not import transformers.
    """

    class MetricsCallback(base):  # type: ignore[misc, valid-type]
        """Forwards the trainer's progress and log entries to aworld-train's metrics."""

        first_step = 0  # the step this process started from: 0, or the checkpoint's

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.first_step = state.global_step
            if state.is_world_process_zero:
                on_start(state.max_steps, state.global_step)

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any
        ) -> None:
            if state.is_world_process_zero and logs:
                on_log(state.global_step, _whole_run_loss(dict(logs), state, self.first_step))

    return MetricsCallback


def _whole_run_loss(logs: dict[str, Any], state: Any, first_step: int) -> dict[str, Any]:
    """``logs`` with the run's summary ``train_loss`` averaged over all of its steps.

    The trainer averages the steps of its own ``train()`` call: a resumed run's would leave
    out the steps before its checkpoint. Their losses are in the checkpoint's ``log_history``,
    each logged loss the mean of the steps since the one logged before.
    """
    if "train_loss" not in logs or first_step == 0 or state.global_step <= first_step:
        return logs
    earlier, logged = 0.0, 0
    for entry in state.log_history:
        step = entry.get("step", 0)
        if "loss" in entry and logged < step <= first_step:
            earlier, logged = earlier + entry["loss"] * (step - logged), step
    # Steps after the last logged one before the checkpoint count at the mean of those logged.
    before = earlier / logged * first_step if logged else 0.0
    later = logs["train_loss"] * (state.global_step - first_step)
    return {**logs, "train_loss": (before + later) / state.global_step}


def score_evaluations(
    trainer: Any,
    rows: list[dict[str, Any]],
    *,
    system_prompt: str | None,
    reward: RewardSpec,
    max_new_tokens: int | None = None,
    names: Mapping[str, str] | None = None,
) -> None:
    """Make every evaluation of ``trainer`` (at ``eval_steps``, at the end, or a call of
    ``trainer.evaluate()``) also score its model on ``rows`` with ``reward``, as GRPO's
    evaluation and ``aworld-train eval`` score the test set: one greedy completion per row
    (:func:`~aworld_train.evaluation.generate_and_score`).

    The evaluation's own metrics (``eval_loss``) stay; ``eval_reward`` (the weighted total) and
    ``eval_<name>`` per reward function join them in the same log entry. Rank 0 scores (the
    other processes wait for it at the next step's collectives); a trainer under ZeRO-3 or
    FSDP, whose weights are sharded, cannot generate on one rank.

    :param trainer: a ``transformers.Trainer``; its ``evaluation_loop`` is wrapped.
    :param rows: canonical test rows (``prompt``, ``ground_truth``, ``data_source``,
        ``extra_info``), already cut to ``eval_limit``.
    :param system_prompt: the agent's system prompt, as training renders it.
    :param max_new_tokens: the completion budget; ``None`` takes ``aworld-train eval``'s.
    :param names: the metric name of each reward function where an engine logs another than
        the function's own (``eval_<name>``).
    """
    from aworld_train.agent import AgentSpec
    from aworld_train.evaluation import DEFAULT_MAX_NEW_TOKENS, generate_and_score

    agent = AgentSpec(system_prompt=system_prompt)
    renamed = dict(names or {})
    loop = trainer.evaluation_loop

    def evaluation_loop(*args: Any, **kwargs: Any) -> Any:
        output = loop(*args, **kwargs)
        if not trainer.is_world_process_zero():
            return output
        # evaluate() logs output.metrics right after this loop: the scores join that entry.
        prefix = kwargs.get("metric_key_prefix", "eval")
        tokenizer = getattr(trainer, "processing_class", None) or trainer.tokenizer
        result = generate_and_score(
            trainer.model,
            tokenizer,
            rows,
            agent=agent,
            reward=reward,
            max_new_tokens=max_new_tokens or DEFAULT_MAX_NEW_TOKENS,
        )
        output.metrics[f"{prefix}_reward"] = result.mean_reward
        for name, value in result.rewards.items():
            output.metrics[f"{prefix}_{renamed.get(name, name)}"] = value
        return output

    trainer.evaluation_loop = evaluation_loop


def resume_checkpoint(run_dir: Path) -> Path:
    """The checkpoint a run resumes from: :func:`last_checkpoint` of ``run_dir/checkpoints``.

    :raises RunDirectoryError: when the earlier run left no checkpoint.
    """
    folder = Path(run_dir) / CHECKPOINTS
    checkpoint = last_checkpoint(folder)
    partial = ", ".join(str(path) for path in cut_short(folder))
    if checkpoint is None:
        unfinished = f" ({partial} was cut short while being saved)" if partial else ""
        raise RunDirectoryError(
            f"run {run_dir} has no checkpoint to resume from ({CHECKPOINTS}/checkpoint-N)"
            f"{unfinished}: set save_steps so runs save checkpoints, or start a new run"
        )
    if partial:
        logger.warning(
            "%s was cut short while being saved (it has no trainer_state.json): resuming from "
            "%s, the last whole checkpoint",
            partial,
            checkpoint,
        )
    return checkpoint


def replay_shuffles(trainer: Any) -> None:
    """Make the shuffles of ``trainer``'s training sampler a function of the epoch, so that a
    resumed run draws the order an uninterrupted run would have.

    A sampler that shuffles with a generator of its own (TRL's ``RepeatSampler``, which GRPO
    trainers use, ms-swift's included) draws each epoch's order from it, and its state is not
    in a checkpoint: a run resumed in epoch ``k`` starts that generator afresh and shuffles
    epoch ``k`` as the first one was. Here, each time the trainer sets the epoch, the generator
    goes back to its seeded state and replays the draws of the epochs before (one pass of the
    sampler each); in a run that never stopped, that is the state it had anyway.

    :param trainer: a ``transformers.Trainer``; its ``_get_train_sampler`` is wrapped. A
        sampler without a ``torch.Generator``, or with an epoch of its own, is left alone.
    """
    import torch

    make = trainer._get_train_sampler

    def train_sampler(*args: Any, **kwargs: Any) -> Any:
        sampler = make(*args, **kwargs)
        generator = getattr(sampler, "generator", None)
        if not isinstance(generator, torch.Generator) or hasattr(sampler, "set_epoch"):
            return sampler
        seeded = generator.get_state()

        def set_epoch(epoch: int) -> None:
            generator.set_state(seeded)
            for _ in range(epoch):
                next(iter(sampler), None)  # a pass draws its order as it starts

        sampler.set_epoch = set_epoch  # accelerate's data loader calls it each epoch
        return sampler

    trainer._get_train_sampler = train_sampler


def policy_model(agent: AgentSpec, config: TrainConfig) -> str:
    """The model the job trains: the one the core checked and set in both ``config.model`` and
    ``agent.model``.

    :raises AgentError: when neither the agent nor the config names one.
    """
    model = config.model or agent.model
    if not model:
        raise AgentError(
            f"agent '{agent.name}' names no model: set `model` in the agent or in the config "
            "(a local model folder or a hub id)"
        )
    return str(model)


def completion_text(completion: Any) -> str:
    """The text of one completion: a string, one message, or the assistant messages of a
    conversation (the forms TRL and ms-swift hand a reward)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    return "".join(
        str(message.get("content") or "")
        for message in completion
        if message.get("role", "assistant") == "assistant"
    )


_Config = TypeVar("_Config", bound="TrainerConfig")


@dataclass(kw_only=True)
class TrainerConfig:
    """The resolved config of a trainer engine: its trainer's arguments and how many processes
    train. An engine subclasses it with fields of its own.

    :ivar algorithm: what the engine trains (``grpo``, ``sft``, ...).
    :ivar arguments: keyword arguments of the trainer's argument class for ``algorithm``, plain
        data (they travel to worker processes as JSON).
    :ivar nproc_per_node: training processes per node (GPUs, or CPU processes without GPUs).
    :ivar nnodes: the number of machines.
    """

    algorithm: str
    arguments: dict[str, Any]
    nproc_per_node: int = 1
    nnodes: int = 1

    def with_arguments(self: _Config, arguments: dict[str, Any]) -> _Config:
        """This config with other trainer arguments (an engine's subclass kept)."""
        return dataclasses.replace(self, arguments=arguments)

    @property
    def world_size(self) -> int:
        """The number of training processes on all nodes."""
        return self.nproc_per_node * self.nnodes

    @property
    def distributed(self) -> bool:
        """Whether training runs in several processes."""
        return self.world_size > 1


def arguments_class(classes: Mapping[str, str], algorithm: str) -> type:
    """The trainer's argument dataclass for ``algorithm`` (importing the trainer's library).

    :param classes: each algorithm the engine trains, with its argument class as
        ``module:Class``.
    """
    module, name = classes[algorithm].split(":")
    return getattr(importlib.import_module(module), name)


@functools.cache
def argument_names(cls: type) -> frozenset[str]:
    """The fields of a trainer's argument dataclass a caller may pass (its ``__init__``'s)."""
    return frozenset(item.name for item in dataclasses.fields(cls) if item.init)


def all_argument_names(
    library: str,
    classes: Mapping[str, str],
    quiet: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> frozenset[str]:
    """The arguments of every class in ``classes`` (see :func:`arguments_class`): what a trainer
    engine's section keys (:class:`~aworld_train.job.config.ConfigLayout`) are made of.

    Reading them imports the trainer's library (seconds); they depend only on what is installed,
    so they are kept in the disk cache once per installed version of ``library``.

    :param quiet: a context manager that keeps the library's import-time output off the
        terminal; entered only when the names are read, not when the cache has them.
    """

    def make() -> str:
        with quiet():
            names = set().union(
                *(argument_names(arguments_class(classes, algorithm)) for algorithm in classes)
            )
        return json.dumps(sorted(names))

    def valid(text: str) -> bool:
        try:
            names = json.loads(text)
        except ValueError:
            return False
        return isinstance(names, list) and all(isinstance(name, str) for name in names)

    key = [library, installed_versions(library).get(library), sorted(classes.items())]
    return frozenset(json.loads(cached("section-keys.json", make, valid, key=key)))


def merge_adapter(
    base_model: str, adapter: Path, target: Path, *, trust_remote_code: bool = False
) -> None:
    """Merge a LoRA adapter into its base model and save a plain Hugging Face folder (weights,
    config, tokenizer with its chat template) that loads without peft.

    The tokenizer is the adapter folder's when it holds one (the trainer saved the one it
    trained with), else the base model's. The folder is written beside ``target`` and renamed
    into place, so ``target`` never holds half a model; an existing ``target`` is replaced.

    :param base_model: the model the adapter was trained on (a folder or hub id).
    :param adapter: the PEFT adapter folder (``adapter_config.json`` and its weights).
    :param target: the folder to write, usually ``<run>/model``.
    :raises TrainingError: when peft is not installed or the adapter folder holds no adapter.
    """
    import shutil

    from aworld_train.errors import TrainingError

    adapter, target = Path(adapter), Path(target)
    if not (adapter / "adapter_config.json").is_file():
        raise TrainingError(f"no LoRA adapter to merge in {adapter}: it has no adapter_config.json")
    try:
        from peft import PeftModel
    except ImportError:
        raise TrainingError("merging the LoRA adapter needs peft: pip install peft") from None
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The base's own dtype: the merged weights keep the precision the model ships in.
    model = AutoModelForCausalLM.from_pretrained(
        base_model, dtype="auto", trust_remote_code=trust_remote_code
    )
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    has_tokenizer = (adapter / "tokenizer_config.json").is_file()
    tokenizer = AutoTokenizer.from_pretrained(
        str(adapter) if has_tokenizer else base_model, trust_remote_code=trust_remote_code
    )
    partial = target.with_name(f"{target.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    merged.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
