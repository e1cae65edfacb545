"""No secret of the job reaches the run directory: secrets planted in an MCP server's env and
arguments, in URL credentials and in the ``verl:`` section are in none of the files the checks
write (pickles and the saved config included, read as bytes), yet VeRL's processes get them back
from the environment the engine hands them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from aworld_train.agent import load_agent
from aworld_train.job.config import Resources
from aworld_train.reward import resolve_reward
from aworld_train.tools import close_sessions, resolve_tools
from aworld_train_verl import launch
from aworld_train_verl.cluster import query_nodes as ask_the_cluster
from aworld_train_verl.vault import ENV_PREFIX, Vault, loads
from conftest import Checks, dataset, make_ctx

ENV_SECRET = "sk-planted-env-7f3a91"
ARG_SECRET = "sk-planted-arg-42c8d0"
URL_SECRET = "planted-url-pass-9e1b"
HF_SECRET = "hf_planted_token_5d2e"
LLM_SECRET = "sk-planted-llm-c0ffee"
PLANTED = (ENV_SECRET, ARG_SECRET, URL_SECRET, HF_SECRET, LLM_SECRET)

SERVER = '''
try:
    from mcp.server.mcpserver import MCPServer  # mcp 2
except ImportError:  # mcp 1 calls it FastMCP
    from mcp.server.fastmcp import FastMCP as MCPServer

server = MCPServer("keyed", log_level="WARNING")


@server.tool()
def lookup(word: str) -> str:
    """Look a word up.

    Args:
        word: the word.
    """
    return word


server.run("stdio")
'''

ROWS = [{"prompt": "Look up 'cat'.", "ground_truth": "cat", "data_source": "words"}]


def leaked(run_dir: Path) -> dict[str, list[str]]:
    """Each planted secret found in a file under ``run_dir``, by file (bytes, so pickles count)."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in run_dir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits = [secret for secret in PLANTED if secret.encode() in data]
        if hits:
            found[str(path.relative_to(run_dir))] = hits
    return found


def checked(ctx: Any, spec: Any, base_dir: Path) -> Any:
    """Run the engine's four checks as the core does; the resolved config."""
    try:
        tools = resolve_tools(spec, base_dir)
    finally:
        close_sessions()
    return Checks(ctx, tools=tools).check_job(spec, dataset(ROWS), resolve_reward("exact_match"))


@pytest.fixture(autouse=True)
def a_cluster_that_holds_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    """A FAKE Ray cluster (none runs here) at the jobs' ray_address, which holds them: these
    tests are about where the address's credentials go, not about the cluster."""
    from aworld_train_verl import cluster

    monkeypatch.setattr(
        cluster, "query_nodes", lambda address: [cluster.ClusterNode(gpus=8.0, cpus=64.0)]
    )


def test_a_cluster_that_does_not_answer_is_named_without_its_credentials() -> None:
    from aworld_train.errors import ConfigError
    from aworld_train.run.redaction import remember_secrets

    address = f"ray://admin:{URL_SECRET}@127.0.0.1:1"  # nothing listens on port 1
    remember_secrets({"resources": {"ray_address": address}})
    with pytest.raises(ConfigError) as refused:
        ask_the_cluster(address)
    assert URL_SECRET not in str(refused.value)
    assert "does not answer" in str(refused.value) and "127.0.0.1:1" in str(refused.value)


def secret_ctx(run_dir: Path, model: Path) -> Any:
    return make_ctx(
        run_dir,
        model,
        batch_size=2,
        num_generations=2,
        max_prompt_length=2048,
        max_completion_length=64,
        resources=Resources(ray_address=f"ray://admin:{URL_SECRET}@head:10001"),
        verl={"+ray_kwargs.ray_init.runtime_env.env_vars": {"HF_TOKEN": HF_SECRET}},
    )


