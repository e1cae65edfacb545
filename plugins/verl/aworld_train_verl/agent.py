"""The policy VeRL's rollout serves (a model folder whose tokenizer has a chat template) and, for an
agent with tools, the agent loop that runs it: :mod:`aworld_train_verl.agent_loop`, named in an
``agent_loop.yaml`` written into the run directory beside the pickled tool set it calls."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import AgentError

if TYPE_CHECKING:
    from aworld_train.agent import AgentSpec
    from aworld_train.config import TrainConfig
    from aworld_train.tools import ToolSet

#: The ``agent_name`` of the dataset rows the plugin's agent loop runs.
AGENT_LOOP_NAME = "aworld_train_agent"
AGENT_LOOP_FILE = "agent_loop.yaml"
TOOLS_FILE = "agent_tools.pkl"


@dataclass
class VerlAgent:
    """What the rollout needs of the agent.

    :ivar model: the model folder (``actor_rollout_ref.model.path``).
    :ivar system_prompt: prepended to every prompt as a system message.
    :ivar overrides: the VeRL keys the agent's sampling settings set.
    :ivar tools: the agent's tools, or ``None`` for an agent without tools (VeRL's single-turn
        loop serves it).
    :ivar max_turns: the most model turns of one episode.
    """

    model: str
    system_prompt: str | None
    overrides: dict[str, Any]
    tools: ToolSet | None = None
    max_turns: int = 1

    @property
    def agent_name(self) -> str | None:
        """The agent loop the dataset rows name, or ``None`` for VeRL's default."""
        return AGENT_LOOP_NAME if self.tools is not None else None


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


def check_agent(agent: AgentSpec, config: TrainConfig, tools: ToolSet | None = None) -> VerlAgent:
    """Check what VeRL's rollout will use of ``agent``.

    :param tools: the agent's resolved tools (the core's ``ctx.results["tools"]``).
    :raises AgentError: for an AWorld agent (not supported yet), an agent with tools whose tools
        were not resolved or whose chat template does not render them, a missing model, or a
        tokenizer without a chat template.
    """
    if agent.source is not None:
        raise AgentError(
            f"agent '{agent.name}': AWorld agents are not yet supported by the verl engine "
            f"(only plain agent specs run in its agent loop); give the agent as a YAML file or mapping"
        )
    if agent.uses_tools and not tools:
        raise AgentError(
            f"agent '{agent.name}' uses tools, but none were resolved; run it through AgentTrainer "
            f"or the CLI, which resolve the tools before the engine's checks"
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
    if tools:
        _check_tools_render(tokenizer, tools, model)
        if agent.max_turns < 1:
            raise AgentError(f"agent '{agent.name}': max_turns must be at least 1, not {agent.max_turns}")
    return VerlAgent(
        model=str(Path(model).expanduser().resolve()),
        system_prompt=agent.system_prompt,
        overrides=overrides,
        tools=tools or None,
        max_turns=agent.max_turns,
    )


def _check_tools_render(tokenizer: Any, tools: ToolSet, model: str) -> None:
    """The chat template must show the model its tools, or the agent cannot call them."""
    messages = [{"role": "user", "content": "?"}]
    try:
        with_tools = tokenizer.apply_chat_template(messages, tools=tools.schemas(), tokenize=False)
    except Exception as error:  # noqa: BLE001 - jinja raises many kinds
        raise AgentError(f"model '{model}': its chat template fails with tools: {error}") from error
    if with_tools == tokenizer.apply_chat_template(messages, tokenize=False):
        raise AgentError(
            f"model '{model}': its chat template ignores tools, so the model would never see "
            f"{', '.join(tools.names)}; use a tool-calling model (Qwen2.5/Qwen3 and the like)"
        )


def write_agent_loop(agent: VerlAgent, run_dir: Path) -> dict[str, Any]:
    """Write the agent loop's config and tool set into ``run_dir`` for VeRL's agent-loop workers.

    :returns: the VeRL key that points at the config (nothing for an agent without tools).
    :raises AgentError: when the tool set cannot be pickled for another process.
    """
    if agent.tools is None:
        return {}
    import cloudpickle
    from omegaconf import OmegaConf

    run_dir.mkdir(parents=True, exist_ok=True)
    tools_file = run_dir / TOOLS_FILE
    try:
        payload = cloudpickle.dumps(agent.tools)
        # The MCP servers' env and headers may hold secrets, expanded from ${VAR}: owner only.
        tools_file.touch(mode=0o600)
        tools_file.chmod(0o600)
        tools_file.write_bytes(payload)
    except Exception as error:  # noqa: BLE001 - pickling fails in many ways
        raise AgentError(
            f"the agent's tools cannot be shipped to VeRL's agent-loop workers: {error}; "
            f"define Python tools in a file and name them as 'file.py:function'"
        ) from error
    loops = [{
        "name": AGENT_LOOP_NAME,
        "_target_": "aworld_train_verl.agent_loop.ToolAgentLoop",
        "tools_file": str(tools_file),
        "max_turns": agent.max_turns,
    }]
    config_file = run_dir / AGENT_LOOP_FILE
    OmegaConf.save(OmegaConf.create(loops), config_file)
    _load_back(config_file)
    return {"actor_rollout_ref.rollout.agent.agent_loop_config_path": str(config_file)}


def _load_back(config_file: Path) -> None:
    """Read the agent loop's config as VeRL's workers do: the class imports and is an agent loop,
    and the tool set unpickles."""
    from hydra.utils import get_class
    from omegaconf import OmegaConf

    from verl.experimental.agent_loop.agent_loop import AgentLoopBase

    from aworld_train_verl.agent_loop import load_tools

    for loop in OmegaConf.load(config_file):
        if not issubclass(get_class(loop["_target_"]), AgentLoopBase):
            raise AgentError(f"{config_file}: {loop['_target_']} is not a VeRL AgentLoopBase")
        load_tools.cache_clear()
        load_tools(str(loop["tools_file"]))
