"""check_agent: the agent spec becomes the policy model, its system prompt and sampling settings."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import (
    AgentError,
    load_tokenizer,
    policy_model,
    probe_response_template,
)

if TYPE_CHECKING:
    from aworld_train.engine import AgentSpec, ToolSet, TrainConfig

@dataclass
class TrlAgent:
    """What TRL needs of the agent.

    :ivar model: a local model folder (absolute) or a hub id.
    :ivar system_prompt: prepended as a system message to every prompt, or ``None``.
    :ivar conversational: whether the model's tokenizer has a chat template, so prompts are
        given to TRL as chat messages.
    :ivar temperature: sampling temperature for GRPO generation, or ``None`` for TRL's default.
    :ivar top_p: nucleus sampling threshold, or ``None``.
    :ivar max_tokens: the most tokens one completion may have, or ``None``.
    :ivar max_turns: the most model turns per completion; above 1 the agent has tools, which
        TRL runs between turns.
    :ivar response_template: the transformers response template that reads tool calls from the
        model's output, when neither the tokenizer nor TRL knows one for its chat template.
    :ivar trust_remote_code: whether the job allows code from the model folder to run (the
        job's top-level ``trust_remote_code``).
    :ivar runs_itself: the agent when it is the user's own code (an AWorld agent or a Python
        agent): GRPO then runs it through the agent runtime (:mod:`aworld_train_trl.rollout`).
    """

    model: str
    system_prompt: str | None = None
    conversational: bool = True
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_turns: int = 1
    response_template: dict[str, Any] | None = None
    trust_remote_code: bool = False
    runs_itself: AgentSpec | None = None


def agent_to_trl(agent: AgentSpec, config: TrainConfig, tools: ToolSet) -> TrlAgent:
    """Check what the TRL engine supports of ``agent`` and resolve its model.

    The config's ``model`` and the agent's are the same: the core checked that they agree. The core has already checked
    a local folder (config, weights, tokenizer) and the form of a hub id; nothing is downloaded
    here. With ``tools``, a local model's chat template must render tool calls and TRL must be
    able to read them back from the model's output.

    :param tools: the agent's resolved tools (empty without tools).
    :raises AgentError: for a missing or unusable model, or a feature TRL cannot train (tools
        with SFT or without a chat template that TRL parses, several turns without tools).
    """
    if agent.runs_itself:
        return _own_agent_to_trl(agent, config)
    if tools and config.algorithm == "sft":
        raise AgentError(
            f"agent '{agent.name}' uses tools, which the trl engine trains with GRPO only: "
            "set algorithm: grpo, or remove the agent's tools"
        )
    if tools and agent.max_turns < 2:
        raise AgentError(
            f"agent '{agent.name}' uses tools but has max_turns {agent.max_turns}: the model "
            "needs one turn to call a tool and another to read its result: set max_turns >= 2"
        )
    if not tools and agent.max_turns > 1:
        raise AgentError(
            f"agent '{agent.name}' has max_turns {agent.max_turns} but no tools; the trl engine "
            "runs several turns only to answer tool calls: set max_turns to 1"
        )
    model = policy_model(agent, config)
    folder = Path(model)
    conversational = _has_chat_template(folder) if folder.is_dir() else True
    response_template = None
    if tools:
        tools.as_functions()  # TRL calls tools as Python functions: refuse arguments they cannot take
        response_template = _tool_response_template(
            agent.name, model, conversational, config.trust_remote_code
        )
    return TrlAgent(
        model=model,
        system_prompt=agent.system_prompt or None,
        conversational=conversational,
        temperature=agent.llm_temperature,
        top_p=agent.llm_top_p,
        max_tokens=agent.llm_max_tokens,
        max_turns=agent.max_turns,
        response_template=response_template,
        trust_remote_code=config.trust_remote_code,
    )


def _own_agent_to_trl(agent: AgentSpec, config: TrainConfig) -> TrlAgent:
    """An AWorld or Python agent: GRPO runs it as it is, through the agent runtime, whose chat
    template renders what it sends."""
    if config.algorithm != "grpo":
        raise AgentError(
            f"agent '{agent.name}' is {agent.form} code, which the trl engine trains with GRPO "
            f"only (each episode runs the agent): set algorithm: grpo, not {config.algorithm}"
        )
    model = policy_model(agent, config)
    folder = Path(model)
    if folder.is_dir() and not _has_chat_template(folder):
        raise AgentError(f"agent '{agent.name}' calls its model with chat messages but model "
                         f"{model} has no chat template to render them")
    return TrlAgent(
        model=model,
        system_prompt=None,  # the agent writes its own messages
        temperature=agent.llm_temperature,
        top_p=agent.llm_top_p,
        max_tokens=agent.llm_max_tokens,
        max_turns=agent.max_turns,
        trust_remote_code=config.trust_remote_code,
        runs_itself=agent,
    )


def _tool_response_template(
    name: str, model: str, conversational: bool, trust_remote_code: bool
) -> dict[str, Any] | None:
    """Check that TRL can run tools with ``model``'s chat template (a local folder; a hub id is
    left to TRL at training time).

    :returns: a response template to set on the tokenizer, or ``None`` when the tokenizer has its
        own or TRL knows one for its chat template.
    """
    if not conversational:
        raise AgentError(
            f"agent '{name}' uses tools but model {model} has no chat template to render them"
        )
    if not Path(model).is_dir():
        return None
    from trl import chat_template_utils

    # The core's tokenizer is shared; this check sets response templates on its own copy.
    tokenizer = copy.deepcopy(load_tokenizer(model, trust_remote_code))
    if not chat_template_utils.supports_tool_calling(tokenizer):
        raise AgentError(
            f"agent '{name}' uses tools but the chat template of {model} cannot render a tool "
            "call and its result (assistant tool_calls, then a tool message): use a "
            "tool-calling model such as Qwen3"
        )
    if getattr(tokenizer, "response_template", None) or getattr(
        tokenizer, "response_schema", None
    ):
        return None
    try:
        chat_template_utils.add_response_schema(tokenizer)
        return None
    except ValueError:
        pass
    template = probe_response_template(tokenizer)
    if template is not None:
        return template
    raise AgentError(
        f"agent '{name}' uses tools but TRL cannot read tool calls back from the output of "
        f"{model}'s chat template: set a `response_template` in its tokenizer_config.json "
        "(transformers' response parsing) or use a model whose template TRL knows (Qwen, Llama "
        "3, ...)"
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
