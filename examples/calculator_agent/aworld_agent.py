"""The calculator agent as an AWorld ``Agent``, which ``job_aworld.yaml`` trains.

Outside training the agent calls the OpenAI-compatible server its ``AgentConfig`` names; during
training the engine points it at the policy being trained instead. Needs
``pip install 'aworld-train-verl[aworld]'`` (or ``'aworld-train[aworld]'`` for TRL).
"""

import os
import sys
from pathlib import Path

from aworld.agents.llm_agent import Agent
from aworld.config.conf import AgentConfig

HERE = Path(__file__).resolve().parent


def calculator_agent() -> Agent:
    return Agent(
        name="calculator-agent",
        conf=AgentConfig(
            llm_provider="openai",
            llm_model_name="Qwen/Qwen3-0.6B",
            llm_base_url=os.environ.get("LLM_BASE_URL", "http://127.0.0.1:8000/v1"),
            llm_api_key=os.environ.get("LLM_API_KEY", "-"),
            llm_temperature=1.0,
        ),
        system_prompt=(
            "You are a careful calculator agent. Never do arithmetic in your head: call the "
            "calculator tools for every step, then give the final number as <answer>NUMBER</answer>."
        ),
        # AWorld starts the server itself: an absolute path, run by this interpreter.
        mcp_config={
            "mcpServers": {
                "calculator": {"command": sys.executable, "args": [str(HERE / "server.py")]}
            }
        },
        mcp_servers=["calculator"],
        max_loop_steps=4,
    )
