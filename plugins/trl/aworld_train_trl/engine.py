"""The hook implementations of the ``trl`` engine.

Each hook hands its work to a submodule imported on call, so loading this module (which the core
does for ``aworld-train engines --check``) costs nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aworld_train.engine as sdk
from aworld_train.engine import ConfigLayout, hookimpl, installed_versions, resume_checkpoint
from aworld_train_trl.settings import SETTINGS as SETTINGS  # the core reads it here

if TYPE_CHECKING:
    from datasets import Dataset

    from aworld_train_trl.agent import TrlAgent
    from aworld_train_trl.config import TrlConfig
    from aworld_train_trl.dataset import TrlDatasets
    from aworld_train_trl.reward import TrlReward


@hookimpl
def config_layout() -> ConfigLayout:
    """How a TRL config file (``trl grpo --config``) looks: trainer config fields and
    ``model_name_or_path`` at its top level."""
    from aworld_train_trl.config import MODEL_KEY, section_keys

    return ConfigLayout(section_keys=section_keys(), model_key=MODEL_KEY)


@hookimpl
def check_agent(agent: sdk.AgentSpec, config: sdk.TrainConfig, tools: sdk.ToolSet) -> TrlAgent:
    from aworld_train_trl.agent import agent_to_trl

    return agent_to_trl(agent, config, tools)


@hookimpl
def check_dataset(
    train_dataset: Dataset | None,
    test_dataset: Dataset | None,
    agent: TrlAgent,
    config: sdk.TrainConfig,
) -> TrlDatasets:
    from aworld_train_trl.dataset import datasets_to_trl

    return datasets_to_trl(
        train_dataset, test_dataset, agent, config.algorithm, eval_limit=config.eval_limit
    )


@hookimpl
def check_reward(reward: sdk.RewardSpec | None) -> TrlReward | None:
    from aworld_train_trl.reward import reward_to_trl

    return reward_to_trl(reward)


@hookimpl
def check_config(
    config: sdk.TrainConfig,
    agent: TrlAgent,
    dataset: TrlDatasets,
    reward: TrlReward | None,
    ctx: sdk.RunContext,
) -> TrlConfig:
    from aworld_train_trl.config import check_completion_room, config_to_trl

    if ctx.resume_from is not None:
        resume_checkpoint(ctx.resume_from)  # a run without checkpoints fails now, not after loading
    resolved = config_to_trl(
        config,
        agent,
        ctx.run_dir,
        ctx.logger,
        has_test=dataset.test is not None,
        reward_names=[]
        if reward is None
        else [function.name for function in reward.spec.functions],
    )
    check_completion_room(resolved, agent, dataset, config, ctx.tools.schemas())
    return resolved


@hookimpl
def effective_settings(engine_config: TrlConfig) -> list[sdk.Setting]:
    """The table ``check_config`` resolved: one row per common name, TRL's key and value."""
    return list(engine_config.settings)


@hookimpl
def memory_plan(
    engine_config: TrlConfig, default: sdk.MemoryPlan, ctx: sdk.RunContext
) -> sdk.MemoryPlan:
    """What one training process holds on its GPU, from TRL's resolved arguments."""
    from aworld_train_trl.memory import trl_memory_plan

    return trl_memory_plan(engine_config, default, ctx.config)


@hookimpl
def train(
    agent: TrlAgent,
    dataset: TrlDatasets,
    reward: TrlReward | None,
    engine_config: TrlConfig,
    ctx: sdk.RunContext,
) -> dict[str, Any]:
    from aworld_train_trl.training import run_training

    return run_training(agent, dataset, reward, engine_config, ctx)


@hookimpl
def resume_support() -> str:
    # The checkpoint holds the weights, the optimizer, the scheduler and every random state;
    # the sampler's shuffles are replayed (replay_shuffles): a resumed run is the same run.
    return "exact"


@hookimpl
def engine_versions() -> dict[str, str]:
    return installed_versions("trl", "transformers", "accelerate", "torch")


@hookimpl
def trains_segments() -> bool:
    # An episode's segments become rows of TRL's batch, each with the episode's advantage
    # (aworld_train_trl.segments).
    return True
