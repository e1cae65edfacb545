"""Every hook is specified, documented and tested; each hook has a test of its own here.

``test_hook_<name>`` is the test of hook ``<name>``: ``test_plugin_hooks_have_tests`` fails
when a hook in ``hookspecs.py`` has none.
"""

from __future__ import annotations

import ast
import inspect
import logging
import platform
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer, plugins
from aworld_train.plugins import hookspecs
from aworld_train.agent import AgentSpec
from aworld_train.errors import AgentError, ConfigError, PluginError, TrainingCrash
from aworld_train.reward import RewardSpec
from helpers import RecordingProcessor, lay_out_distribution, lay_out_engine, manifest, read_jsonl

TESTS = Path(__file__).parent
HOOKS_DOC = TESTS.parent / "docs" / "hooks.md"


def hook_specs() -> dict[str, Callable[..., Any]]:
    marker = f"{hookspecs.PROJECT_NAME}_spec"
    return {
        name: fn
        for name, fn in vars(hookspecs).items()
        if inspect.isfunction(fn) and hasattr(fn, marker)
    }


def signature_text(name: str, fn: Callable[..., Any]) -> str:
    """``name(arg: Type, ...) -> Return``, as written in ``hookspecs.py``."""
    signature = inspect.signature(fn)
    params = ", ".join(f"{p.name}: {p.annotation}" for p in signature.parameters.values())
    return f"{name}({params}) -> {signature.return_annotation}"


