"""The hook implementations of the ``swift`` engine.

Each hook hands its work to a submodule imported on call, so loading this module (which the core
does for ``aworld-train engines --check``) imports nothing heavy. While a check hook runs,
ms-swift's log lines and warnings go to the run's ``swift.log``: the terminal shows the check
table and, for a bad job, one error line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aworld_train.engine import ConfigLayout, hookimpl, installed_versions

if TYPE_CHECKING:
    import datasets

    from aworld_train.engine import AgentSpec, RewardSpec, RunContext, TrainConfig


@hookimpl
def config_layout() -> ConfigLayout:
    """How an ms-swift config file looks: swift's arguments at its top level, ``model`` naming
    the model."""
    from aworld_train_swift.schema import MODEL_KEY, section_keys

    return ConfigLayout(section_keys=section_keys(), model_key=MODEL_KEY)


@hookimpl
def check_agent(agent: AgentSpec, ctx: RunContext) -> Any:
    from aworld_train_swift.agent import agent_to_swift
    from aworld_train_swift.logs import run_log

    with run_log(ctx.run_dir):
        return agent_to_swift(agent, ctx.config)


@hookimpl
def check_dataset(
    train_dataset: datasets.Dataset | None, test_dataset: datasets.Dataset | None, ctx: RunContext
) -> Any:
    from aworld_train_swift.dataset import datasets_to_swift

    return datasets_to_swift(train_dataset, test_dataset, ctx.config.algorithm, ctx.run_dir)


@hookimpl
def check_reward(reward: RewardSpec | None, ctx: RunContext) -> Any:
    from aworld_train_swift.logs import run_log
    from aworld_train_swift.reward import reward_to_swift

    with run_log(ctx.run_dir):
        return reward_to_swift(reward, ctx.config.algorithm)


@hookimpl
def check_config(config: TrainConfig, ctx: RunContext) -> Any:
    from aworld_train_swift.config import config_to_swift
    from aworld_train_swift.logs import run_log

    with run_log(ctx.run_dir):
        return config_to_swift(
            config,
            ctx.results["agent"],
            ctx.results.get("dataset"),
            ctx.results.get("reward"),
            ctx.run_dir,
        )


@hookimpl
def train(ctx: RunContext) -> dict[str, Any] | None:
    from aworld_train_swift.training import run_training

    return run_training(ctx)


@hookimpl
def engine_versions() -> dict[str, str]:
    return installed_versions("ms-swift", "transformers", "trl", "peft", "torch")
