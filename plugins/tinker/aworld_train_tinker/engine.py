"""The hook implementations of the ``tinker`` engine.

Each hook hands its work to a submodule imported on call, so loading this module (which the core
does for ``aworld-train engines --check``) costs nothing heavy; the Tinker SDK is imported only
when training starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aworld_train.engine as sdk
from aworld_train.engine import (
    AgentError,
    DatasetError,
    RewardError,
    hookimpl,
    installed_versions,
    resume_checkpoint,
)
from aworld_train_tinker.declaration import SETTINGS as SETTINGS  # the core reads it here

if TYPE_CHECKING:
    from datasets import Dataset

    from aworld_train_tinker.config import TinkerJob


@hookimpl
def check_agent(agent: sdk.AgentSpec, tools: sdk.ToolSet, config: sdk.TrainConfig) -> sdk.AgentSpec:
    from aworld_train_tinker.sampling import uses_runtime

    if config.algorithm == "sft" and uses_runtime(agent, tools):
        raise AgentError(
            f"agent '{agent.name}': SFT trains on the rows' answers; an agent with tools, turns "
            "or code of its own trains with algorithm grpo"
        )
    return agent


@hookimpl
def check_dataset(train_dataset: Dataset | None) -> list[dict[str, Any]]:
    if train_dataset is None:
        raise DatasetError("no train_dataset: the tinker engine trains on the job's prompts")
    return [dict(row) for row in train_dataset]


@hookimpl
def check_reward(reward: sdk.RewardSpec | None, config: sdk.TrainConfig) -> sdk.RewardSpec | None:
    if reward is None and config.algorithm == "grpo":
        raise RewardError("no reward: GRPO scores every completion; set the job's `reward`")
    if reward is not None:
        for function in reward.functions:
            if function.engine is not None:
                raise RewardError(
                    f"reward '{function.name}' is the {function.engine} engine's own; the tinker "
                    "engine scores with the job's functions"
                )
    return reward


@hookimpl
def check_config(config: sdk.TrainConfig, agent: sdk.AgentSpec, ctx: sdk.RunContext) -> TinkerJob:
    from aworld_train_tinker.config import read_section, resolve
    from aworld_train_tinker.service import check_service
    from aworld_train_tinker.tokenizer import check_tokenizer

    if ctx.resume_from is not None:
        resume_checkpoint(ctx.resume_from)  # a run without checkpoints fails now
    section = read_section(config.engine_section())
    job = resolve(config, section, agent.llm_temperature, ctx.given.config)
    check_tokenizer(config.model, job.base_model, config.trust_remote_code)
    check_service(job)
    return job


@hookimpl
def effective_settings(engine_config: TinkerJob) -> list[sdk.Setting]:
    return list(engine_config.settings)


@hookimpl
def train(
    agent: sdk.AgentSpec,
    dataset: list[dict[str, Any]],
    reward: sdk.RewardSpec | None,
    engine_config: TinkerJob,
    ctx: sdk.RunContext,
) -> dict[str, Any]:
    from aworld_train.engine.runtime import load_tokenizer

    from aworld_train_tinker.training import run_training

    tokenizer = load_tokenizer(agent.model or engine_config.base_model)
    return run_training(agent, ctx.tools, dataset, reward, engine_config, ctx, tokenizer)


@hookimpl
def engine_versions() -> dict[str, str]:
    return installed_versions("tinker")


@hookimpl
def trains_segments() -> bool:
    # Each segment of an episode the agent rewrote is a datum with the episode's advantage
    # (aworld_train_tinker.grpo).
    return True
