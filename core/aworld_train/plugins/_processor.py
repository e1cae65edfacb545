"""``TrainerProcessor``: the AWorld Train way to write an engine, as a class.

A subclass registered with ``AgentTrainer.register_processor(name, cls)`` or published under
the entry-point group ``aworld_train.engines`` becomes a pluggy plugin through
:class:`ProcessorPlugin`, so it goes through the same plugin manager as a hook module.
Code written for AWorld Train's ``TrainerProcessor`` works after changing only its imports.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.job.config import ConfigLayout
from aworld_train.plugins.hookspecs import hookimpl

if TYPE_CHECKING:
    import datasets

    from aworld_train.plugins.context import RunContext
    from aworld_train.reward import RewardSpec

#: The folder of the run directory that holds the canonical copies of the job's dataset files
#: a processor receives when the job maps ``columns``.
CANONICAL_DATASETS = "dataset"


class TrainerProcessor(abc.ABC):
    """Base class of an engine written as a class.

    Each ``check_*`` method receives what the user passed, as AWorld Train hands it: the AWorld
    ``Agent`` (or agent mapping, or file), the dataset path (absolute) or object, the reward
    callable, the config path (absolute) or mapping, or ``None`` for what the user did not give
    (the processor decides whether it needs it). What is given as text (a job file holds
    nothing else) comes as the job means it: a dataset path with the job's ``columns`` as the
    path of a canonical copy in the run directory, a reward reference or built-in name as the
    callable the core loaded. Objects stay the user's own. The core has run its own checks on
    each first. Each returns the engine-ready form or ``None``. ``self.run_path`` is the run
    directory; ``self.context`` is the :class:`~aworld_train.plugins.context.RunContext` once the
    checks start (``ctx.config`` holds the core's validated config, ``ctx.given`` what the
    methods receive).

    A processor owns its config format: every top-level config key the core does not know
    belongs to it, so a whole engine config file (a VeRL one, say) is given as ``config``.
    """

    def __init__(self, run_path: str) -> None:
        self.run_path = run_path
        self.context: RunContext | None = None
        self._initialized = False

    @abc.abstractmethod
    def train(self) -> Any:
        """Train with what the checks prepared."""

    @abc.abstractmethod
    def check_agent(self, agent: Any) -> Any:
        """Check the agent and return the engine's form of it (or ``None``)."""

    @abc.abstractmethod
    def check_dataset(self, dataset: Any, test_dataset: Any = None) -> Any:
        """Check the datasets and return the engine's form of them (or ``None``)."""

    @abc.abstractmethod
    def check_reward(self, reward_func: Any) -> Any:
        """Check the reward and return the engine's form of it (or ``None``)."""

    @abc.abstractmethod
    def check_config(self, config: Any) -> Any:
        """Check the config and return the engine's resolved config (or ``None``)."""

    @property
    def initialized(self) -> bool:
        return self._initialized

    @initialized.setter
    def initialized(self, value: bool) -> None:
        self._initialized = value

    def mark_initialized(self) -> None:
        self._initialized = True


class ProcessorPlugin:
    """The pluggy plugin that drives one ``TrainerProcessor`` instance through the hooks."""

    def __init__(self, processor: TrainerProcessor) -> None:
        self.processor = processor

    @hookimpl
    def config_layout(self) -> ConfigLayout:
        return ConfigLayout(takes_any=True)

    # Each check hands the processor the user's own input (ctx.given), not the core's form,
    # except what was given as text: that comes as the job means it (see the class docstring).
    @hookimpl
    def check_agent(self, ctx: RunContext) -> Any:
        self.processor.context = ctx
        return self.processor.check_agent(agent=ctx.given.agent)

    @hookimpl
    def check_dataset(
        self,
        train_dataset: datasets.Dataset | None,
        test_dataset: datasets.Dataset | None,
        ctx: RunContext,
    ) -> Any:
        return self.processor.check_dataset(
            dataset=_meant_dataset(ctx, ctx.given.train_dataset, train_dataset, "train"),
            test_dataset=_meant_dataset(ctx, ctx.given.test_dataset, test_dataset, "test"),
        )

    @hookimpl
    def check_reward(self, reward: RewardSpec | None, ctx: RunContext) -> Any:
        return self.processor.check_reward(reward_func=_meant_reward(ctx.given.reward, reward))

    @hookimpl
    def check_config(self, ctx: RunContext) -> Any:
        return self.processor.check_config(config=ctx.given.config)

    @hookimpl
    def train(self, ctx: RunContext) -> Any:
        self.processor.mark_initialized()
        result = self.processor.train()
        return result if isinstance(result, dict) else None


def _meant_dataset(ctx: RunContext, given: Any, loaded: datasets.Dataset | None, name: str) -> Any:
    """The dataset as the processor receives it: a path given with ``columns`` becomes the
    path of the core's canonical rows written to the run directory (a processor reads files,
    and the user's file lacks the mapped names); anything else as the user gave it."""
    from aworld_train.dataset.loading import write_canonical

    if not isinstance(given, (str, Path)) or not ctx.given.columns or loaded is None:
        return given
    return str(write_canonical(loaded, ctx.run_dir / CANONICAL_DATASETS, name, given))


def _meant_reward(given: Any, loaded: RewardSpec | None) -> Any:
    """The reward as the processor receives it: one given by text (a reference, a built-in
    name, anywhere in a list or ``{name, weight}``) becomes the callable the core loaded (the
    function itself when it is one with weight 1, else the spec, which returns the weighted
    total); callables given from Python stay the user's own."""
    if loaded is None or not _names_by_text(given):
        return given
    if len(loaded.functions) == 1 and loaded.functions[0].weight == 1.0:
        return loaded.functions[0].fn
    return loaded


def _names_by_text(reward: Any) -> bool:
    """Whether a reward as given names any function by text rather than as a callable."""
    if isinstance(reward, (str, Path)):
        return True
    if isinstance(reward, list):
        return any(_names_by_text(item) for item in reward)
    if isinstance(reward, dict):
        return _names_by_text(reward.get("name"))
    return False
