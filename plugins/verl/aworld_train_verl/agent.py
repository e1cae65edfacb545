"""The policy VeRL's rollout serves: a model folder whose tokenizer has a chat template."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import AgentError

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec
    from aworld_train.config import TrainConfig


@dataclass
class VerlAgent:
    """What the rollout needs of the agent.

    :ivar model: the model folder (``actor_rollout_ref.model.path``).
    :ivar system_prompt: prepended to every prompt as a system message.
    :ivar overrides: the VeRL keys the agent's sampling settings set.
    """

    model: str
    system_prompt: str | None
    overrides: dict[str, Any]


def model_path(agent: AgentSpec | None, config: TrainConfig) -> str:
    """The policy to train: the config's ``model``, else the agent's."""
    model = config.model or (agent.model if agent is not None else None)
    if not model:
        raise AgentError("no model: set config key 'model' or the agent's 'model' to a model folder")
    return str(model)


def load_tokenizer(model: str) -> Any:
    """The model's tokenizer, loaded by VeRL's own ``hf_tokenizer`` as its workers load it.

    :raises AgentError: when the folder is missing or holds no loadable tokenizer.
    """
    if not Path(model).expanduser().is_dir():
        raise AgentError(
            f"model '{model}' is not a local folder; VeRL's check loads its tokenizer offline, "
            f"so download it first and give the folder"
        )
    from verl.utils import hf_tokenizer

    try:
        return hf_tokenizer(str(Path(model).expanduser()), trust_remote_code=False)
    except Exception as error:  # noqa: BLE001 - transformers raises many kinds here
        raise AgentError(f"model '{model}': its tokenizer does not load: {error}") from error


def check_agent(agent: AgentSpec, config: TrainConfig) -> VerlAgent:
    """Check what VeRL's single-turn rollout will use of ``agent``.

    :raises AgentError: for tools or an AWorld agent (multi-turn agent loops are not supported
        yet), a missing model, or a tokenizer without a chat template.
    """
    if agent.source is not None:
        raise AgentError(
            f"agent '{agent.name}': AWorld agents are not yet supported by the verl engine "
            f"(VeRL's multi-turn agent loop is not wired yet); give a plain agent spec"
        )
    if agent.uses_tools:
        raise AgentError(
            f"agent '{agent.name}': tools and MCP servers are not yet supported by the verl engine "
            f"(VeRL's multi-turn agent loop is not wired yet); remove them or use another engine"
        )
    model = model_path(agent, config)
    tokenizer = load_tokenizer(model)
    if not getattr(tokenizer, "chat_template", None):
        raise AgentError(
            f"model '{model}': its tokenizer has no chat template; VeRL renders every prompt "
            f"as chat messages, so add a chat_template to tokenizer_config.json"
        )
    overrides: dict[str, Any] = {}
    if agent.llm_temperature is not None:
        overrides["actor_rollout_ref.rollout.temperature"] = agent.llm_temperature
    if agent.llm_top_p is not None:
        overrides["actor_rollout_ref.rollout.top_p"] = agent.llm_top_p
    if agent.llm_max_tokens is not None and config.max_completion_length is None:
        overrides["data.max_response_length"] = agent.llm_max_tokens
    return VerlAgent(model=str(Path(model).expanduser().resolve()), system_prompt=agent.system_prompt, overrides=overrides)
