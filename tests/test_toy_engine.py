"""The toy engine end to end: it learns, honours the common config and its own section, and
passes the engine conformance suite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.errors import ConfigError
from aworld_train.reward._builtin import exact_match
from aworld_train.testing.conformance import EngineConformance
from aworld_train_toy.policy import POLICY_FILE
from helpers import read_jsonl, write_model_folder


def train_toy(job: dict[str, Any], **config: Any) -> tuple[dict[str, Any], Path]:
    job["config"] = dict(job["config"], **config)
    trainer = AgentTrainer(**job)
    final = trainer.train()
    return final, trainer.run_dir.path


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_mean_reward_rises_on_a_simple_task(toy_job: dict[str, Any]) -> None:
    final, run_dir = train_toy(toy_job, max_steps=60, batch_size=8)
    rewards = [r["reward"] for r in read_jsonl(run_dir / "metrics.jsonl")]
    assert len(rewards) == 60
    assert mean(rewards[:10]) < 0.5, "a uniform policy over four answers scores about 0.25"
    assert mean(rewards[-10:]) > 0.8
    assert final["greedy_reward"] == 1.0, "the trained policy answers every question right"
    policy = json.loads((run_dir / "model" / "policy.json").read_text())
    assert policy["step"] == 60 and policy["candidates"] == ["2", "3", "4", "5"]


@pytest.mark.slow
def test_training_is_reproducible_from_the_seed(toy_job: dict[str, Any]) -> None:
    first = [r["reward"] for r in read_jsonl(train_toy(dict(toy_job), seed=1)[1] / "metrics.jsonl")]
    again = [r["reward"] for r in read_jsonl(train_toy(dict(toy_job), seed=1)[1] / "metrics.jsonl")]
    other = [r["reward"] for r in read_jsonl(train_toy(dict(toy_job), seed=2)[1] / "metrics.jsonl")]
    assert first == again
    assert first != other


def test_batch_size_and_max_steps_are_honoured(toy_job: dict[str, Any]) -> None:
    calls: list[str] = []

    def counting(
        data_source: str,
        solution_str: str,
        ground_truth: str,
        extra_info: dict[str, Any] | None = None,
    ) -> float:
        calls.append(solution_str)
        return exact_match(data_source, solution_str, ground_truth)

    toy_job["reward_func"] = counting
    train_toy(toy_job, max_steps=5, batch_size=3)
    # batch_size calls per step, then a greedy pass over the 4 rows; the sample-row check
    # scored its row in a child process, which this list does not see.
    assert len(calls) == 5 * 3 + 4


def test_logging_and_save_steps_are_honoured(toy_job: dict[str, Any]) -> None:
    _, run_dir = train_toy(toy_job, max_steps=12, logging_steps=5, save_steps=4)
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [5, 10, 12]
    assert sorted(p.name for p in run_dir.glob("checkpoint-*")) == [
        "checkpoint-12",
        "checkpoint-4",
        "checkpoint-8",
    ]
    saved = json.loads((run_dir / "checkpoint-8" / "policy.json").read_text())
    assert saved["step"] == 8


def test_a_tiny_learning_rate_leaves_the_policy_almost_uniform(toy_job: dict[str, Any]) -> None:
    _, run_dir = train_toy(toy_job, learning_rate=1e-9)
    logits = json.loads((run_dir / "model" / "policy.json").read_text())["logits"]
    assert logits and all(abs(value) < 1e-6 for values in logits.values() for value in values)


def test_engine_section_sets_candidates_and_temperature(toy_job: dict[str, Any]) -> None:
    toy_job["config"] = dict(toy_job["config"], toy={"candidates": ["4", "5"], "temperature": 2.0})
    settings = AgentTrainer(**toy_job, check_only=True).hand_off.config
    assert settings.candidates == ("4", "5") and settings.temperature == 2.0


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"temprature": 1.0}, "unknown toy key 'toy.temprature' (did you mean 'temperature'?)"),
        ({"temperature": 0}, "'toy.temperature' must be a positive number, got 0"),
        ({"temperature": "hot"}, "'toy.temperature' must be a positive number"),
        ({"candidates": []}, "'toy.candidates' must be a non-empty list of strings"),
        ({"candidates": [4, 5]}, "'toy.candidates' must be a non-empty list of strings"),
    ],
)
def test_engine_section_is_validated(
    toy_job: dict[str, Any], section: dict[str, Any], message: str
) -> None:
    toy_job["config"] = dict(toy_job["config"], toy=section)
    with pytest.raises(ConfigError) as raised:
        AgentTrainer(**toy_job, check_only=True)
    assert message in str(raised.value)


def test_unsupported_algorithm_is_a_config_error(toy_job: dict[str, Any]) -> None:
    toy_job["config"] = dict(toy_job["config"], algorithm="sft")
    with pytest.raises(ConfigError, match="algorithm 'sft' is not supported by the toy engine"):
        AgentTrainer(**toy_job, check_only=True)


def test_the_same_module_under_another_name_reads_its_own_section(
    toy_job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_DISABLE_PLUGINS", "aworld-train-dup")
    toy_job["train_engine_name"] = "twin"
    toy_job["config"] = dict(toy_job["config"], twin={"temperature": 3.0}, toy={"temperature": 9})
    settings = AgentTrainer(**toy_job, check_only=True).hand_off.config
    assert settings.temperature == 3.0


class TestToyConformance(EngineConformance):
    """The toy engine passes the conformance suite every engine subclasses."""

    engine_name = "toy"
    engine_section = {"temperature": 1.0}

    @pytest.fixture(scope="class")
    @classmethod
    def tiny_model(cls, tmp_path_factory: pytest.TempPathFactory) -> Path:
        # The toy policy is a table: it loads no model, and this environment has no torch; the
        # folder only has to pass the core's model check.
        return write_model_folder(tmp_path_factory.mktemp("no-model") / "model")

    def cut_short_checkpoint(self, run: Path, step: int) -> Path:
        # The toy writes a checkpoint's policy whole, then renames it into place: a stop while
        # saving leaves the folder with the policy half written under its temporary name.
        partial = run / f"checkpoint-{step}"
        partial.mkdir()
        (partial / f"{POLICY_FILE}.tmp").write_text('{"step": ')
        return partial
