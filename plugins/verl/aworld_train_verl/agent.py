"""The policy VeRL's rollout serves (a model folder whose tokenizer has a chat template) and the
agent loop that runs the agent, named in an ``agent_loop.yaml`` written into the run directory:

- an agent with tools runs in :mod:`aworld_train_verl.agent_loop`, beside its pickled tool set;
- an AWorld ``Agent`` runs through AWorld's Runners in :mod:`aworld_train_verl.aworld_loop`,
  beside the pickled agent;
- any other agent runs in VeRL's own single-turn loop.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import AgentError, remember_secrets

from aworld_train_verl.vault import Vault

if TYPE_CHECKING:
    from aworld_train.engine import AgentSpec, ToolSet, TrainConfig

#: The ``agent_name`` of the dataset rows the plugin's agent loop runs.
AGENT_LOOP_NAME = "aworld_train_agent"
AGENT_LOOP_FILE = "agent_loop.yaml"
TOOLS_FILE = "agent_tools.pkl"
AWORLD_AGENT_FILE = "agent.pkl"


@dataclass
class VerlAgent:
    """What the rollout needs of the agent.

    :ivar model: the model folder (``actor_rollout_ref.model.path``).
    :ivar system_prompt: prepended to every prompt as a system message.
    :ivar overrides: the VeRL keys the agent's sampling settings set.
    :ivar tools: the agent's tools, or ``None`` for an agent without tools (VeRL's single-turn
        loop serves it).
    :ivar max_turns: the most model turns of one episode.
    :ivar aworld_agent: the AWorld ``Agent`` that runs each episode, pickled when it was checked
        (:func:`dump_aworld_agent`), or ``None``.
    :ivar trust_remote_code: whether code from the model folder may run (config
        ``trust_remote_code``).
    :ivar vault: the job's secrets, kept out of the files written for VeRL's workers.
    """

    model: str
    system_prompt: str | None
    overrides: dict[str, Any]
    tools: ToolSet | None = None
    max_turns: int = 1
    aworld_agent: bytes | None = None
    trust_remote_code: bool = False
    vault: Vault = field(default_factory=Vault, repr=False)

    @property
    def agent_name(self) -> str | None:
        """The agent loop the dataset rows name, or ``None`` for VeRL's single-turn loop."""
        return AGENT_LOOP_NAME if self.tools is not None or self.aworld_agent is not None else None


def model_path(agent: AgentSpec | None, config: TrainConfig) -> str:
    """The policy to train: the config's ``model``, else the agent's."""
    model = config.model or (agent.model if agent is not None else None)
    if not model:
        raise AgentError("no model: set config key 'model' or the agent's 'model' to a model folder")
    return str(model)


@functools.lru_cache(maxsize=4)
def load_tokenizer(model: str, trust_remote_code: bool = False) -> Any:
    """The model's tokenizer, loaded by VeRL's own ``hf_tokenizer`` as its workers load it, once
    per process: three checks read it. Shared by its callers, so none may change it.

    The core's model preflight has checked the folder; a hub id passes it, but this check reads
    the tokenizer offline.

    :param trust_remote_code: config ``trust_remote_code``: whether code from the folder may run.
    :raises AgentError: when the model is not a local folder or its tokenizer does not load.
    """
    if not Path(model).expanduser().is_dir():
        raise AgentError(
            f"model '{model}' is not a local folder; VeRL's check loads its tokenizer offline, "
            f"so download it first and give the folder"
        )
    from verl.utils import hf_tokenizer

    try:
        return hf_tokenizer(str(Path(model).expanduser()), trust_remote_code=trust_remote_code)
    except Exception as error:  # noqa: BLE001 - transformers raises many kinds here
        raise AgentError(f"model '{model}': its tokenizer does not load: {error}") from error


