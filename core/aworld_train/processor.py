"""``TrainerProcessor``: the AWorld Train way to write an engine, as a class.

A subclass registered with ``AgentTrainer.register_processor(name, cls)`` or published under
the entry-point group ``aworld_train.engines`` becomes a pluggy plugin through
:class:`ProcessorPlugin`, so it goes through the same plugin manager as a hook module.
Code written for AWorld Train's ``TrainerProcessor`` works after changing only its imports.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from aworld_train.hookspecs import hookimpl

if TYPE_CHECKING:
    from aworld_train.context import RunContext


class TrainerProcessor(abc.ABC):
    """Base class of an engine written as a class.

    Each ``check_*`` method receives what the core resolved and validated (an ``AgentSpec``,
    ``datasets.Dataset`` objects, a callable ``RewardSpec``, a ``TrainConfig``), or ``None``
    for an agent, dataset or reward the user did not give (the processor decides whether it
    needs one), and returns the engine-ready form or ``None``. ``self.run_path`` is the run
    directory; ``self.context`` is the :class:`~aworld_train.context.RunContext` once the
    checks start.
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
    def check_agent(self, agent: Any, ctx: RunContext) -> Any:
        self.processor.context = ctx
        return self.processor.check_agent(agent=agent if ctx.agent_given else None)

    @hookimpl
    def check_dataset(self, train_dataset: Any, test_dataset: Any, ctx: RunContext) -> Any:
        return self.processor.check_dataset(dataset=train_dataset, test_dataset=test_dataset)

    @hookimpl
    def check_reward(self, reward: Any, ctx: RunContext) -> Any:
        return self.processor.check_reward(reward_func=reward)

    @hookimpl
    def check_config(self, config: Any, ctx: RunContext) -> Any:
        return self.processor.check_config(config=config)

    @hookimpl
    def train(self, ctx: RunContext) -> Any:
        self.processor.mark_initialized()
        result = self.processor.train()
        return result if isinstance(result, dict) else None
