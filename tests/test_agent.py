"""The agent module: every input form, and every bad agent named by file and key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aworld_train.agent import AgentSpec, load_agent
from aworld_train.errors import AgentError

AGENT = {
    "name": "solver",
    "model": "Qwen/Qwen3-0.6B",
    "system_prompt": "Think, then answer in <answer></answer>.",
    "max_turns": 1,
    "llm_temperature": 0.7,
    "llm_api_key": "sk-secret",
}


def check_solver(spec: AgentSpec) -> None:
    assert spec.name == "solver"
    assert spec.model == "Qwen/Qwen3-0.6B"
    assert spec.system_prompt.startswith("Think")
    assert spec.llm_temperature == 0.7
    assert not spec.uses_tools


def test_agent_from_a_dict() -> None:
    check_solver(load_agent(dict(AGENT)))


def test_agent_from_a_yaml_file(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text(
        "name: solver\nmodel: Qwen/Qwen3-0.6B\nsystem_prompt: 'Think, then answer.'\n"
        "llm_temperature: 0.7\n"
    )
    check_solver(load_agent("agent.yaml", base_dir=tmp_path))
    check_solver(load_agent(tmp_path / "agent.yaml"))


def test_agent_from_a_json_file(tmp_path: Path) -> None:
    (tmp_path / "agent.json").write_text(json.dumps(AGENT))
    check_solver(load_agent(str(tmp_path / "agent.json")))


def test_agent_from_a_module_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_agents_factory.py").write_text(
        f"def make():\n    return {AGENT!r}\n\n"
        "def make_spec():\n"
        "    from aworld_train.agent import AgentSpec\n"
        "    return AgentSpec(name='solver', model='Qwen/Qwen3-0.6B',\n"
        "                     system_prompt='Think.', llm_temperature=0.7)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    check_solver(load_agent("my_agents_factory:make"))
    check_solver(load_agent("my_agents_factory:make_spec"))


def test_agent_from_a_factory_in_a_file_beside_the_job(tmp_path: Path) -> None:
    (tmp_path / "agents.py").write_text(f"def make():\n    return {AGENT!r}\n")
    check_solver(load_agent("agents.py:make", base_dir=tmp_path))


def test_agent_with_tools_and_mcp_servers() -> None:
    spec = load_agent(
        {
            "name": "searcher",
            "tools": ["math:sqrt"],
            "mcp_config": {"mcpServers": {"search": {"command": "search-server"}}},
            "mcp_servers": "search",
            "max_turns": 4,
        }
    )
    assert spec.uses_tools
    assert spec.mcp_servers == ["search"]
    assert spec.to_dict()["mcp_servers"] == ["search"]


def test_no_agent_is_a_default_spec() -> None:
    spec = load_agent(None)
    assert spec == AgentSpec()
    assert spec.to_dict() == {"name": "agent", "max_turns": 1}


def test_agent_spec_passes_through() -> None:
    spec = AgentSpec(name="given")
    assert load_agent(spec) is spec


def test_agent_file_missing(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match=r"agent file not found: .*nope\.yaml"):
        load_agent("nope.yaml", base_dir=tmp_path)


def test_agent_file_with_invalid_yaml_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text("name: solver\nsystem_prompt: [unclosed\n")
    with pytest.raises(AgentError, match=r"agent\.yaml:\d+: invalid YAML"):
        load_agent(tmp_path / "agent.yaml")


def test_agent_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "agent.json").write_text("[1, 2]")
    with pytest.raises(AgentError, match=r"agent\.json: agent file must hold a mapping"):
        load_agent(tmp_path / "agent.json")


def test_agent_unknown_key_suggests_the_right_one(tmp_path: Path) -> None:
    (tmp_path / "agent.yaml").write_text("name: solver\nsystem_promt: hi\n")
    with pytest.raises(AgentError) as raised:
        load_agent(tmp_path / "agent.yaml")
    assert "agent.yaml: unknown agent key 'system_promt' (did you mean 'system_prompt'?)" in str(
        raised.value
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("max_turns", 0),
        ("max_turns", "3"),
        ("tools", "math:sqrt"),
        ("llm_temperature", "hot"),
        ("llm_temperature", -0.5),
        ("llm_temperature", float("nan")),
        ("llm_top_p", -1),
        ("llm_top_p", 7.5),
        ("llm_max_tokens", 0),
        ("name", ""),
        ("model", 7),
    ],
)
def test_agent_key_with_an_invalid_value(key: str, value: object) -> None:
    with pytest.raises(AgentError, match=f"agent key '{key}' must be "):
        load_agent({"name": "solver", key: value})


def test_agent_factory_not_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AgentError, match="cannot import module 'no_such_agents_module'"):
        load_agent("no_such_agents_module:make")
    (tmp_path / "agents_without_make.py").write_text("x = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AgentError, match="'make' not found in agents_without_make"):
        load_agent("agents_without_make:make")
    with pytest.raises(AgentError, match="is not callable"):
        load_agent("agents_without_make:x")


def test_agent_factory_that_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "agents_raising.py").write_text("def make():\n    raise KeyError('model')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AgentError, match="agent factory 'agents_raising:make' raised KeyError"):
        load_agent("agents_raising:make")


def test_an_agent_factory_that_returns_something_else_is_named_with_what_it_returned(
    tmp_path: Path,
) -> None:
    (tmp_path / "bad_agents.py").write_text("def make():\n    return 'x'\n")
    with pytest.raises(AgentError) as refused:
        load_agent("bad_agents.py:make", tmp_path)
    assert str(refused.value) == (
        "the agent factory 'bad_agents.py:make' returned a str: a factory returns an AWorld "
        "Agent, an agent mapping, an agent file's path or a Python agent run(row, llm)"
    )


def test_agent_of_an_unsupported_form() -> None:
    with pytest.raises(AgentError, match="unsupported agent of type int"):
        load_agent(42)
    with pytest.raises(AgentError, match="neither a .yaml/.json agent file"):
        load_agent("agent.txt")