@pytest.mark.slow
def test_a_tool_agents_secrets_stay_out_of_the_run_directory(
    tmp_path: Path, tool_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omegaconf import OmegaConf

    (tmp_path / "server.py").write_text(SERVER)
    spec = load_agent(
        {
            "name": "keyed",
            "mcp_config": {
                "mcpServers": {
                    "keyed": {
                        "command": "python",
                        "args": ["server.py", "--api-key", ARG_SECRET],
                        "env": {"SERVICE_API_KEY": ENV_SECRET},
                    }
                }
            },
            "mcp_servers": ["keyed"],
        }
    )
    ctx = secret_ctx(tmp_path / "run", tool_model)
    resolved = checked(ctx, spec, tmp_path)

    assert (ctx.run_dir / "agent_tools.pkl").is_file() and (
        ctx.run_dir / "verl_config.yaml"
    ).is_file()
    assert leaked(ctx.run_dir) == {}
    assert set(resolved.environment.values()) >= {ENV_SECRET, ARG_SECRET, HF_SECRET}
    assert all(name.startswith(ENV_PREFIX) for name in resolved.environment)
    # launch.sh names the variables it needs.
    assert all(name in (ctx.run_dir / "launch.sh").read_text() for name in resolved.environment)

    # VeRL's workers get the secrets back from the environment main_ppo is given.
    tools = loads((ctx.run_dir / "agent_tools.pkl").read_bytes(), resolved.environment)
    server = tools.servers[0]
    assert server.env["SERVICE_API_KEY"] == ENV_SECRET and ARG_SECRET in server.args
    for name, value in resolved.environment.items():
        monkeypatch.setenv(name, value)
    saved = OmegaConf.load(ctx.run_dir / "verl_config.yaml")
    assert saved.ray_kwargs.ray_init.runtime_env.env_vars.HF_TOKEN == HF_SECRET
    assert saved.ray_kwargs.ray_init.address == f"ray://admin:{URL_SECRET}@head:10001"


def test_an_aworld_agents_secrets_stay_out_of_the_run_directory(
    tmp_path: Path, tool_model: Path
) -> None:
    pytest.importorskip("aworld")
    from aworld.agents.llm_agent import Agent
    from aworld.config.conf import AgentConfig
    from rollouts import EXAMPLE

    agent = Agent(
        name="calculator-agent",
        conf=AgentConfig(
            llm_provider="openai",
            llm_model_name="calculator-policy",
            llm_base_url=f"https://user:{URL_SECRET}@llm.example/v1",
            llm_api_key=LLM_SECRET,
        ),
        system_prompt="Call the tools.",
        mcp_config={
            "mcpServers": {
                "calculator": {
                    "command": sys.executable,
                    "args": [str(EXAMPLE / "server.py")],
                    "env": {"CALC_TOKEN": ENV_SECRET},
                }
            }
        },
        mcp_servers=["calculator"],
        max_loop_steps=2,
    )
    ctx = secret_ctx(tmp_path / "run", tool_model)
    resolved = checked(ctx, load_agent(agent), EXAMPLE)

    assert (ctx.run_dir / "agent.pkl").is_file()
    assert leaked(ctx.run_dir) == {}
    copy = loads((ctx.run_dir / "agent.pkl").read_bytes(), resolved.environment)
    assert copy.mcp_config["mcpServers"]["calculator"]["env"]["CALC_TOKEN"] == ENV_SECRET
    assert agent.conf.llm_config.llm_api_key == LLM_SECRET, "the user's agent is left as it was"


def test_a_pickle_without_its_variables_says_which_is_missing() -> None:
    from aworld_train.errors import TrainingError
    from aworld_train.run.redaction import remember_secrets

    remember_secrets({"token": ENV_SECRET})
    vault = Vault()
    data = vault.dumps({"header": f"Bearer {ENV_SECRET}", "plain": "kept"})
    assert ENV_SECRET.encode() not in data
    assert loads(data, vault.environment) == {"header": f"Bearer {ENV_SECRET}", "plain": "kept"}
    with pytest.raises(
        TrainingError, match=rf"^{ENV_PREFIX}0 is not set: it carries a secret of the job"
    ):
        loads(data, {})


def test_training_output_is_redacted_in_the_log_and_on_the_terminal(tmp_path: Path) -> None:
    name = f"{ENV_PREFIX}0"
    echoed: list[str] = []
    command = [sys.executable, "-c", f"import os; print('resolved:', os.environ['{name}'])"]
    launch.run(
        command, tmp_path, lambda *_: None, echo=echoed.append, environment={name: HF_SECRET}
    )
    assert echoed == ["resolved: ***"]
    assert HF_SECRET not in (tmp_path / launch.LOG_NAME).read_text()
