"""``TrainerProcessor``: the AWorld Train way to write an engine, as a class.

A subclass registered with ``AgentTrainer.register_processor(name, cls)`` or published under
the entry-point group ``aworld_train.engines`` becomes a pluggy plugin through
:class:`ProcessorPlugin`, so it goes through the same plugin manager as a hook module.
Code written for AWorld Train's ``TrainerProcessor`` works after changing only its imports.
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from aworld_train.config import ConfigLayout
from aworld_train.hookspecs import hookimpl

if TYPE_CHECKING:
    from aworld_train.context import RunContext


class TrainerProcessor(abc.ABC):
    """Base class of an engine written as a class.

    Each ``check_*`` method receives what the user passed, as AWorld Train hands it: the AWorld
    ``Agent`` (or agent mapping, or file), the dataset path (absolute) or object, the reward
    callable or reference, the config path (absolute) or mapping, or ``None`` for what the user
    did not give (the processor decides whether it needs it). The core has run its own checks
    on each first. Each returns the engine-ready form or ``None``. ``self.run_path`` is the run
    directory; ``self.context`` is the :class:`~aworld_train.context.RunContext` once the
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

    # Each check hands the processor the user's own input (ctx.given), not the core's form.
    @hookimpl
    def check_agent(self, ctx: RunContext) -> Any:
        self.processor.context = ctx
        return self.processor.check_agent(agent=ctx.given.agent)

    @hookimpl
    def check_dataset(self, ctx: RunContext) -> Any:
        return self.processor.check_dataset(dataset=ctx.given.train_dataset,
                                            test_dataset=ctx.given.test_dataset)

    @hookimpl
    def check_reward(self, ctx: RunContext) -> Any:
        return self.processor.check_reward(reward_func=ctx.given.reward)

    @hookimpl
    def check_config(self, ctx: RunContext) -> Any:
        return self.processor.check_config(config=ctx.given.config)

    @hookimpl
    def train(self, ctx: RunContext) -> Any:
        self.processor.mark_initialized()
        result = self.processor.train()
        return result if isinstance(result, dict) else None
