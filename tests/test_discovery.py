"""Discovery against the real test-only distributions installed in this environment."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer, plugins
from aworld_train.errors import AgentError, PluginError
from helpers import engine_source, lay_out_distribution, lay_out_engine, run_python

HEAVY = ("torch", "transformers", "datasets", "ray", "verl", "swift", "trl", "aworld")
TEST_ENGINE_MODULES = (
    "aworld_train_toy",
    "aworld_train_broken",
    "aworld_train_dup",
    "aworld_train_mismatch",
    "aworld_train_recorder",
)


def engines_by_name() -> dict[str, list[plugins.EngineInfo]]:
    found: dict[str, list[plugins.EngineInfo]] = {}
    for info in plugins.list_engines():
        found.setdefault(info.name, []).append(info)
    return found


def test_listing_finds_every_installed_engine_with_its_distribution() -> None:
    found = engines_by_name()
    assert [(i.distribution, i.version, i.status) for i in found["toy"]] == [
        ("aworld-train-toy", "0.1.0", "ok")
    ]
    assert [i.distribution for i in found["broken"]] == ["aworld-train-broken"]
    assert [i.distribution for i in found["mismatch"]] == ["aworld-train-mismatch"]
    assert "recorder" not in found, "an extension plugin is not an engine"


def test_listing_imports_no_engine_and_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "from aworld_train import plugins\n"
        "listed = [info.as_dict() for info in plugins.list_engines()]\n"
        "print(json.dumps({'listed': [row['name'] for row in listed],\n"
        "                  'modules': sorted(m.split('.')[0] for m in sys.modules)}))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {"toy", "twin", "broken", "mismatch"} <= set(out["listed"])
    imported = set(out["modules"])
    assert not imported & set(HEAVY), imported & set(HEAVY)
    assert not imported & set(TEST_ENGINE_MODULES), imported & set(TEST_ENGINE_MODULES)


def test_two_distributions_claiming_one_name_are_a_conflict_naming_both() -> None:
    twins = engines_by_name()["twin"]
    assert sorted(i.distribution for i in twins) == ["aworld-train-dup", "aworld-train-toy"]
    for info in twins:
        assert info.status.startswith("conflict:")
        assert "aworld-train-dup" in info.status and "aworld-train-toy" in info.status
    with pytest.raises(PluginError, match="twin.*aworld-train-(toy|dup).*aworld-train-(toy|dup)"):
        plugins.find_engine("twin")
    # The other engine of the same distribution stays usable.
    assert plugins.find_engine("toy").ok


def test_conflicting_engine_cannot_be_created() -> None:
    with pytest.raises(PluginError, match="conflict"):
        plugins.create_manager("twin", None)


def test_broken_import_is_reported_with_its_distribution_and_the_rest_stay_usable() -> None:
    with pytest.raises(PluginError) as raised:
        plugins.create_manager("broken", None)
    message = str(raised.value)
    assert "aworld-train-broken" in message
    assert "RuntimeError" in message and "always fails to import" in message

    checked = {
        info.name: plugins.check_engine(info).status
        for info in plugins.list_engines()
        if info.name != "twin"
    }
    assert checked["broken"].startswith("broken:") and "aworld-train-broken" in checked["broken"]
    assert checked["toy"] == "ok"
    assert plugins.create_manager("toy", None).get_plugin("toy") is not None


def test_hookimpl_that_does_not_match_its_spec_is_reported_naming_the_distribution() -> None:
    with pytest.raises(PluginError) as raised:
        plugins.create_manager("mismatch", None)
    message = str(raised.value)
    assert "aworld-train-mismatch" in message
    assert "check_agent" in message and "tokenizer" in message
    status = plugins.check_engine(plugins.find_engine("mismatch")).status
    assert status.startswith("broken:") and "aworld-train-mismatch" in status


def test_unknown_engine_suggests_a_name_and_lists_the_installed_ones() -> None:
    with pytest.raises(PluginError) as raised:
        plugins.find_engine("tyo")
    message = str(raised.value)
    assert "unknown engine 'tyo'" in message
    assert "did you mean 'toy'?" in message
    assert "installed:" in message and "mismatch" in message and "broken" in message


def test_load_plugins_selects_distributions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_LOAD_PLUGINS", "aworld-train-toy")
    found = engines_by_name()
    assert sorted(found) == ["toy", "twin"]
    # With aworld-train-dup not loaded, the toy distribution's `twin` is no longer a conflict.
    assert [(i.distribution, i.status) for i in found["twin"]] == [("aworld-train-toy", "ok")]
    manager = plugins.create_manager("toy", None)
    assert manager.get_plugin("plugin:recorder") is None, "the recorder was not selected"


def test_load_plugins_accepts_underscores_and_case(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_LOAD_PLUGINS", "AWorld_Train_Dup, aworld-train-recorder")
    assert sorted(engines_by_name()) == ["twin"]
    assert plugins.default_engine(None) == "twin", "the only engine installed is the default"


def test_empty_load_plugins_loads_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_LOAD_PLUGINS", "")
    assert plugins.list_engines() == []
    with pytest.raises(PluginError, match="installed: none"):
        plugins.find_engine("toy")


def test_disable_plugins_blocks_distributions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_DISABLE_PLUGINS", "aworld-train-dup,aworld-train-recorder")
    found = engines_by_name()
    assert "twin" in found and [i.status for i in found["twin"]] == ["ok"]
    assert plugins.find_engine("twin").distribution == "aworld-train-toy"
    manager = plugins.create_manager("toy", None)
    assert manager.get_plugin("plugin:recorder") is None


def test_extension_plugins_load_beside_the_engine() -> None:
    manager = plugins.create_manager("toy", None)
    names = {name for name, _ in manager.list_name_plugin()}
    assert names == {"toy", "plugin:recorder"}


def test_an_extension_plugin_that_fails_to_import_is_skipped_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lay_out_distribution(
        tmp_path,
        "aworld-train-flaky",
        "[aworld_train.plugins]\nflaky = aworld_train_flaky\n",
        "aworld_train_flaky",
        "import aworld_train_no_such_dependency\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="aworld_train"):
        manager = plugins.create_manager("toy", None)
    assert {name for name, _ in manager.list_name_plugin()} == {"toy", "plugin:recorder"}
    assert "skipping plugin 'flaky' from aworld-train-flaky 0.1.0" in caplog.text
    assert "aworld_train_no_such_dependency" in caplog.text


def test_an_extension_plugin_that_breaks_the_specs_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    lay_out_distribution(
        tmp_path,
        "aworld-train-typo",
        "[aworld_train.plugins]\ntypo = aworld_train_typo\n",
        "aworld_train_typo",
        "from aworld_train import hookimpl\n\n"
        "@hookimpl\ndef report_metric(step, metrics, ctx):\n    pass\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="aworld_train"):
        manager = plugins.create_manager("toy", None)
    assert manager.get_plugin("plugin:typo") is None
    assert "plugin 'typo' from aworld-train-typo 0.1.0 does not match the hook specs" in caplog.text
    assert "report_metric" in caplog.text


def test_no_engine_named_with_several_installed_lists_them() -> None:
    with pytest.raises(PluginError, match="no engine named.*installed: .*broken.*toy"):
        plugins.default_engine(None)
    assert plugins.default_engine("toy") == "toy"


def test_trace_plugins_prints_every_hook_call(
    toy_job: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_TRACE_PLUGINS", "1")
    AgentTrainer(**toy_job, check_only=True)
    stderr = capsys.readouterr().err
    trace = [line for line in stderr.splitlines() if line.startswith("[aworld-train trace]")]
    called = [
        found.group(1)
        for line in trace
        if (found := re.match(r"\[aworld-train trace\] (\w+)\(", line))
    ]
    assert called == [
        "config_layout",
        "check_agent",
        "check_dataset",
        "check_reward",
        "check_config",
    ]
    dataset_call = next(line for line in trace if "] check_dataset(" in line)
    assert "train_dataset=Dataset(" in dataset_call and "ctx=" in dataset_call, "one line"
    assert "-> [toy, plugin:recorder]" in stderr, "the implementations of check_dataset"
    assert any("check_config returned ToySettings" in line for line in trace)

    monkeypatch.setenv("AWORLD_TRAIN_TRACE_PLUGINS", "0")
    AgentTrainer(**toy_job, check_only=True)
    assert "[aworld-train trace]" not in capsys.readouterr().err


def test_trace_plugins_shows_each_plugins_report_metrics_call(
    toy_job: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_TRACE_PLUGINS", "1")
    AgentTrainer(**dict(toy_job, config={"max_steps": 2, "batch_size": 4})).train()
    calls = [
        line
        for line in capsys.readouterr().err.splitlines()
        if line.startswith("[aworld-train trace] report_metrics(step=")
    ]
    # The recorder extension plugin implements it: one traced call per logged step.
    assert [line.split("step=")[1].split(",")[0] for line in calls] == ["1", "2"]
    assert all(line.endswith("-> [plugin:recorder]") for line in calls)


def test_trace_plugins_reports_a_raising_hook(
    toy_job: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_TRACE_PLUGINS", "1")
    toy_job["agent"] = {"name": "planner", "max_turns": 3}
    with pytest.raises(AgentError):
        AgentTrainer(**toy_job, check_only=True)
    assert "[aworld-train trace] check_agent raised AgentError" in capsys.readouterr().err


def test_installed_versions_reads_metadata_and_skips_what_is_missing() -> None:
    from importlib import metadata

    from aworld_train.plugins import installed_versions

    versions = installed_versions("pluggy", "no-such-distribution-here")
    assert versions == {"pluggy": metadata.version("pluggy")}


@pytest.mark.parametrize(
    "source",
    [
        "",  # no hooks at all
        "from aworld_train import hookimpl\n\n@hookimpl\ndef check_config(config):\n    return None\n",
    ],
    ids=["no hooks", "checks only"],
)
def test_an_engine_without_a_train_hook_is_refused(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_job: dict[str, Any]
) -> None:
    lay_out_engine(tmp_path, "idle", source)
    monkeypatch.syspath_prepend(str(tmp_path))
    message = "engine 'idle' from aworld-train-idle implements no train hook"
    assert plugins.check_engine(plugins.find_engine("idle")).status == f"broken: {message}"
    toy_job["train_engine_name"] = "idle"
    for check_only in (True, False):
        with pytest.raises(PluginError) as raised:
            AgentTrainer(**toy_job, check_only=check_only)
        assert str(raised.value) == message
    assert not toy_job["run_path"].exists() or not list(toy_job["run_path"].iterdir())


def test_an_engine_hook_raising_a_bug_names_the_engine_its_distribution_and_the_hook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_job: dict[str, Any]
) -> None:
    lay_out_engine(
        tmp_path,
        "raising",
        engine_source('raise RuntimeError("the engine\'s schema is broken")'),
        version="1.0",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    toy_job["train_engine_name"] = "raising"
    with pytest.raises(PluginError) as raised:
        AgentTrainer(**toy_job, check_only=True)
    assert str(raised.value) == (
        "engine 'raising' (aworld-train-raising 1.0) check_config "
        "raised RuntimeError: the engine's schema is broken"
    )


def test_an_engine_reading_its_section_under_another_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toy_job: dict[str, Any]
) -> None:
    lay_out_engine(tmp_path, "renamed", engine_source('return config.engine_section("original")'))
    monkeypatch.syspath_prepend(str(tmp_path))
    toy_job["train_engine_name"] = "renamed"
    with pytest.raises(
        PluginError,
        match="engine 'renamed' reads the 'original' section, but it is installed as 'renamed'",
    ):
        AgentTrainer(**toy_job, check_only=True)


@pytest.mark.parametrize("name", ["swift", "trl", "verl"])
def test_an_engine_this_project_ships_but_not_installed_here_says_how_to_install_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_LOAD_PLUGINS", "aworld-train-toy")
    with pytest.raises(PluginError) as raised:
        plugins.find_engine(name)
    assert str(raised.value) == (
        f"unknown engine '{name}'; installed: toy, twin; install it with pip install "
        f"aworld-train-{name} (engines may live in separate virtual environments: run "
        "aworld-train from the one that has it)"
    )
    with pytest.raises(PluginError) as raised:
        plugins.find_engine("tyo")
    assert "pip install" not in str(raised.value), "no install line for a name nobody ships"


def test_an_extension_plugin_cannot_answer_an_engine_hook_but_can_wrap_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A plain ``check_config`` in an extension would win over the engine's (firstresult, the
    last registered first): it is refused in one line and never called; a wrapper still runs."""
    lay_out_distribution(
        tmp_path,
        "aworld-train-shadow",
        "[aworld_train.plugins]\nshadow = aworld_train_shadow\n",
        "aworld_train_shadow",
        "from aworld_train import hookimpl\n\n"
        "@hookimpl\ndef check_config(config):\n    return 'not the engine'\n",
    )
    lay_out_distribution(
        tmp_path,
        "aworld-train-wrap",
        "[aworld_train.plugins]\nwrap = aworld_train_wrap\n",
        "aworld_train_wrap",
        "from aworld_train import hookimpl\nSEEN = []\n\n"
        "@hookimpl(wrapper=True)\ndef check_config(config):\n"
        "    answer = yield\n    SEEN.append(answer)\n    return answer\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="aworld_train"):
        manager = plugins.create_manager("toy", None)
    assert manager.get_plugin("plugin:shadow") is None
    assert manager.get_plugin("plugin:wrap") is not None
    warnings = [r.getMessage() for r in caplog.records if "shadow" in r.getMessage()]
    assert warnings == [
        "skipping plugin 'shadow' from aworld-train-shadow 0.1.0: plugin "
        "'shadow' from aworld-train-shadow 0.1.0 implements the engine's hook "
        "check_config without wrapping it, which would replace the engine's "
        "answer: make it a wrapper (@hookimpl(wrapper=True))"
    ]
