"""The Python API: ``AgentTrainer``, ``TrainerProcessor`` and in-process engines."""

from __future__ import annotations

import abc
import inspect
import json
import pickle
from pathlib import Path
from typing import Any

import aworld_train
import pytest
from aworld_train import AgentTrainer, TrainerProcessor, plugins
from aworld_train.job.config import TrainConfig
from aworld_train.errors import (
    AWorldTrainError,
    ConfigError,
    DatasetError,
    JobError,
    ModelError,
    PluginError,
    TrainingCrash,
)
from aworld_train.plugins._processor import ProcessorPlugin
from aworld_train.reward import RewardSpec
from aworld_train.reward._builtin import BUILTIN_REWARDS
from helpers import (
    ARITHMETIC,
    RecordingProcessor,
    manifest,
    read_jsonl,
    run_python,
    write_jsonl,
    write_model_folder,
)


def test_public_surface() -> None:
    assert set(aworld_train.__all__) == {
        "AWorldTrainError",
        "AgentTrainer",
        "TrainerProcessor",
        "hookimpl",
        "__version__",
    }
    assert issubclass(AWorldTrainError, Exception)


def test_trainer_processor_is_an_abstract_base() -> None:
    assert issubclass(TrainerProcessor, abc.ABC)
    assert inspect.isabstract(TrainerProcessor)
    assert set(TrainerProcessor.__abstractmethods__) == {
        "train",
        "check_agent",
        "check_dataset",
        "check_reward",
        "check_config",
    }
    with pytest.raises(TypeError):
        TrainerProcessor("runs")  # type: ignore[abstract]

    class NoTrain(TrainerProcessor):
        def check_agent(self, agent: Any) -> Any: ...
        def check_dataset(self, dataset: Any, test_dataset: Any = None) -> Any: ...
        def check_reward(self, reward_func: Any) -> Any: ...
        def check_config(self, config: Any) -> Any: ...

    with pytest.raises(TypeError, match="train"):
        NoTrain("runs")  # type: ignore[abstract]


def test_processor_keeps_run_path_and_marks_itself_initialised() -> None:
    processor = RecordingProcessor("some/run")
    assert processor.run_path == "some/run"
    assert not processor.initialized
    processor.mark_initialized()
    assert processor.initialized


def test_constructor_runs_the_checks_in_order(
    recording_engine: type[RecordingProcessor], toy_job: dict[str, Any]
) -> None:
    toy_job["train_engine_name"] = "recording"
    trainer = AgentTrainer(**toy_job)
    assert [name for name, _ in recording_engine.calls] == [
        "check_agent",
        "check_dataset",
        "check_reward",
        "check_config",
    ]
    assert trainer.initialized
    assert [(c.module, c.by) for c in trainer.checks] == [
        ("config", "core"),
        ("agent", "core"),
        ("model", "core"),
        ("agent", "recording"),
        ("dataset", "core"),
        ("dataset", "recording"),
        ("reward", "core"),
        ("reward", "recording"),
        ("config", "recording"),
    ]
    assert manifest(trainer.run_dir.path)["status"] == "checked", "built, not yet trained"


def test_processor_receives_what_the_user_passed(
    recording_engine: type[RecordingProcessor], toy_job: dict[str, Any]
) -> None:
    toy_job["train_engine_name"] = "recording"
    trainer = AgentTrainer(**toy_job)
    calls = dict(recording_engine.calls)
    assert calls["check_agent"] is toy_job["agent"], "the user's own mapping"
    train, test = calls["check_dataset"]
    assert train is toy_job["train_dataset"] and test is None, "the user's own rows"
    assert calls["check_reward"] is BUILTIN_REWARDS["exact_match"], "a name: the function named"
    assert calls["check_config"] is toy_job["config"], "the user's own config mapping"
    # The core's checks still ran: the context holds its validated forms.
    assert trainer.context.config.max_steps == 6
    assert [c.module for c in trainer.checks if c.by == "core"] == [
        "config",
        "agent",
        "model",
        "dataset",
        "reward",
    ]
    # A value returned by a check replaces the core's form; None keeps it.
    assert trainer.hand_off.agent == {"agent_for": toy_job["agent"]}
    assert len(trainer.hand_off.dataset) == 4
    processor = trainer.manager.get_plugin("recording").processor
    assert processor.run_path == str(trainer.run_dir.path)
    assert processor.context is trainer.context


