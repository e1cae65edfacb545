"""The policy VeRL's rollout serves (a model folder whose tokenizer has a chat template) and the
agent loop that runs the agent, named in an ``agent_loop.yaml`` written into the run directory:

- an agent with tools runs in :mod:`aworld_train_verl.agent_loop`, beside its pickled tool set;
- an AWorld ``Agent`` runs through AWorld's Runners in :mod:`aworld_train_verl.aworld_loop`,
  beside the pickled agent;
- a Python agent ``run(row, llm)`` runs in :mod:`aworld_train_verl.agent_loop`, re-imported in
  the workers from its reference (``file.py:run``, by the file's absolute path, or
  ``package.module:run``), or pickled beside the config when it was given without one;
- any other agent runs in VeRL's own single-turn loop.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import AgentError
from aworld_train.engine.launch import remember_secrets
from aworld_train.engine.runtime import aworld_pickler

from aworld_train_verl.vault import Vault

if TYPE_CHECKING:
    from aworld_train.engine import AgentSpec, ToolSet, TrainConfig

#: The ``agent_name`` of the dataset rows the plugin's agent loop runs.
AGENT_LOOP_NAME = "aworld_train_agent"
AGENT_LOOP_FILE = "agent_loop.yaml"
TOOLS_FILE = "agent_tools.pkl"
AWORLD_AGENT_FILE = "agent.pkl"
PYTHON_AGENT_FILE = "agent_run.pkl"


@dataclass(frozen=True)
class PythonAgent:
    """How VeRL's workers get a Python agent ``run(row, llm)``: by its reference, or pickled.

    :ivar reference: ``/absolute/file.py:run`` or ``package.module:run``, or ``None``.
    :ivar root: the folder a new process puts on ``sys.path`` to import a module reference.
    :ivar pickled: the function pickled, for an agent given without a reference.
    """

    reference: str | None = None
    root: str | None = None
    pickled: bytes | None = field(default=None, repr=False)


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
    :ivar python_agent: the Python agent that runs each episode (:func:`ship_python_agent`), or
        ``None``.
    :ivar name: the agent's name, for the loop's failure lines.
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
    python_agent: PythonAgent | None = None
    name: str = "agent"
    trust_remote_code: bool = False
    vault: Vault = field(default_factory=Vault, repr=False)

    @property
    def agent_name(self) -> str | None:
        """The agent loop the dataset rows name, or ``None`` for VeRL's single-turn loop."""
        runs_itself = self.aworld_agent is not None or self.python_agent is not None
        return AGENT_LOOP_NAME if self.tools is not None or runs_itself else None


def model_path(agent: AgentSpec | None, config: TrainConfig) -> str:
    """The policy to train: the config's ``model``, else the agent's."""
    model = config.model or (agent.model if agent is not None else None)
    if not model:
        raise AgentError(
            "no model: set config key 'model' or the agent's 'model' to a model folder"
        )
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
        template does not render them, an AWorld or Python agent that cannot be shipped to
        VeRL's workers, a missing model, or a tokenizer without a chat template.
    """
    vault = Vault()
    # The user's agent must reach VeRL's workers: ship it now, so a failure shows in the check.
    python_agent = (
        ship_python_agent(agent.run, agent.name, vault) if agent.run is not None else None
    )
    aworld_agent = (
        dump_aworld_agent(agent.source, vault)
        if agent.source is not None and python_agent is None
        else None
    )
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
        python_agent=python_agent,
        name=agent.name,
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
    if agent.python_agent is not None:
        loop = {
            "_target_": "aworld_train_verl.agent_loop.PythonAgentLoop",
            "agent": agent.name,
            **_python_agent_keys(agent.python_agent, run_dir),
        }
    elif agent.aworld_agent is not None:
        agent_file = _write_private(run_dir / AWORLD_AGENT_FILE, agent.aworld_agent)
        loop = {
            "_target_": "aworld_train_verl.aworld_loop.AWorldAgentLoop",
            "agent_file": str(agent_file),
        }
    else:
        tools_file = _write_private(run_dir / TOOLS_FILE, _pickle_tools(agent.tools, agent.vault))
        loop = {
            "_target_": "aworld_train_verl.agent_loop.ToolAgentLoop",
            "tools_file": str(tools_file),
            "agent": agent.name,
        }
    config_file = run_dir / AGENT_LOOP_FILE
    OmegaConf.save(
        OmegaConf.create([{"name": AGENT_LOOP_NAME, **loop, "max_turns": agent.max_turns}]),
        config_file,
    )
    _load_back(config_file, agent.vault.environment)
    return {"actor_rollout_ref.rollout.agent.agent_loop_config_path": str(config_file)}


def _python_agent_keys(agent: PythonAgent, run_dir: Path) -> dict[str, Any]:
    """The loop config's keys that bring the Python agent to the workers."""
    if agent.reference is None:
        return {
            "agent_file": str(_write_private(run_dir / PYTHON_AGENT_FILE, agent.pickled or b""))
        }
    return {
        "agent_reference": agent.reference,
        **({"agent_root": agent.root} if agent.root else {}),
    }


