"""check_agent: the model folder and chat template VeRL's rollout will use; what an agent with
tools needs of them, and what is refused clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from aworld_train.agent import AgentSpec
from aworld_train.errors import AgentError
from conftest import Checks, make_ctx


def test_a_plain_agent_gives_model_system_prompt_and_sampling(
    tmp_path: Path, tiny_model: Path
) -> None:
    agent = Checks(make_ctx(tmp_path, tiny_model)).check_agent(
        AgentSpec(system_prompt="Be brief.", llm_temperature=0.7, llm_top_p=0.9)
    )
    assert agent.model == str(tiny_model.resolve())
    assert agent.system_prompt == "Be brief."
    assert agent.overrides == {
        "actor_rollout_ref.rollout.temperature": 0.7,
        "actor_rollout_ref.rollout.top_p": 0.9,
    }


def test_the_agents_model_serves_when_the_config_names_none(
    tmp_path: Path, tiny_model: Path
) -> None:
    checks = Checks(make_ctx(tmp_path, None))
    assert checks.check_agent(AgentSpec(model=str(tiny_model))).model == str(tiny_model.resolve())


def test_an_agent_whose_tools_were_not_resolved_is_an_error(
    tmp_path: Path, tiny_model: Path
) -> None:
    agent = AgentSpec(name="searcher", tools=["tools:search"])
    with pytest.raises(AgentError, match="agent 'searcher' uses tools, but none were resolved"):
        Checks(make_ctx(tmp_path, tiny_model)).check_agent(agent)


def test_a_chat_template_that_ignores_tools_is_an_error(tmp_path: Path, tiny_model: Path) -> None:
    from aworld_train.tools import PythonTool, ToolSet

    def lookup(word: str) -> str:
        """Look a word up."""
        return word

    checks = Checks(make_ctx(tmp_path, tiny_model), tools=ToolSet([PythonTool(lookup)]))
    with pytest.raises(
        AgentError, match="its chat template ignores tools, so the model would never see lookup"
    ):
        checks.check_agent(AgentSpec(name="searcher", tools=[lookup]))


def test_no_model_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="no model"):
        Checks(make_ctx(tmp_path, None)).check_agent(AgentSpec())


def test_a_model_that_is_not_a_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="model 'Qwen/Qwen2.5-0.5B' is not a local folder"):
        Checks(make_ctx(tmp_path, None)).check_agent(AgentSpec(model="Qwen/Qwen2.5-0.5B"))


def test_a_tokenizer_without_chat_template_is_an_error(tmp_path: Path, tiny_model: Path) -> None:
    import shutil

    model = shutil.copytree(tiny_model, tmp_path / "no-template")
    (model / "chat_template.jinja").unlink(missing_ok=True)
    config_file = model / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config.pop("chat_template", None)
    config_file.write_text(json.dumps(config))
    with pytest.raises(AgentError, match="has no chat template"):
        Checks(make_ctx(tmp_path, model)).check_agent(AgentSpec())
