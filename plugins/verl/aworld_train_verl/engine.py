"""The ``verl`` engine's hook implementations (entry point ``verl`` in ``aworld_train.engines``).

Every check runs VeRL's own code on the CPU: its Hydra config and ``validate_config``, its
``RLHFDataset``, its reward loader and reward manager. Training runs
``python -m verl.trainer.main_ppo`` on the saved config and needs GPUs.

This module imports nothing heavy: VeRL, Hydra, torch and datasets load inside the hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aworld_train.engine as sdk
from aworld_train.engine import (
    ConfigLayout,
    DatasetError,
    RewardError,
    hookimpl,
    installed_versions,
)
from aworld_train_verl.declaration import SETTINGS as SETTINGS  # the core reads it here

if TYPE_CHECKING:
    import datasets

    from aworld_train_verl.agent import VerlAgent
    from aworld_train_verl.config import VerlConfig
    from aworld_train_verl.dataset import VerlData
    from aworld_train_verl.reward import VerlReward


@hookimpl
def config_layout() -> ConfigLayout:
    """A whole VeRL config belongs in the ``verl:`` section: its top-level keys (read from the
    cached composed config, no VeRL import), and the policy model at ``actor_rollout_ref.model.path``."""
    from aworld_train_verl.composition import section_keys
    from aworld_train_verl.overrides import MODEL_KEY

    return ConfigLayout(section_keys=section_keys(), model_key=MODEL_KEY)


@hookimpl
def check_agent(agent: sdk.AgentSpec, config: sdk.TrainConfig, tools: sdk.ToolSet) -> VerlAgent:
    from aworld_train_verl.agent import check_agent as check

    return check(agent, config, tools)


@hookimpl
def check_dataset(
    train_dataset: datasets.Dataset | None,
    test_dataset: datasets.Dataset | None,
    agent: VerlAgent,
    config: sdk.TrainConfig,
    ctx: sdk.RunContext,
) -> VerlData:
    from aworld_train_verl import dataset as verl_dataset
    from aworld_train_verl.agent import load_tokenizer
    from aworld_train_verl.overrides import preview

    if train_dataset is None:
        raise DatasetError(
            "no train_dataset: the verl engine trains on the prompts of a dataset; set "
            "'train_dataset' in the job (a .jsonl, .json, .csv or .parquet file)"
        )
    if test_dataset is not None and config.eval_limit is not None:
        # VeRL's own val_max_samples draws a random subset while data.shuffle is on (its default).
        test_dataset = test_dataset.select(range(min(config.eval_limit, len(test_dataset))))
    composed = preview(config, ctx.run_dir, inputs=agent.overrides)
    data = verl_dataset.convert(
        train_dataset,
        test_dataset,
        tokenizer=load_tokenizer(agent.model, agent.trust_remote_code),
        data_config=composed.data,
        system_prompt=agent.system_prompt,
        folder=ctx.run_dir / "data",
        logger=ctx.logger,
        agent_name=agent.agent_name,
        tools=agent.tools.schemas() if agent.tools is not None else None,
    )
    budget = int(composed.data.max_response_length)
    verl_dataset.check_response_room(
        agent,
        {"train_dataset": train_dataset, "test_dataset": test_dataset},
        budget,
        core_budget=config.max_completion_length or agent.overrides.get("data.max_response_length"),
        origin=_budget_origin(config, budget),
    )
    return data


def _budget_origin(config: sdk.TrainConfig, budget: int) -> str:
    """Where VeRL's completion budget ``data.max_response_length`` comes from, in words."""
    from aworld_train_verl.composition import flatten
    from aworld_train_verl.overrides import SECTION

    if "data.max_response_length" in flatten(config.engine_section()):
        return f"config key '{config.engine or SECTION}.data.max_response_length' ({budget} tokens)"
    return (
        f"VeRL's default data.max_response_length ({budget} tokens; set config key "
        f"'max_completion_length' to choose)"
    )


@hookimpl
def check_reward(
    reward: sdk.RewardSpec | None,
    agent: VerlAgent,
    dataset: VerlData,
    config: sdk.TrainConfig,
    ctx: sdk.RunContext,
) -> VerlReward:
    from aworld_train_verl import reward as verl_reward
    from aworld_train_verl.agent import load_tokenizer
    from aworld_train_verl.overrides import preview

    if reward is None:
        raise RewardError(
            "no reward: the verl engine scores every rollout with a reward function; set 'reward' "
            "in the job (file.py:function, package.module:function or a built-in name)"
        )
    wired = verl_reward.wire(
        reward, ctx.run_dir, episodes=agent.agent_name is not None, vault=agent.vault
    )
    composed = preview(config, ctx.run_dir, inputs={**agent.overrides, **wired.overrides})
    verl_reward.score_with_reward_manager(
        composed,
        load_tokenizer(agent.model, agent.trust_remote_code),
        dataset.samples[:1],
        timeout=config.reward_timeout,
        environment=agent.vault.environment,
    )
    return wired


@hookimpl
def check_config(
    config: sdk.TrainConfig,
    agent: VerlAgent,
    dataset: VerlData,
    reward: VerlReward,
    ctx: sdk.RunContext,
) -> VerlConfig:
    from aworld_train_verl.agent import write_agent_loop
    from aworld_train_verl.cluster import check_cluster
    from aworld_train_verl.config import resolve
    from aworld_train_verl.launch import write_launch_script
    from aworld_train_verl.overrides import model_overrides, schedule_overrides

    inputs: dict[str, Any] = {
        **model_overrides(agent.model),
        **agent.overrides,
        **write_agent_loop(agent, ctx.run_dir),
        **dataset.overrides,
        **reward.overrides,
    }
    inputs.update(
        schedule_overrides(
            config, ctx.run_dir, inputs, dataset.rows, has_test=dataset.test_file is not None
        )
    )
    resolved = resolve(config, ctx.run_dir, inputs=inputs, vault=agent.vault)
    # A cluster named by the job is asked now whether the job fits, not when Ray places it.
    fits = check_cluster(resolved.config)
    if fits is not None:
        ctx.logger.info("%s", fits)
    write_launch_script(
        ctx.run_dir, secrets=sorted(resolved.environment), variables=resolved.variables
    )
    return resolved


@hookimpl
def effective_settings(engine_config: VerlConfig, ctx: sdk.RunContext) -> list[sdk.Setting]:
    """The common settings as the composed VeRL config holds them (no VeRL import)."""
    from aworld_train_verl.settings import effective_settings as read

    return read(engine_config.config, ctx.config)


@hookimpl
def memory_plan(engine_config: VerlConfig, default: sdk.MemoryPlan) -> sdk.MemoryPlan:
    """What one worker holds on its GPU, from the composed config."""
    from aworld_train_verl.memory import verl_memory_plan

    return verl_memory_plan(engine_config, default)


@hookimpl
def train(
    dataset: VerlData, engine_config: VerlConfig, ctx: sdk.RunContext
) -> dict[str, Any] | None:
    from aworld_train_verl.training import train as run

    return run(dataset, engine_config, ctx)


@hookimpl
def resume_support() -> str:
    """VeRL restores the weights, the optimizer, the data loader's position and each worker's
    random state, but not the rollout engine's (vLLM seeds its sampler when it starts): a
    resumed run samples other completions than the run it continues would have."""
    return "continued"


@hookimpl
def engine_versions() -> dict[str, str]:
    return installed_versions("verl", "ray", "hydra-core")