def ship_python_agent(run: Any, name: str, vault: Vault) -> PythonAgent:
    """How VeRL's workers get the Python agent ``run``: a ``file.py:run`` reference by the
    file's absolute path, a ``package.module:run`` one with the folder a new process imports
    it from, and a function given without a reference pickled (its secrets in ``vault``).

    :raises AgentError: when the agent has no reference and cannot be pickled.
    """
    reference = getattr(run, "reference", None)
    if reference is None:
        try:
            return PythonAgent(pickled=vault.dumps(run))
        except Exception as error:  # noqa: BLE001 - pickling fails in many ways
            raise AgentError(
                f"Python agent '{name}' cannot be shipped to VeRL's agent-loop workers: "
                f"{' '.join(str(error).split())}; define it in a file and name it as 'file.py:run'"
            ) from error
    target, function = reference.rsplit(":", 1)
    if target.endswith(".py"):
        return PythonAgent(reference=f"{_agent_file(run, target)}:{function}")
    from aworld_train_verl.reward import import_root

    return PythonAgent(reference=reference, root=import_root(reference))


def _agent_file(run: Any, target: str) -> Path:
    """The absolute path of the file ``target`` names, as it was imported: the file of the
    module that holds the agent's function (a relative ``target`` is relative to the job's
    folder, which the workers do not know)."""
    module = sys.modules.get(getattr(getattr(run, "function", run), "__module__", None) or "")
    imported = getattr(module, "__file__", None)
    if imported is not None and Path(imported).name == Path(target).name:
        return Path(imported).resolve()
    return Path(target).expanduser().resolve()


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

    llm = agent.conf.llm_config
    remember_secrets(
        {
            "mcp_config": getattr(agent, "mcp_config", None),
            "llm_base_url": llm.llm_base_url,
            "llm_api_key": llm.llm_api_key,
        }
    )
    key, llm.llm_api_key = llm.llm_api_key, None
    try:
        return vault.dumps(agent, pickler=aworld_pickler(cloudpickle.Pickler))
    except Exception as error:  # noqa: BLE001 - pickling fails in many ways
        raise AgentError(
            f"AWorld agent '{agent.name()}' cannot be shipped to VeRL's agent-loop workers: {error}"
        ) from error
    finally:
        llm.llm_api_key = key


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
        if "agent_reference" in loop:
            _import_agent_back(loop["agent_reference"], loop.get("agent_root"))
        elif "agent_file" in loop:
            loads(Path(loop["agent_file"]).read_bytes(), environment)
        else:
            from aworld_train_verl.agent_loop import as_tools

            as_tools(
                loads(Path(loop["tools_file"]).read_bytes(), environment), str(loop["tools_file"])
            )


def _import_agent_back(reference: str, root: str | None) -> None:
    """The agent's reference imports as the workers import it; in a child process, so that
    this process's modules stay as the job left them."""
    from aworld_train.engine.launch import call_isolated

    from aworld_train_verl.agent_loop import import_agent

    call_isolated(
        lambda: callable(import_agent(reference, root)),
        timeout=60.0,
        what=f"Python agent '{reference}', imported as VeRL's workers import it,",
        error=AgentError,
    )
