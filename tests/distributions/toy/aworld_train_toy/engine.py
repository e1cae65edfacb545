"""The hook implementations of the ``toy`` engine; the work is in :mod:`aworld_train_toy.policy`."""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING, Any

from aworld_train import hookimpl
from aworld_train.errors import AgentError

if TYPE_CHECKING:
    import datasets
    from aworld_train.agent import AgentSpec
    from aworld_train.job.config import TrainConfig
    from aworld_train.plugins.context import RunContext
    from aworld_train.reward import RewardSpec

    from aworld_train_toy.policy import ToyReward, ToySettings


@hookimpl
def check_agent(agent: AgentSpec, ctx: RunContext) -> None:
    if agent.uses_tools or agent.max_turns > 1:
        raise AgentError(
            f"agent '{agent.name}': the {ctx.engine} engine answers in one turn without tools; "
            "remove tools, mcp_servers and max_turns"
        )
    return None


@hookimpl
def check_dataset(
    train_dataset: datasets.Dataset, test_dataset: datasets.Dataset | None, ctx: RunContext
) -> dict[str, list[Any]]:
    from aworld_train_toy.policy import to_examples

    return {
        "train": to_examples(train_dataset),
        "test": to_examples(test_dataset) if test_dataset is not None else [],
    }


@hookimpl
def check_reward(reward: RewardSpec, ctx: RunContext) -> ToyReward:
    from aworld_train_toy.policy import ToyReward

    return ToyReward(reward)


@hookimpl
def check_config(config: TrainConfig, dataset: dict[str, Any], ctx: RunContext) -> ToySettings:
    from aworld_train_toy.policy import settings_from_config

    return settings_from_config(config, ctx.engine, dataset["train"])


@hookimpl
def train(
    dataset: dict[str, Any], reward: ToyReward, engine_config: ToySettings, ctx: RunContext
) -> dict[str, Any]:
    from aworld_train_toy.policy import train_policy

    return train_policy(engine_config, dataset["train"], reward, ctx)


@hookimpl
def engine_versions() -> dict[str, str]:
    # The toy engine's "library" is the Python standard library.
    return {"python": platform.python_version()}