def score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None
) -> float:
    return float(solution_str.strip() == ground_truth)


def test_a_processor_receives_the_files_of_a_job_as_absolute_paths(
    recording_engine: type[RecordingProcessor], tmp_path: Path
) -> None:
    job = tmp_path / "job"
    job.mkdir()
    write_jsonl(job / "train.jsonl", ARITHMETIC)
    (job / "agent.yaml").write_text("name: adder\n")
    (job / "rewards.py").write_text("from typing import Any\n\n\n" + inspect.getsource(score))
    (job / "config.yaml").write_text("max_steps: 3\ndata: {train_batch_size: 4}\n")
    given = dict(
        agent="agent.yaml",
        train_dataset="train.jsonl",
        test_dataset="train.jsonl",
        reward_func="rewards.py:score",
        config="config.yaml",
        base_dir=job,
        run_path=tmp_path / "runs",
        train_engine_name="recording",
    )
    AgentTrainer(**given, check_only=True)
    calls = dict(recording_engine.calls)
    assert calls["check_agent"] == str(job / "agent.yaml")
    assert calls["check_dataset"] == (str(job / "train.jsonl"), str(job / "train.jsonl"))
    reward = calls["check_reward"]
    assert (reward.__name__, inspect.getfile(reward)) == ("score", str(job / "rewards.py")), (
        "a reference: the function the core loaded"
    )
    assert calls["check_config"] == str(job / "config.yaml"), "the path, for the processor to read"

    recording_engine.calls = []
    AgentTrainer(**given, overrides=["data.train_batch_size=8", "max_steps=2"], check_only=True)
    assert dict(recording_engine.calls)["check_config"] == {
        "max_steps": 2,
        "data": {"train_batch_size": 8},
    }, "with -o: the merged mapping"

    recording_engine.calls = []
    AgentTrainer(
        **dict(given, reward_func=[score, {"name": "rewards.py:score", "weight": 2}]),
        check_only=True,
    )
    reward = dict(recording_engine.calls)["check_reward"]
    assert isinstance(reward, RewardSpec), "named in part by text: one callable, the weighted total"
    assert [(f.name, f.weight) for f in reward.functions] == [("score", 1.0), ("score", 2.0)]
    assert reward("arithmetic", "4", "4") == 3.0

    recording_engine.calls = []
    AgentTrainer(**dict(given, reward_func=[score]), check_only=True)
    assert dict(recording_engine.calls)["check_reward"] == [score], "objects: the user's own"


def test_the_arguments_and_the_job_file_make_the_same_job(
    recording_engine: type[RecordingProcessor], tmp_path: Path
) -> None:
    """AWorld Train's argument names are the job's ``reward`` and ``engine``; a job file read
    with ``load_job`` resolves to the job the same arguments do, and ``ctx.given`` is that job."""
    from aworld_train.job.spec import Job, load_job

    write_jsonl(tmp_path / "train.jsonl", ARITHMETIC)
    (tmp_path / "job.yaml").write_text(
        "engine: recording\nagent: {name: adder}\ntrain_dataset: train.jsonl\n"
        "reward: exact_match\nconfig: {max_steps: 3}\nrun_path: runs\n"
    )
    from_file = AgentTrainer.from_job(
        load_job(tmp_path / "job.yaml", ["max_steps=2"]), check_only=True
    )
    from_arguments = AgentTrainer(
        agent={"name": "adder"},
        train_dataset="train.jsonl",
        reward_func="exact_match",
        config={"max_steps": 3},
        train_engine_name="recording",
        overrides=["max_steps=2"],
        base_dir=tmp_path.resolve(),
        check_only=True,
    )
    base = tmp_path.resolve()
    assert (
        from_file.job
        == from_arguments.job
        == Job(
            engine="recording",
            agent={"name": "adder"},
            train_dataset=str(base / "train.jsonl"),
            reward="exact_match",
            config={"max_steps": 2},  # the overrides merged in
            run_path=str(base / "runs"),
            overrides=("max_steps=2",),
            base_dir=base,
        )
    )
    assert from_arguments.context.given is from_arguments.job, "the one resolved job"
    assert from_file.run_path == base / "runs" == from_arguments.run_path


