"""check_agent: the agent spec becomes the policy model, its system prompt and sampling settings."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aworld_train.errors import AgentError

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec
    from aworld_train.config import TrainConfig

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}(/[A-Za-z0-9][\w.-]{0,95})?$")


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
    """

    model: str
    system_prompt: str | None = None
    conversational: bool = True
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None


def agent_to_trl(agent: AgentSpec, config: TrainConfig) -> TrlAgent:
    """Check what the TRL engine supports of ``agent`` and resolve its model.

    The config's ``model`` key takes precedence over the agent's. A hub id is checked for form
    only; nothing is downloaded.

    :raises AgentError: for a missing or unusable model, or a feature TRL cannot train (tools,
        MCP servers, several turns).
    """
    if agent.uses_tools:
        raise AgentError(
            f"agent '{agent.name}' uses tools or MCP servers, which the trl engine does not "
            "train yet: remove `tools`, `mcp_servers` and `mcp_config`, or choose another engine"
        )
    if agent.max_turns > 1:
        raise AgentError(
            f"agent '{agent.name}' has max_turns {agent.max_turns}; the trl engine trains "
            "single-turn agents only: set max_turns to 1"
        )
    model = config.model or agent.model
    if not model:
        raise AgentError(
            f"agent '{agent.name}' names no model: set `model` in the agent or in the config "
            "(a local model folder or a hub id)"
        )
    model, conversational = _resolve_model(str(model))
    for key, value in (("llm_temperature", agent.llm_temperature), ("llm_top_p", agent.llm_top_p)):
        if value is not None and value < 0:
            raise AgentError(f"agent '{agent.name}': {key} must be >= 0, got {value}")
    if agent.llm_max_tokens is not None and agent.llm_max_tokens < 1:
        raise AgentError(
            f"agent '{agent.name}': llm_max_tokens must be >= 1, got {agent.llm_max_tokens}"
        )
    return TrlAgent(
        model=model,
        system_prompt=agent.system_prompt or None,
        conversational=conversational,
        temperature=agent.llm_temperature,
        top_p=agent.llm_top_p,
        max_tokens=agent.llm_max_tokens,
    )


def _resolve_model(model: str) -> tuple[str, bool]:
    """Return the model as an absolute folder or a hub id, and whether it has a chat template."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        if not (folder / "config.json").is_file():
            raise AgentError(
                f"model folder {folder} has no config.json: point `model` at a folder written "
                "by save_pretrained"
            )
        return str(folder.resolve()), _has_chat_template(folder)
    looks_like_path = model.startswith((".", "/", "~")) or model.count("/") > 1 or "\\" in model
    if looks_like_path or not _HUB_ID.match(model):
        raise AgentError(
            f"model '{model}' is neither an existing folder nor a hub id of the form "
            "'organisation/name'"
        )
    return model, True


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