def check_agent(agent: AgentSpec, config: TrainConfig, tools: ToolSet | None = None) -> VerlAgent:
    """Check what VeRL's rollout will use of ``agent``.

    :param tools: the agent's resolved tools (empty for an agent without tools).
    :raises AgentError: for an agent with tools whose tools were not resolved or whose chat
        template does not render them, an AWorld agent that cannot be shipped to VeRL's workers,
        a missing model, or a tokenizer without a chat template.
    """
    vault = Vault()
    # An AWorld agent must reach VeRL's workers: pickle it now, so a failure shows in the check.
    aworld_agent = dump_aworld_agent(agent.source, vault) if agent.source is not None else None
    if agent.uses_tools and not tools:
        raise AgentError(
            f"agent '{agent.name}' uses tools, but none were resolved; run it through AgentTrainer "
            f"or the CLI, which resolve the tools before the engine's checks"
        )
    model = model_path(agent, config)
    tokenizer = load_tokenizer(model, config.trust_remote_code)
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
    return VerlAgent(
        model=str(Path(model).expanduser().resolve()),
        system_prompt=agent.system_prompt,
        overrides=overrides,
        tools=tools or None,
        max_turns=agent.max_turns,
        aworld_agent=aworld_agent,
        trust_remote_code=config.trust_remote_code,
        vault=vault,
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
    """Write the agent loop's config into ``run_dir`` for VeRL's agent-loop workers, beside what
    the loop runs: the pickled tool set, or the pickled AWorld agent.

    :returns: the VeRL key that points at the config (nothing for VeRL's single-turn loop).
    :raises AgentError: when the tools or the agent cannot be pickled for another process.
    """
    if agent.agent_name is None:
        return {}
    from omegaconf import OmegaConf

    run_dir.mkdir(parents=True, exist_ok=True)
    if agent.aworld_agent is not None:
        agent_file = _write_private(run_dir / AWORLD_AGENT_FILE, agent.aworld_agent)
        loop = {"_target_": "aworld_train_verl.aworld_loop.AWorldAgentLoop", "agent_file": str(agent_file)}
    else:
        tools_file = _write_private(run_dir / TOOLS_FILE, _pickle_tools(agent.tools, agent.vault))
        loop = {"_target_": "aworld_train_verl.agent_loop.ToolAgentLoop", "tools_file": str(tools_file)}
    config_file = run_dir / AGENT_LOOP_FILE
    OmegaConf.save(OmegaConf.create([{"name": AGENT_LOOP_NAME, **loop, "max_turns": agent.max_turns}]), config_file)
    _load_back(config_file, agent.vault.environment)
    return {"actor_rollout_ref.rollout.agent.agent_loop_config_path": str(config_file)}


def _pickle_tools(tools: ToolSet | None, vault: Vault) -> bytes:
    try:
        return vault.dumps(tools)
    except Exception as error:  # noqa: BLE001 - pickling fails in many ways
        raise AgentError(
            f"the agent's tools cannot be shipped to VeRL's agent-loop workers: {error}; "
            f"define Python tools in a file and name them as 'file.py:function'"
        ) from error


def dump_aworld_agent(agent: Any, vault: Vault) -> bytes:
    """The AWorld agent pickled for VeRL's workers.

    Its LLM API key is left out: the workers point the agent at the policy being trained. Its
    sandbox (the MCP servers' runtime) is pickled as its configuration: a live one holds open
    log files and is registered under its id, so each copy the workers unpickle builds its own.
    The secrets of its MCP servers and LLM endpoint are kept in ``vault``, not in the bytes.

    :raises AgentError: when the agent cannot be pickled.
    """
    import cloudpickle
    from aworld.sandbox import Sandbox

    class Pickler(cloudpickle.Pickler):
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, Sandbox):
                return rebuild_sandbox, (type(obj), {key: getattr(obj, key) for key in SANDBOX_SETTINGS})
            return super().reducer_override(obj)

    llm = agent.conf.llm_config
    remember_secrets({"mcp_config": getattr(agent, "mcp_config", None), "llm_base_url": llm.llm_base_url,
                      "llm_api_key": llm.llm_api_key})
    key, llm.llm_api_key = llm.llm_api_key, None
    try:
        return vault.dumps(agent, pickler=Pickler)
    except Exception as error:  # noqa: BLE001 - pickling fails in many ways
        raise AgentError(
            f"AWorld agent '{agent.name()}' cannot be shipped to VeRL's agent-loop workers: {error}"
        ) from error
    finally:
        llm.llm_api_key = key


#: What an AWorld sandbox is built from (its constructor's keywords, read back as properties).
SANDBOX_SETTINGS = ("mcp_servers", "mcp_config", "black_tool_actions", "skill_configs", "tools",
                    "custom_env_tools", "agents", "env_content_name", "env_content", "workspaces")


def rebuild_sandbox(cls: type, settings: dict[str, Any]) -> Any:
    """A new AWorld sandbox, with an id of its own, from a pickled one's settings."""
    return cls(**settings)


def _write_private(path: Path, payload: bytes) -> Path:
    # The MCP servers' env and headers may hold secrets, expanded from ${VAR}: owner only.
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_bytes(payload)
    return path


def _load_back(config_file: Path, environment: dict[str, str]) -> None:
    """Read the agent loop's config as VeRL's workers do: the class imports and is an agent loop,
    and what it runs unpickles (with the job's secrets from ``environment``, as the workers get
    them)."""
    from hydra.utils import get_class
    from omegaconf import OmegaConf

    from verl.experimental.agent_loop.agent_loop import AgentLoopBase

    from aworld_train_verl.vault import loads

    for loop in OmegaConf.load(config_file):
        if not issubclass(get_class(loop["_target_"]), AgentLoopBase):
            raise AgentError(f"{config_file}: {loop['_target_']} is not a VeRL AgentLoopBase")
        if "agent_file" in loop:
            loads(Path(loop["agent_file"]).read_bytes(), environment)
        else:
            from aworld_train_verl.agent_loop import as_tools

            as_tools(loads(Path(loop["tools_file"]).read_bytes(), environment), str(loop["tools_file"]))