def test_a_model_folder_beside_the_job_reaches_the_engine_as_an_absolute_path(
    toy_job: dict[str, Any], tmp_path: Path
) -> None:
    write_model_folder(tmp_path / "build" / "model")
    toy_job.update(base_dir=tmp_path, config={**toy_job.get("config", {}), "model": "build/model"})
    trainer = AgentTrainer(**toy_job)
    expected = str((tmp_path / "build" / "model").resolve())
    assert trainer.context.config.model == expected, "engines read the config's model"
    assert trainer.hand_off.agent.model == expected, "and the agent's"


def test_one_model_named_in_two_places_as_the_same_folder_passes(
    toy_job: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's model and the common model are one model: the same folder written two ways
    (relative to the job, absolute) is the same model."""
    folder = write_model_folder(tmp_path / "build" / "model").resolve()
    monkeypatch.chdir(tmp_path / "build")
    toy_job.update(
        base_dir=tmp_path,
        agent={"name": "adder", "model": "build/model"},
        config={**toy_job["config"], "model": str(folder)},
    )
    trainer = AgentTrainer(**toy_job, check_only=True)
    assert trainer.context.config.model == str(folder)
    assert trainer.hand_off.agent.model == str(folder)


def test_two_models_that_disagree_are_one_line_naming_both(toy_job: dict[str, Any]) -> None:
    """The agent's model against the common model: no longer silently the config's."""
    toy_job.update(
        agent={"name": "adder", "model": "org/agent-model"},
        config={**toy_job["config"], "model": "org/config-model"},
    )
    with pytest.raises(
        ConfigError,
        match=r"^config key 'model' names org/config-model but agent "
        r"'adder' model names org/agent-model: name the model "
        r"once$",
    ):
        AgentTrainer(**toy_job)
    assert list(toy_job["run_path"].iterdir()) == []


def test_a_model_override_replaces_the_model_the_job_names(toy_job: dict[str, Any]) -> None:
    """-o model=... on the command line trains another model than the agent file names."""
    toy_job["agent"] = {"name": "adder", "model": "org/agent-model"}
    trainer = AgentTrainer(**toy_job, overrides=["model=org/other-model"], check_only=True)
    assert trainer.context.config.model == "org/other-model"
    assert trainer.hand_off.agent.model == "org/other-model"


def test_registered_processor_goes_through_the_same_plugin_manager(
    recording_engine: type[RecordingProcessor], toy_job: dict[str, Any]
) -> None:
    listed = {info.name: info for info in plugins.list_engines()}
    assert listed["recording"].distribution == plugins.REGISTERED
    assert plugins.check_engine(listed["recording"]).status == "ok"

    toy_job["train_engine_name"] = "recording"
    trainer = AgentTrainer(**toy_job)
    assert isinstance(trainer.manager.get_plugin("recording"), ProcessorPlugin)
    # The extension plugin loaded from its entry point sees the processor's hooks too.
    assert trainer.manager.get_plugin("plugin:recorder") is not None
    final = trainer.train()
    assert final == {"reward": 0.75, "initialized_before_train": 1.0}
    recorded = read_jsonl(trainer.run_dir.path / "recorded.jsonl")
    assert [r["step"] for r in recorded if r["hook"] == "report_metrics"] == [1, 2]
    assert manifest(trainer.run_dir.path)["status"] == "completed"


class StatefulProcessor(TrainerProcessor):
    """Written as for AWorld Train: checks keep what the user passed on ``self``, ``train``
    uses it and writes into ``self.run_path``; ``inference`` is an extra method the core never
    calls."""

    def check_agent(self, agent: Any = None) -> Any:
        self.agent = agent
        return None

    def check_dataset(self, dataset: Any = None, test_dataset: Any = None) -> Any:
        self.dataset = dataset
        return None

    def check_reward(self, reward_func: Any = None) -> Any:
        self.reward_func = reward_func
        return None

    def check_config(self, config: Any = None) -> Any:
        self.config = config
        return None

    def inference(self, dataset: Any = None) -> Any:
        raise AssertionError("the core does not call inference")

    def train(self) -> Any:
        answers = [row["ground_truth"] for row in self.dataset]
        scores = [
            self.reward_func("arithmetic", answer, row["ground_truth"])
            for row, answer in zip(self.dataset, answers)
        ]
        (Path(self.run_path) / "model.txt").write_text(
            f"{self.agent['name']} ({self.reward_func.__name__}, {self.config['max_steps']} "
            f"steps): {answers}"
        )
        return {"reward": sum(scores) / len(scores)}


def test_a_processor_written_for_aworld_train_trains_unchanged(toy_job: dict[str, Any]) -> None:
    AgentTrainer.register_processor("stateful", StatefulProcessor)
    toy_job.update(train_engine_name="stateful", reward_func=score)
    trainer = AgentTrainer(**toy_job)
    assert trainer.train() == {"reward": 1.0}
    assert (trainer.run_dir.path / "model.txt").read_text() == (
        "adder (score, 6 steps): ['2', '3', '4', '5']"
    )
    assert manifest(trainer.run_dir.path)["status"] == "completed"


def test_unregister_processor_removes_the_engine(toy_job: dict[str, Any]) -> None:
    AgentTrainer.register_processor("custom", RecordingProcessor)
    assert plugins.find_engine("custom").target is RecordingProcessor
    AgentTrainer.unregister_processor("custom")
    with pytest.raises(PluginError, match="unknown engine 'custom'"):
        plugins.find_engine("custom")
    AgentTrainer.unregister_processor("custom")  # absent: no error
    toy_job["train_engine_name"] = "custom"
    with pytest.raises(PluginError, match="unknown engine 'custom'"):
        AgentTrainer(**toy_job)
    assert not toy_job["run_path"].exists()


def test_register_processor_rejects_what_is_not_a_processor_subclass() -> None:
    class NotAProcessor:
        def train(self) -> None: ...

    with pytest.raises(PluginError, match="TrainerProcessor subclass"):
        AgentTrainer.register_processor("custom", NotAProcessor)
    with pytest.raises(PluginError, match="TrainerProcessor subclass"):
        AgentTrainer.register_processor("custom", RecordingProcessor("x"))  # type: ignore[arg-type]


def test_register_processor_rejects_a_taken_name(recording_engine: type) -> None:
    with pytest.raises(PluginError, match="'recording' is already registered"):
        AgentTrainer.register_processor("recording", RecordingProcessor)
    with pytest.raises(PluginError, match="'toy' is already registered"):
        AgentTrainer.register_processor("toy", RecordingProcessor)


def test_an_incomplete_processor_is_a_plugin_error_naming_the_engine(
    toy_job: dict[str, Any],
) -> None:
    class HalfDone(TrainerProcessor):
        def check_agent(self, agent: Any) -> Any:
            return None

    AgentTrainer.register_processor("half", HalfDone)
    status = plugins.check_engine(plugins.find_engine("half")).status
    assert status.startswith("broken: ") and "does not implement" in status
    toy_job["train_engine_name"] = "half"
    with pytest.raises(
        PluginError,
        match="engine 'half' from .*HalfDone does not implement "
        "check_config, check_dataset, check_reward, train",
    ):
        AgentTrainer(**toy_job, check_only=True)


def test_verl_is_the_default_among_several_engines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_LOAD_PLUGINS", "aworld-train-toy")
    AgentTrainer.register_processor("verl", RecordingProcessor)
    assert plugins.default_engine(None) == "verl"
    assert plugins.default_engine("toy") == "toy"


def test_train_after_a_check_only_construction_says_what_to_do(toy_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**toy_job, check_only=True)
    assert trainer.initialized
    with pytest.raises(
        JobError,
        match=r"^this trainer was made with check_only=True: it ran "
        r"the checks only; create AgentTrainer\(\.\.\.\) "
        r"without check_only to train$",
    ):
        trainer.train()


def test_train_raises_value_error_when_not_initialised(toy_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**toy_job)
    trainer.initialized = False
    with pytest.raises(ValueError, match="^Train engine toy is not initialized$"):
        trainer.train()
    assert not (trainer.run_dir.path / "model").exists(), "train ran although refused"


def test_the_surface_shared_with_aworld_train_refuses_with_value_errors(
    toy_job: dict[str, Any], recording_engine: type
) -> None:
    from aworld_train.job.spec import Job

    # Each call as AWorld Train's documentation uses it, wrapped as code written for it is: in
    # ``except ValueError``. The error is the project's own type all the same, with its line.
    toy_job["config"] = {**toy_job["config"], "learning_rat": 0.1}
    with pytest.raises(ValueError, match="learning_rat") as raised:
        AgentTrainer(**toy_job)
    assert isinstance(raised.value, ConfigError)
    assert type(raised.value).__name__ == "ConfigError"
    job = Job(
        engine="toy",
        agent=toy_job["agent"],
        train_dataset=toy_job["train_dataset"],
        reward=toy_job["reward_func"],
        config=toy_job["config"],
        run_path=toy_job["run_path"],
    )
    with pytest.raises(ConfigError) as from_job:  # the project's own API: not a ValueError
        AgentTrainer.from_job(job)
    assert not isinstance(from_job.value, ValueError)
    assert str(from_job.value) == str(raised.value)
    assert type(pickle.loads(pickle.dumps(raised.value))) is ConfigError  # to another process
    del toy_job["config"]["learning_rat"]

    toy_job["train_engine_name"] = "no-such-engine"
    with pytest.raises(ValueError, match="unknown engine 'no-such-engine'"):
        AgentTrainer(**toy_job)
    with pytest.raises(ValueError, match="'recording' is already registered"):
        AgentTrainer.register_processor("recording", RecordingProcessor)
    with pytest.raises(ValueError, match="TrainerProcessor subclass"):
        AgentTrainer.register_processor("custom", dict)
    AgentTrainer.unregister_processor("never-registered")  # as in AWorld Train: no error

    toy_job["train_engine_name"] = "toy"
    with pytest.raises(ValueError, match="check_only=True"):
        AgentTrainer(**toy_job, check_only=True).train()
    with pytest.raises(ValueError, match="no run to evaluate"):
        AgentTrainer(**toy_job, check_only=True).inference()
    trainer = AgentTrainer(**toy_job)
    trainer.train()
    with pytest.raises(ValueError, match="already ended"):
        trainer.train()


def test_an_engine_crash_is_not_a_value_error(toy_job: dict[str, Any]) -> None:
    class Crashing(RecordingProcessor):
        def train(self) -> None:
            raise RuntimeError("out of disk")

    AgentTrainer.register_processor("crashing", Crashing)
    try:
        toy_job["train_engine_name"] = "crashing"
        with pytest.raises(TrainingCrash, match="out of disk") as raised:
            AgentTrainer(**toy_job).train()
        assert not isinstance(raised.value, ValueError), "a crash is not a refusal"
        assert isinstance(raised.value.__cause__, RuntimeError)
    finally:
        AgentTrainer.unregister_processor("crashing")


def test_a_trainer_trains_once(toy_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**toy_job)
    trainer.train()
    records = (trainer.run_dir.path / "metrics.jsonl").read_text()
    with pytest.raises(ValueError, match=r"already ended \(completed\); create a new AgentTrainer"):
        trainer.train()
    assert (trainer.run_dir.path / "metrics.jsonl").read_text() == records, "nothing appended"
    assert manifest(trainer.run_dir.path)["status"] == "completed"


def test_check_only_runs_every_check_and_writes_nothing(toy_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**toy_job, check_only=True)
    assert {c.module for c in trainer.checks if c.by == "toy"} == {
        "agent",
        "dataset",
        "reward",
        "config",
    }
    assert trainer.context.check_only
    assert not toy_job["run_path"].exists()
    assert not trainer.run_dir.path.exists(), "the scratch directory was removed"


def test_check_only_refuses_a_run_path_that_is_a_file(toy_job: dict[str, Any]) -> None:
    from aworld_train.errors import RunDirectoryError

    toy_job["run_path"].write_text("a file")
    with pytest.raises(RunDirectoryError, match="runs is a file, not a directory"):
        AgentTrainer(**toy_job, check_only=True)


def test_engine_is_the_only_installed_one_when_none_is_named(
    monkeypatch: pytest.MonkeyPatch, toy_job: dict[str, Any]
) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_LOAD_PLUGINS", "aworld-train-dup")
    toy_job["train_engine_name"] = None
    trainer = AgentTrainer(**toy_job, check_only=True)
    assert trainer.train_engine_name == "twin"
    assert trainer.engine_info.distribution == "aworld-train-dup"


def test_the_model_check_runs_before_the_engines_and_honours_trust_remote_code(
    recording_engine: type[RecordingProcessor], toy_job: dict[str, Any], tmp_path: Path
) -> None:
    write_model_folder(tmp_path / "model", auto_map={"AutoConfig": "configuration_x.XConfig"})
    (tmp_path / "model" / "configuration_x.py").write_text("raise SystemExit('ran')\n")
    toy_job.update(
        train_engine_name="recording",
        base_dir=tmp_path,
        config={**toy_job["config"], "model": "model"},
    )
    with pytest.raises(ModelError, match="trust_remote_code: true"):
        AgentTrainer(**toy_job, check_only=True)
    assert recording_engine.calls == [], "no engine hook saw a model the core refused"
    toy_job["config"]["trust_remote_code"] = True
    trainer = AgentTrainer(**toy_job, check_only=True)
    model_row = next(c for c in trainer.checks if c.module == "model")
    assert model_row.detail.startswith(f"local folder {tmp_path / 'model'}")


def test_a_hub_id_is_kept_and_not_contacted(
    recording_engine: type[RecordingProcessor], toy_job: dict[str, Any]
) -> None:
    toy_job.update(
        train_engine_name="recording",
        config={**toy_job["config"], "model": "Qwen/Qwen2.5-0.5B-Instruct"},
    )
    trainer = AgentTrainer(**toy_job, check_only=True)
    assert trainer.context.config.model == "Qwen/Qwen2.5-0.5B-Instruct"
    assert [c.detail for c in trainer.checks if c.module == "model"] == [
        "hub id Qwen/Qwen2.5-0.5B-Instruct (not contacted during the checks)"
    ]


def test_lengths_are_compared_with_the_models_positions(
    recording_engine: type[RecordingProcessor], toy_job: dict[str, Any], tmp_path: Path
) -> None:
    pytest.importorskip("transformers", reason="prompts are rendered with the model's tokenizer")
    from aworld_train.testing import build_tiny_model

    model = build_tiny_model(tmp_path / "tiny")
    toy_job.update(
        train_engine_name="recording", config={"model": str(model), "max_completion_length": 16}
    )
    trainer = AgentTrainer(**toy_job, check_only=True)
    assert [c.detail for c in trainer.checks if c.module == "lengths"] == [
        "the longest prompts plus the completion fit the model's context"
    ]
    toy_job["train_dataset"] = [
        *toy_job["train_dataset"],
        {"prompt": "many words " * 5000, "ground_truth": "1"},
    ]
    with pytest.raises(ModelError, match="row 4"):
        AgentTrainer(**toy_job, check_only=True)


def test_a_processor_receives_none_for_what_the_user_did_not_give(
    recording_engine: type[RecordingProcessor], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The recorder plugin counts the rows it sees: it needs a dataset (see the next test).
    monkeypatch.setenv("AWORLD_TRAIN_DISABLE_PLUGINS", "aworld-train-recorder")
    # As AWorld Train's docs show it: an agent and an engine, nothing else.
    trainer = AgentTrainer(agent={"name": "mine"}, train_engine_name="recording", check_only=True)
    calls = dict(recording_engine.calls)
    assert calls["check_agent"] == {"name": "mine"}
    assert calls["check_dataset"] == (None, None)
    assert calls["check_reward"] is None
    assert calls["check_config"] is None
    assert isinstance(trainer.context.config, TrainConfig), "the core's config all the same"
    assert [(c.module, c.detail) for c in trainer.checks if c.by == "core"][-2:] == [
        ("dataset", "none given"),
        ("reward", "none given"),
    ]

    recording_engine.calls = []
    AgentTrainer(train_engine_name="recording", check_only=True)
    assert dict(recording_engine.calls)["check_agent"] is None, "no agent given"


def test_an_extension_plugin_that_raises_in_a_check_is_named_not_the_engine(
    recording_engine: type[RecordingProcessor],
) -> None:
    # The recorder's check_dataset wrapper takes len() of the dataset, which is None here.
    with pytest.raises(PluginError) as raised:
        AgentTrainer(agent={"name": "mine"}, train_engine_name="recording", check_only=True)
    assert str(raised.value) == (
        "plugin 'recorder' (aworld-train-recorder 0.1.0) check_dataset raised TypeError: "
        "object of type 'NoneType' has no len()"
    )


def test_an_engine_that_needs_a_dataset_refuses_none_itself(toy_job: dict[str, Any]) -> None:
    class NeedsRows(RecordingProcessor):
        def check_dataset(self, dataset: Any, test_dataset: Any = None) -> Any:
            if dataset is None:
                raise DatasetError("the needs-rows engine needs a train_dataset")
            return None

    AgentTrainer.register_processor("needs-rows", NeedsRows)
    with pytest.raises(DatasetError, match="needs a train_dataset"):
        AgentTrainer(agent={"name": "a"}, train_engine_name="needs-rows", check_only=True)


class RaisesInCheckConfig(RecordingProcessor):
    def check_config(self, config: Any) -> Any:
        raise RuntimeError("engine bug\non two lines")


def test_an_engine_hook_raising_a_bug_is_one_line_naming_the_engine_and_the_hook(
    toy_job: dict[str, Any],
) -> None:
    AgentTrainer.register_processor("buggy", RaisesInCheckConfig)
    toy_job["train_engine_name"] = "buggy"
    with pytest.raises(PluginError) as raised:
        AgentTrainer(**toy_job)
    assert str(raised.value) == (
        "engine 'buggy' (registered in-process) check_config raised "
        "RuntimeError: engine bug on two lines"
    )
    assert isinstance(raised.value.__cause__, RuntimeError), "the traceback is kept for --debug"
    assert list(toy_job["run_path"].iterdir()) == [], "a failed check leaves no run"


class SaysTwoLines(RecordingProcessor):
    """Raises its own mistakes with the message on two lines, in a check and in ``train``."""

    where = "check"

    def check_config(self, config: Any) -> Any:
        if self.where == "check":
            raise ConfigError("config trl.beta: must be a number,\n   not 'high'")
        return None

    def train(self) -> Any:
        raise ConfigError("config trl.beta: must be a number,\n   not 'high'")


def the_cli_line(error: BaseException) -> str:
    """What the CLI prints after ``error:`` for ``error``."""
    from aworld_train.cli import _one_line

    return _one_line(str(error))


@pytest.mark.parametrize("where", ["check", "train"])
def test_an_engines_own_error_reaches_python_as_the_cli_line(
    toy_job: dict[str, Any], where: str
) -> None:
    SaysTwoLines.where = where
    AgentTrainer.register_processor("two-lines", SaysTwoLines)
    toy_job["train_engine_name"] = "two-lines"
    with pytest.raises(ConfigError) as raised:
        AgentTrainer(**toy_job).train()
    assert str(raised.value) == "config trl.beta: must be a number, not 'high'"
    assert str(raised.value) == the_cli_line(raised.value)


def test_a_crash_of_the_checks_outside_any_hook_is_one_line_with_its_cause(
    toy_job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from aworld_train import checks, trainer
    from aworld_train.errors import CheckCrash

    def breaks() -> None:
        raise RuntimeError("a bug\nin the core")

    monkeypatch.setattr(
        trainer, "CHECKS", (*checks.CHECKS[:3], checks.Check("dataset", "core", breaks, None))
    )
    with pytest.raises(AWorldTrainError) as raised:
        AgentTrainer(**toy_job)
    assert isinstance(raised.value, CheckCrash)
    assert str(raised.value).startswith(
        "the checks raised RuntimeError: a bug in the core at test_api.py:"
    )
    assert str(raised.value).endswith("; --debug shows the traceback")
    assert str(raised.value) == the_cli_line(raised.value)
    assert isinstance(raised.value.__cause__, RuntimeError), "the traceback stays at hand"
    assert list(toy_job["run_path"].iterdir()) == [], "a failed check leaves no run"


def test_refusals_to_train_are_the_projects_errors(toy_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**toy_job)
    trainer.train()
    with pytest.raises(AWorldTrainError, match="already ended"):
        trainer.train()
    trainer.initialized = False
    with pytest.raises(AWorldTrainError, match="is not initialized"):
        trainer.train()


def test_progress_is_shown_by_default_from_python(
    toy_job: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    AgentTrainer(**toy_job, check_only=True)
    assert "training" not in capsys.readouterr().out, "a check-only run shows no progress"
    AgentTrainer(**toy_job).train()
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("training  step 6/6 (100%)") for line in lines), lines
    AgentTrainer(**toy_job, show_progress=False).train()
    assert "training" not in capsys.readouterr().out


@pytest.mark.slow
def test_a_check_run_imports_neither_aworld_nor_torch(tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "from aworld_train import AgentTrainer\n"
        f"rows = {ARITHMETIC!r}\n"
        "AgentTrainer(agent={'name': 'adder'}, train_dataset=rows, reward_func='answer_match',\n"
        "             train_engine_name='toy', check_only=True)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    result = run_python(code, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    imported = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert "aworld_train_toy" in imported
    assert not imported & {"aworld", "torch", "transformers", "trl", "verl", "swift", "ray"}
