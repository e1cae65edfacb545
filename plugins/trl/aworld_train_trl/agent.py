"""check_agent: the agent spec becomes the policy model, its system prompt and sampling settings.

A prompt without tools is TRL's own single-turn GRPO (or SFT). Every other agent, an AWorld
agent, a Python agent, or the spec form with tools, runs as it is through the core's agent
runtime, one episode per completion (:mod:`aworld_train_trl.rollout`).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aworld_train.engine import AgentError
from aworld_train.engine.runtime import load_tokenizer
from aworld_train.engine import policy_model

if TYPE_CHECKING:
    from aworld_train.engine import AgentSpec, ToolSet, TrainConfig


@dataclass
class TrlAgent:
    """What TRL needs of the agent.

    :ivar model: a local model folder (absolute) or a hub id.
    :ivar system_prompt: prepended as a system message to every prompt, or ``None`` (an agent
        the runtime runs writes its own messages).
    :ivar conversational: whether the model's tokenizer has a chat template, so prompts are
        given to TRL as chat messages.
    :ivar temperature: sampling temperature for GRPO generation, or ``None`` for TRL's default.
    :ivar top_p: nucleus sampling threshold, or ``None``.
    :ivar max_tokens: the most tokens one completion may have, or ``None``.
    :ivar max_turns: the most model turns per episode.
    :ivar trust_remote_code: whether the job allows code from the model folder to run (the
        job's top-level ``trust_remote_code``).
    :ivar episodes: the agent the runtime runs, one episode per completion (its own code, or
        the spec form with tools), or ``None`` for TRL's own single-turn generation.
    """

    model: str
    system_prompt: str | None = None
    conversational: bool = True
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_turns: int = 1
    trust_remote_code: bool = False
    episodes: AgentSpec | None = None


def agent_to_trl(agent: AgentSpec, config: TrainConfig, tools: ToolSet) -> TrlAgent:
    """Check what the TRL engine supports of ``agent`` and resolve its model.

    The config's ``model`` and the agent's are the same: the core checked that they agree. The
    core has already checked a local folder (config, weights, tokenizer) and the form of a hub
    id; nothing is downloaded here. An agent the runtime runs needs the model's chat template;
    with tools, one that renders tool calls and their results.

    :param tools: the agent's resolved tools (empty without tools).
    :raises AgentError: for a missing or unusable model, or a feature TRL cannot train (an
        agent with tools or code of its own with SFT, a chat template that cannot render what
        the agent sends, several turns of a prompt without tools).
    """
    runs_episodes = agent.runs_itself or bool(tools)
    if runs_episodes and config.algorithm != "grpo":
        what = f"{agent.form} code" if agent.runs_itself else "an agent with tools"
        raise AgentError(
            f"agent '{agent.name}' is {what}, which the trl engine trains with GRPO only (each "
            f"episode runs the agent): set algorithm: grpo, not {config.algorithm}"
        )
    agent.check_turns("trl", calls_tools=bool(tools), runs_episodes=runs_episodes)
    model = policy_model(agent, config)
    folder = Path(model)
    conversational = _has_chat_template(folder) if folder.is_dir() else True
    if runs_episodes and not conversational:
        raise AgentError(
            f"agent '{agent.name}' talks to its model in chat messages but model "
            f"{model} has no chat template to render them"
        )
    if tools and folder.is_dir():
        _check_tool_template(agent.name, model, config.trust_remote_code)
    return TrlAgent(
        model=model,
        system_prompt=None if agent.runs_itself else (agent.system_prompt or None),
        conversational=conversational,
        temperature=agent.llm_temperature,
        top_p=agent.llm_top_p,
        max_tokens=agent.llm_max_tokens,
        max_turns=agent.max_turns,
        trust_remote_code=config.trust_remote_code,
        episodes=agent if runs_episodes else None,
    )


def _check_tool_template(name: str, model: str, trust_remote_code: bool) -> None:
    """The chat template of ``model`` renders an assistant's tool call and the tool's result,
    which the runtime sends it between turns."""
    from trl import chat_template_utils

    # The core's tokenizer is shared: the check works on its own copy.
    tokenizer = copy.deepcopy(load_tokenizer(model, trust_remote_code))
    if not chat_template_utils.supports_tool_calling(tokenizer):
        raise AgentError(
            f"agent '{name}' uses tools but the chat template of {model} cannot render a tool "
            "call and its result (assistant tool_calls, then a tool message): use a "
            "tool-calling model such as Qwen3"
        )


def _has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    config_file = folder / "tokenizer_config.json"
    if not config_file.is_file():
        return False
    try:
        return bool(json.loads(config_file.read_text(encoding="utf-8")).get("chat_template"))
    except (OSError, ValueError):
        return False
