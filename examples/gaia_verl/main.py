"""Train a GAIA-style AWorld agent with VeRL: AWorld Train's ``train_gaia_with_aworld_verl``
example, with its import changed to aworld-train.

The agent answers questions about landmarks with the tools of a local MCP server
(``server.py``) and gives its final answer in ``<answer>`` tags, which ``gaia_reward_func``
scores. The paths below are relative to this folder, as in AWorld's example: ``main()`` makes
it the working directory first, so ``python examples/gaia_verl/main.py`` works from anywhere.

Build the data and the tiny offline model first: ``python examples/gaia_verl/create_dataset.py``.
Training needs a GPU; without one every check passes and ``train()`` says why it cannot start.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from aworld.agents.llm_agent import Agent
from aworld.config import AgentConfig
from aworld_train import AgentTrainer
from reward.gaia_reward_function import gaia_reward_func

HERE = Path(__file__).resolve().parent


def build_agent() -> Agent:
    """The GAIA agent; ``job.yaml`` names this factory for the CLI."""
    mcp_config = {
        "mcpServers": {
            "gaia_tools": {
                # AWorld starts the server itself, also inside VeRL's rollout workers, whose
                # working directory is not this one: an absolute path, run by this interpreter.
                "command": sys.executable,
                "args": [str(HERE / "server.py")],
                "timeout": 60,
            }
        }
    }

    agent_config = AgentConfig(
        llm_provider="verl",
        llm_temperature=1.0,
    )

    return Agent(
        name="gaia_agent",
        desc="answers GAIA-style questions with a fact look-up and a calculator",
        system_prompt=(
            "You are a careful research assistant. Look every fact up with the look_up tool and "
            "compute with the calculate tool; never guess. When you know the answer, give it as "
            "<answer>ANSWER</answer>: a number without units, a few words, or a comma-separated list."
        ),
        mcp_config=mcp_config,
        mcp_servers=["gaia_tools"],
        conf=agent_config,
    )


def main() -> None:
    os.chdir(HERE)
    agent = build_agent()

    trainer = AgentTrainer(
        agent=agent,
        config="grpo_trainer.yaml",
        reward_func=gaia_reward_func,
        train_dataset="data/train.parquet",
        test_dataset="data/test.parquet",
        train_engine_name="verl",
    )
    trainer.train()


if __name__ == "__main__":
    from aworld_train import AWorldTrainError

    try:
        main()
    except (
        AWorldTrainError
    ) as error:  # a mistake in the job, or no GPU: one line, as the CLI says it
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