def documented_sections() -> dict[str, str]:
    """``{hook: its section of docs/hooks.md}``, from the ``## `hook` `` headings."""
    text = HOOKS_DOC.read_text(encoding="utf-8")
    parts = re.split(r"^## `(\w+)`\s*$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.fixture
def engine_job(
    toy_job: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[str, str], dict[str, Any]]:
    """Install the engine ``name`` from its hook module's source; returns the toy job on it."""

    def install(name: str, source: str) -> dict[str, Any]:
        lay_out_engine(tmp_path, name, source)
        monkeypatch.syspath_prepend(str(tmp_path))
        toy_job["train_engine_name"] = name
        return toy_job

    return install


def test_the_five_card_hooks_are_specified() -> None:
    assert {"check_agent", "check_dataset", "check_reward", "check_config", "train"} <= set(
        hook_specs()
    )


@pytest.mark.parametrize("name", sorted(hook_specs()))
def test_plugin_hooks_have_docstrings(name: str) -> None:
    fn = hook_specs()[name]
    doc = inspect.getdoc(fn) or ""
    assert doc.strip(), f"hook {name} has no docstring"
    for param in inspect.signature(fn).parameters:
        assert f":param {param}:" in doc, f"hook {name} does not document :param {param}:"
    assert ":returns:" in doc, f"hook {name} does not document what it :returns:"
    assert "Called" in doc, f"hook {name} does not say when it is called"


@pytest.mark.parametrize("name", sorted(hook_specs()))
def test_plugin_hooks_are_documented(name: str) -> None:
    sections = documented_sections()
    assert name in sections, f"docs/hooks.md has no section for hook {name}"
    section = sections[name]
    assert signature_text(name, hook_specs()[name]) in section, (
        f"docs/hooks.md does not give the exact signature of {name}: "
        f"{signature_text(name, hook_specs()[name])}"
    )
    assert "```python" in section and "@hookimpl" in section, f"no example for hook {name}"


def test_documented_hooks_exist() -> None:
    assert set(documented_sections()) == set(hook_specs())


def test_plugin_hooks_have_tests() -> None:
    tested = {
        node.name
        for path in TESTS.glob("test_*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef)
    }
    missing = [name for name in hook_specs() if f"test_hook_{name}" not in tested]
    assert not missing, f"hooks without a test_hook_<name> test: {missing}"


def test_hook_check_agent(
    recording_engine: type[RecordingProcessor], toy_job: dict[str, Any]
) -> None:
    toy_job["train_engine_name"] = "recording"
    trainer = AgentTrainer(**toy_job, check_only=True)
    (name, agent), *_ = recording_engine.calls
    assert name == "check_agent" and agent is toy_job["agent"], "a processor: the user's agent"
    assert trainer.hand_off.agent == {"agent_for": toy_job["agent"]}

    # A hook module gets the AgentSpec the core resolved (the toy engine names it).
    toy_job["train_engine_name"] = "toy"
    toy_job["agent"] = {"name": "planner", "max_turns": 3}
    with pytest.raises(AgentError, match="agent 'planner': the toy engine answers in one turn"):
        AgentTrainer(**toy_job, check_only=True)


HANDING_ENGINE = """
from aworld_train.engine import hookimpl

received = {}


@hookimpl
def check_agent(agent, config, tools, ctx):
    received["check_agent"] = {"agent": agent, "config": config, "tools": tools}
    return "agent form"


@hookimpl
def check_dataset(train_dataset, test_dataset, agent, config):
    received["check_dataset"] = {"train_dataset": train_dataset, "agent": agent,
                                 "config": config}
    return "dataset form"


@hookimpl
def check_reward(reward, agent, dataset, config):
    received["check_reward"] = {"reward": reward, "agent": agent, "dataset": dataset,
                                "config": config}


@hookimpl
def check_config(config, agent, dataset, reward):
    received["check_config"] = {"config": config, "agent": agent, "dataset": dataset,
                                "reward": reward}
    return "config form"


@hookimpl
def train(agent, dataset, reward, engine_config, ctx):
    received["train"] = {"agent": agent, "dataset": dataset, "reward": reward,
                         "config": engine_config}
    return {"reward": 1.0}
"""


def test_each_hook_receives_the_earlier_results_as_named_arguments(
    engine_job: Callable[[str, str], dict[str, Any]],
) -> None:
    toy_job = engine_job("handing", HANDING_ENGINE)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new form never warns
        trainer = AgentTrainer(**toy_job)
        trainer.train()
    import aworld_train_handing

    received = aworld_train_handing.received
    config, spec, core_reward = (
        trainer.context.config,
        received["check_agent"]["agent"],
        (received["check_reward"]["reward"]),
    )
    assert list(received) == [
        "check_agent",
        "check_dataset",
        "check_reward",
        "check_config",
        "train",
    ], "AWorld Train's order"
    assert spec.name == "adder" and received["check_agent"]["config"] is config
    assert received["check_agent"]["tools"] is trainer.context.tools
    assert len(trainer.context.tools) == 0, "an agent without tools: an empty ToolSet"
    assert received["check_dataset"]["agent"] == "agent form"
    assert received["check_dataset"]["config"] is config
    assert len(received["check_dataset"]["train_dataset"]) == 4
    assert received["check_reward"] == {
        "reward": core_reward,
        "agent": "agent form",
        "dataset": "dataset form",
        "config": config,
    }
    assert isinstance(core_reward, RewardSpec)
    assert received["check_config"] == {
        "config": config,
        "agent": "agent form",
        "dataset": "dataset form",
        "reward": core_reward,
    }
    assert received["train"] == {
        "agent": "agent form",
        "dataset": "dataset form",
        "reward": core_reward,
        "config": "config form",
    }
    assert trainer.hand_off.config == "config form"


def test_a_hook_that_returns_none_hands_on_the_cores_form(toy_job: dict[str, Any]) -> None:
    toy_job["agent"] = None
    toy_job["train_engine_name"] = "toy"
    trainer = AgentTrainer(**toy_job, check_only=True)
    assert isinstance(trainer.hand_off.agent, AgentSpec), "toy's check_agent returns None"


LAYERED_ENGINE = """
from aworld_train import hookimpl
from aworld_train.job.config import ConfigLayout

calls = []


@hookimpl
def config_layout():
    calls.append("config_layout")
    return ConfigLayout(section_keys=frozenset({"depth", "algorithm"}), model_key="policy.path")


@hookimpl
def check_config(config, ctx):
    calls.append("check_config")
    return config.engine_section()


@hookimpl
def train(ctx):
    return None
"""


def test_hook_config_layout(engine_job: Callable[[str, str], dict[str, Any]]) -> None:
    toy_job = engine_job("layered", LAYERED_ENGINE)
    toy_job.update(
        config={
            "depth": 2,
            "algorithm": {"estimator": "grpo"},
            "model": "org/policy",
            "layered": {"width": 3, "policy": {"path": "org/policy", "dtype": "bf16"}},
        }
    )
    trainer = AgentTrainer(**toy_job, check_only=True)
    import aworld_train_layered

    assert aworld_train_layered.calls == ["config_layout", "check_config"], "once, first"
    assert trainer.hand_off.config == {
        "width": 3,
        "policy": {"dtype": "bf16"},
        "depth": 2,
        "algorithm": {"estimator": "grpo"},
    }, "claimed keys in the section; the model key taken out of it"
    assert trainer.context.config.model == "org/policy"
    assert trainer.context.config.algorithm == "grpo", "a mapping is the engine's, not the name"

    toy_job["config"]["layered"]["policy"]["path"] = "org/other"
    with pytest.raises(
        ConfigError,
        match=r"^config key 'model' names org/policy but config key "
        r"'layered\.policy\.path' names org/other: name the "
        r"model once$",
    ):
        AgentTrainer(**toy_job, check_only=True)
    del toy_job["config"]["model"]
    toy_job["config"]["layered"] = {"policy.path": 7}
    with pytest.raises(
        ConfigError,
        match=r"^config key 'layered\.policy\.path' must be a model "
        r"folder or hub id \(a string\), got int 7$",
    ):
        AgentTrainer(**toy_job, check_only=True)
    toy_job["config"]["layered"] = {"policy.path": "org/only-here"}
    trainer = AgentTrainer(**toy_job, check_only=True)
    assert trainer.context.config.model == "org/only-here", "the engine's key alone names it"
    assert trainer.hand_off.config == {"depth": 2, "algorithm": {"estimator": "grpo"}}

    # A processor owns its config format: it takes every key the core does not know.
    plugins.register_processor("recording", RecordingProcessor)
    toy_job.update(
        train_engine_name="recording",
        config={"data": {"train_files": None}, "algorithm": {"adv_estimator": "grpo"}},
    )
    trainer = AgentTrainer(**toy_job, check_only=True)
    assert trainer.context.config.engine_section() == toy_job["config"]


@pytest.mark.parametrize(
    ("name", "body", "message"),
    [
        (
            "layoutwrongtype",
            "return {'section_keys': ['depth']}",
            "config_layout returned dict, not a ConfigLayout or None",
        ),
        ("layoutraises", "raise KeyError('schema')", "config_layout raised KeyError: 'schema'"),
    ],
)
def test_a_config_layout_that_breaks_the_contract_is_named(
    engine_job: Callable[[str, str], dict[str, Any]], name: str, body: str, message: str
) -> None:
    source = (
        "from aworld_train import hookimpl\n\n\n@hookimpl\ndef config_layout():\n"
        f"    {body}\n\n\n@hookimpl\ndef train(ctx):\n    return None\n"
    )
    toy_job = engine_job(name, source)
    with pytest.raises(PluginError) as raised:
        AgentTrainer(**toy_job, check_only=True)
    assert str(raised.value) == f"engine '{name}' (aworld-train-{name} 0.1.0) {message}"
    assert not toy_job["run_path"].exists(), "a failed check-only run leaves nothing"


def test_hook_check_dataset(toy_job: dict[str, Any]) -> None:
    toy_job["test_dataset"] = [{"prompt": "What is 4 + 4?", "ground_truth": "8"}]
    trainer = AgentTrainer(**toy_job)
    converted = trainer.hand_off.dataset
    assert [e.prompt for e in converted["train"]][:1] == ["What is 1 + 1?"]
    assert [(e.prompt, e.ground_truth) for e in converted["test"]] == [("What is 4 + 4?", "8")]
    # The recorder wraps the engine's implementation: it runs around it, after check_agent.
    (recorded,) = read_jsonl(trainer.run_dir.path / "recorded.jsonl")
    assert (recorded["hook"], recorded["engine"], recorded["rows"]) == ("check_dataset", "toy", 4)
    assert recorded["engine_result"] == "dict"
    assert recorded["agent"] == "AgentSpec", "the wrapper receives check_agent's result by name"


def test_hook_check_reward(toy_job: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    trainer = AgentTrainer(**toy_job, check_only=True)
    wrapped = trainer.hand_off.reward
    assert isinstance(wrapped.spec, RewardSpec)
    example = trainer.hand_off.dataset["train"][0]
    assert wrapped(example, rows[0]["ground_truth"]).score == 1.0
    assert wrapped(example, "wrong").metrics == {"rewards/exact_match": 0.0}


def test_hook_check_config(toy_job: dict[str, Any]) -> None:
    toy_job["config"] = {"max_steps": 7, "seed": 3, "toy": {"temperature": 0.5}}
    settings = AgentTrainer(**toy_job, check_only=True).hand_off.config
    assert settings.max_steps == 7 and settings.seed == 3 and settings.temperature == 0.5
    assert settings.candidates == ("2", "3", "4", "5"), "the dataset's distinct ground truths"
    assert settings.batch_size == 8 and settings.save_steps is None, "the toy engine's defaults"


# The toy engine reporting its settings: it reads check_config's result (the toy settings).
SETTINGS_ENGINE = """
from aworld_train.engine import Setting, hookimpl
from aworld_train.engine.settings import describe_device, resolve_precision
from aworld_train_toy.engine import check_agent, check_config, check_dataset, check_reward, train


@hookimpl
def effective_settings(engine_config, ctx):
    common = ctx.config
    return [
        Setting("device", describe_device(False), "use_cpu", True, "default"),
        Setting("precision", resolve_precision(common.precision, False), "dtype",
                "float32", "job" if common.precision != "auto" else "default"),
        Setting("kl_coef", common.kl_coef or 0.0, "", 0.0, "default"),
        Setting("lora", common.lora.to_dict() if common.lora else None, "", None, "job"),
        Setting("temperature", engine_config.temperature, "temperature",
                engine_config.temperature, "section"),
    ]
"""


def test_hook_effective_settings(engine_job: Callable[[str, str], dict[str, Any]]) -> None:
    toy_job = engine_job("reporting", SETTINGS_ENGINE)
    toy_job["config"] = {
        "max_steps": 2,
        "precision": "fp32",
        "lora": {"rank": 4},
        "reporting": {"temperature": 0.5},
    }
    trainer = AgentTrainer(**toy_job)
    assert [(s.name, s.value, s.source) for s in trainer.settings] == [
        ("device", "cpu", "default"),
        ("precision", "fp32", "job"),
        ("kl_coef", 0.0, "default"),
        ("lora", {"rank": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": "all-linear"}, "job"),
        ("temperature", 0.5, "section"),
    ]
    assert [c.module for c in trainer.checks][-1] == "settings"
    assert trainer.checks[-1].detail == "5 settings; device cpu, precision fp32"
    written = manifest(trainer.run_dir.path)
    assert (written["device"], written["precision"]) == ("cpu", "fp32")
    assert written["settings"] == {
        "device": "cpu",
        "precision": "fp32",
        "kl_coef": 0.0,
        "lora": {"rank": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": "all-linear"},
        "temperature": 0.5,
    }
    toy_job["config"]["precision"] = "auto"
    checked = AgentTrainer(**toy_job, check_only=True)
    assert checked.settings is not None and checked.settings[1].value == "fp32", "auto resolved"


# An engine planning its memory: its own micro-batch, checkpointing and sharding replace the
# core's default plan. Self-contained (no toy engine), so it runs where torch is installed.
PLANNING_ENGINE = """
import dataclasses

from aworld_train.engine import Setting, hookimpl


@hookimpl
def effective_settings(ctx):
    return [Setting("device", "cpu", "", None, "default"),
            Setting("precision", "fp32", "", None, "default")]


@hookimpl
def memory_plan(engine_config, default, ctx):
    if ctx.config.seed == 7:
        return {"micro_batch": 3}
    return dataclasses.replace(default, micro_batch=3, gradient_checkpointing=True,
                               shard_degree=4, zero_stage=3)


@hookimpl
def train(ctx):
    return {}
"""


def test_hook_memory_plan(engine_job: Callable[[str, str], dict[str, Any]], tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from aworld_train.testing import build_tiny_model

    toy_job = engine_job("planning", PLANNING_ENGINE)
    model = build_tiny_model(tmp_path / "tiny")
    toy_job["agent"] = {"name": "adder", "model": str(model)}
    toy_job["config"] = {
        "max_steps": 2,
        "precision": "fp32",
        "batch_size": 2,
        "max_prompt_length": 24,
        "max_completion_length": 8,
        "resources": {"gpu_memory_gb": 1},
    }
    trainer = AgentTrainer(**toy_job)
    (row,) = [check for check in trainer.checks if check.module == "resources"]
    assert row.by == "core"
    assert (
        "micro-batch 3 × 32 tokens, gradient checkpointing, sharded over 4 GPUs (stage 3)"
        in row.detail
    )
    assert row.detail.endswith("fits on a 1 GB GPU (resources.gpu_memory_gb)")
    memory = manifest(trainer.run_dir.path)["memory"]
    assert memory["plan"]["micro_batch"] == 3 and memory["plan"]["zero_stage"] == 3
    assert memory["verdict"] == "fits" and memory["gpu_memory_bytes"] == 10**9
    # Sharded four ways, stage 3: a quarter of 16 bytes a parameter (fp32 AdamW).
    assert memory["certain_bytes"] == 16 * memory["parameters"] // 4

    toy_job["config"]["seed"] = 7
    with pytest.raises(PluginError, match="memory_plan returned dict, not a MemoryPlan or None"):
        AgentTrainer(**toy_job, check_only=True)


def test_an_engine_without_effective_settings_reports_none(toy_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**toy_job)
    assert trainer.settings is None
    assert "settings" not in [c.module for c in trainer.checks]
    assert not {"device", "precision", "settings"} & set(manifest(trainer.run_dir.path))


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        # Each case installs an engine of its own name: a module once imported stays imported.
        ("{'device': 'cpu'}", "returned dict, not a list of Setting"),
        ("[Setting('device', 'cpu', '', None, 'default')]", "no precision among the settings"),
        (
            "[Setting('device', 'cpu', '', None, 'default'), "
            "Setting('precision', 'auto', '', None, 'default')]",
            "precision 'auto' is not the precision used (one of fp32, bf16, fp16)",
        ),
        (
            "[Setting('device', 'cpu', '', None, 'default'), "
            "Setting('device', 'cpu', '', None, 'default')]",
            "'device' is reported twice",
        ),
        (
            "[Setting('device', object(), '', None, 'default')]",
            "'device' has a value that is not JSON",
        ),
    ],
)
def test_a_wrong_effective_settings_answer_names_the_engine(
    engine_job: Callable[[str, str], dict[str, Any]], answer: str, problem: str
) -> None:
    name = f"wrong{abs(hash(answer))}"
    source = (
        "from aworld_train.engine import Setting, hookimpl\n"
        "from aworld_train_toy.engine import check_config, check_dataset, train\n\n\n"
        f"@hookimpl\ndef effective_settings():\n    return {answer}\n"
    )
    toy_job = engine_job(name, source)
    with pytest.raises(PluginError) as raised:
        AgentTrainer(**toy_job)
    assert str(raised.value).startswith(
        f"engine '{name}' (aworld-train-{name} 0.1.0) effective_settings {problem}"
    )
    assert list(toy_job["run_path"].iterdir()) == [], "a failed check leaves no run"


def test_hook_train(recording_engine: type[RecordingProcessor], toy_job: dict[str, Any]) -> None:
    toy_job["train_engine_name"] = "recording"
    AgentTrainer(**toy_job, check_only=True)
    assert "train" not in [name for name, _ in recording_engine.calls], "never in a check run"

    trainer = AgentTrainer(**toy_job)
    final = trainer.train()
    trains = [ctx for name, ctx in recording_engine.calls if name == "train"]
    assert trains == [trainer.context]
    assert final == {"reward": 0.75, "initialized_before_train": 1.0}
    assert manifest(trainer.run_dir.path)["final_metrics"] == final


def test_hook_engine_versions(toy_job: dict[str, Any]) -> None:
    versions = manifest(AgentTrainer(**toy_job).run_dir.path)["versions"]
    assert versions == {
        "aworld-train": "0.1.0",
        "aworld-train-toy": "0.1.0",
        "python": platform.python_version(),
    }


def test_hook_resume_support(tmp_path: Path) -> None:
    """An engine that does not answer counts as resuming exactly; one that answers is heard
    (``tests/test_resume_support.py`` follows each answer through ``train --resume``)."""
    from aworld_train import hookimpl

    manager = plugins.create_manager("toy", tmp_path)
    assert manager.hook.resume_support() is None

    class Continues:
        @hookimpl
        def resume_support(self) -> str:
            return "continued"

    manager.register(Continues())
    assert manager.hook.resume_support() == "continued"


def test_hook_trains_segments(tmp_path: Path) -> None:
    """An engine that does not answer trains an episode as one sequence; one that answers
    ``True`` trains each segment."""
    from aworld_train import hookimpl

    manager = plugins.create_manager("toy", tmp_path)
    assert manager.hook.trains_segments() is None

    class Segments:
        @hookimpl
        def trains_segments(self) -> bool:
            return True

    manager.register(Segments())
    assert manager.hook.trains_segments() is True


def test_hook_report_metrics(toy_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**toy_job)
    trainer.train()
    logged = read_jsonl(trainer.run_dir.path / "metrics.jsonl")
    reported = [
        r
        for r in read_jsonl(trainer.run_dir.path / "recorded.jsonl")
        if r["hook"] == "report_metrics"
    ]
    assert [r["step"] for r in reported] == [r["step"] for r in logged] == [1, 2, 3, 4, 5, 6]
    for record, report in zip(logged, reported):
        assert report["metrics"] == {k: v for k, v in record.items() if k not in ("step", "time")}


FAILING_TRACKER = """
from aworld_train import hookimpl


@hookimpl
def report_metrics(step, metrics):
    raise RuntimeError(f"tracker down at step {step}")
"""


def test_an_extension_plugin_whose_report_metrics_raises_never_fails_the_run(
    toy_job: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    lay_out_distribution(
        tmp_path,
        "aworld-train-tracker",
        "[aworld_train.plugins]\ntracker = aworld_train_tracker\n",
        "aworld_train_tracker",
        FAILING_TRACKER,
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.DEBUG, logger="aworld_train"):
        trainer = AgentTrainer(**toy_job)
        trainer.train()
    assert manifest(trainer.run_dir.path)["status"] == "completed"
    reported = [
        r["step"]
        for r in read_jsonl(trainer.run_dir.path / "recorded.jsonl")
        if r["hook"] == "report_metrics"
    ]
    assert reported == [1, 2, 3, 4, 5, 6], "the other plugins hear every step"
    failures = [r for r in caplog.records if "report_metrics" in r.getMessage()]
    assert [r.levelno for r in failures] == [logging.WARNING] + [logging.DEBUG] * 5, (
        "warned once, then quietly"
    )
    assert failures[0].getMessage() == (
        "plugin 'tracker' failed in report_metrics at step 1 (the run goes on): "
        "RuntimeError: tracker down at step 1"
    )


LOUD_ENGINE = """
from aworld_train import hookimpl


@hookimpl
def train(ctx):
    ctx.metrics.log(1, {"reward": 1.0})
    return {"reward": 1.0}


@hookimpl
def report_metrics(step):
    raise RuntimeError("the engine's own dashboard is down")
"""


def test_the_engines_own_report_metrics_raising_fails_the_run(
    engine_job: Callable[[str, str], dict[str, Any]],
) -> None:
    toy_job = engine_job("loud", LOUD_ENGINE)
    trainer = AgentTrainer(**toy_job)
    with pytest.raises(
        TrainingCrash,
        match="raised RuntimeError: the engine's own dashboard is down at aworld_train_loud.py:",
    ) as raised:
        trainer.train()
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert manifest(trainer.run_dir.path)["status"] == "failed"
