"""The hook implementations of the ``swift`` engine.

Each hook hands its work to a submodule imported on call, so loading this module (which the core
does for ``aworld-train engines --check``) imports nothing heavy. While a check hook runs,
ms-swift's log lines and warnings go to the run's ``swift.log``: the terminal shows the check
table and, for a bad job, one error line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aworld_train.engine as sdk
from aworld_train.engine import ConfigLayout, hookimpl, installed_versions
from aworld_train_swift.declaration import SETTINGS as SETTINGS  # the core reads it here

if TYPE_CHECKING:
    from datasets import Dataset

    from aworld_train_swift.agent import SwiftAgent
    from aworld_train_swift.config import SwiftConfig
    from aworld_train_swift.dataset import SwiftDatasets
    from aworld_train_swift.reward import SwiftReward


@hookimpl
def config_layout() -> ConfigLayout:
    """How an ms-swift config file looks: swift's arguments at its top level, ``model`` naming
    the model."""
    from aworld_train_swift.schema import MODEL_KEY, section_keys

    return ConfigLayout(section_keys=section_keys(), model_key=MODEL_KEY)


@hookimpl
def check_agent(
    agent: sdk.AgentSpec, config: sdk.TrainConfig, tools: sdk.ToolSet, ctx: sdk.RunContext
) -> SwiftAgent:
    from aworld_train_swift.agent import agent_to_swift
    from aworld_train_swift.logs import run_log

    with run_log(ctx.run_dir):
        return agent_to_swift(agent, config, tools)


@hookimpl
def check_dataset(
    train_dataset: Dataset | None,
    test_dataset: Dataset | None,
    agent: SwiftAgent,
    config: sdk.TrainConfig,
    ctx: sdk.RunContext,
) -> SwiftDatasets:
    from aworld_train_swift.dataset import datasets_to_swift

    # An agent run by the agent runtime gets each row with its prompt as the job gave it.
    keep_prompt = getattr(agent, "runtime", None) is not None
    return datasets_to_swift(
        train_dataset,
        test_dataset,
        config.algorithm,
        ctx.run_dir,
        config.eval_limit,
        keep_prompt=keep_prompt,
    )


@hookimpl
def check_reward(
    reward: sdk.RewardSpec | None, config: sdk.TrainConfig, ctx: sdk.RunContext
) -> Any:
    from aworld_train_swift.logs import run_log
    from aworld_train_swift.reward import reward_to_swift

    with run_log(ctx.run_dir):
        return reward_to_swift(reward, config.algorithm, config.engine_section())


@hookimpl
def check_config(
    config: sdk.TrainConfig,
    agent: SwiftAgent,
    dataset: SwiftDatasets | None,
    reward: SwiftReward | None,
    ctx: sdk.RunContext,
) -> SwiftConfig:
    from aworld_train_swift.config import config_to_swift
    from aworld_train_swift.lengths import check_swift_lengths
    from aworld_train_swift.logs import run_log

    with run_log(ctx.run_dir):
        resolved = config_to_swift(config, agent, dataset, reward, ctx.run_dir)
        check_swift_lengths(resolved, agent, dataset, config, ctx.tools.schemas())
        return resolved


@hookimpl
def effective_settings(engine_config: SwiftConfig, ctx: sdk.RunContext) -> list[sdk.Setting]:
    """The common settings as ms-swift will train them, read from its arguments."""
    from aworld_train_swift.schema import validate_section
    from aworld_train_swift.settings import effective_settings as settings

    section = validate_section(ctx.config.engine_section(), ctx.config.algorithm)
    return settings(ctx.config, engine_config.arguments, section)


@hookimpl
def memory_plan(
    engine_config: SwiftConfig, default: sdk.MemoryPlan, ctx: sdk.RunContext
) -> sdk.MemoryPlan:
    """What one training process holds on its GPU, from swift's arguments."""
    from aworld_train_swift.memory import swift_memory_plan

    return swift_memory_plan(engine_config, default, ctx.config)


@hookimpl
def train(
    agent: SwiftAgent, reward: SwiftReward | None, engine_config: SwiftConfig, ctx: sdk.RunContext
) -> dict[str, Any]:
    from aworld_train_swift.training import run_training

    return run_training(engine_config, reward, ctx, agent)


@hookimpl
def resume_support() -> str:
    # The checkpoint holds the weights, the optimizer, the scheduler and every random state;
    # the sampler's shuffles are replayed (replay_shuffles): a resumed run is the same run.
    return "exact"


@hookimpl
def engine_versions() -> dict[str, str]:
    return installed_versions("ms-swift", "transformers", "trl", "peft", "torch")
