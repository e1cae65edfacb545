"""A ``TrainerProcessor`` fed what the job means: from a job file, the dataset with ``columns``
applied (a canonical file in the run directory) and the reward as the callable the core loaded;
from Python, the user's own objects. A near miss of a common key is refused on a processor too,
while the processor's own keys pass."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aworld_train import AgentTrainer, TrainerProcessor, plugins
from aworld_train.job.config import near_common_key
from aworld_train.reward import RewardSpec
from aworld_train.testing.fixtures import one_error_line
from helpers import ARITHMETIC, only_run_dir, run_cli, write_jsonl

REWARDS = """
def score(data_source, solution_str, ground_truth, extra_info=None):
    return float(solution_str.strip() == ground_truth)


def length(data_source, solution_str, ground_truth, extra_info=None):
    return float(len(solution_str))
"""

QUESTIONS = [{"question": row["prompt"], "answer": row["ground_truth"]} for row in ARITHMETIC]


class FileReadingProcessor(TrainerProcessor):
    """An engine that reads its dataset file itself and scores each row's ground truth with
    the reward it was handed, as a VeRL-style processor does."""

    seen: dict[str, Any] = {}

    def check_agent(self, agent: Any) -> None:
        return None

    def check_dataset(self, dataset: Any, test_dataset: Any = None) -> None:
        self.seen.update(dataset=dataset, test_dataset=test_dataset)
        # Read now: a check-only run's directory is gone once the checks end.
        if isinstance(dataset, str):
            self.seen["rows"] = read_rows(Path(dataset))
        if isinstance(test_dataset, str):
            self.seen["test_rows"] = read_rows(Path(test_dataset))

    def check_reward(self, reward_func: Any) -> None:
        self.seen["reward"] = reward_func

    def check_config(self, config: Any) -> None:
        self.seen["config"] = config

    def train(self) -> dict[str, float]:
        rows, reward = self.seen["rows"], self.seen["reward"]
        scores = [
            reward(row["data_source"], row["ground_truth"], row["ground_truth"], row["extra_info"])
            for row in rows
        ]
        self.context.metrics.log(1, {"reward": sum(scores) / len(scores)})
        return {"reward": sum(scores) / len(scores)}


def read_rows(path: Path) -> list[dict[str, Any]]:
    """A dataset file's rows, read as a processor would (no aworld_train)."""
    if path.suffix == ".parquet":
        import pyarrow.parquet

        return pyarrow.parquet.read_table(path).to_pylist()
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return [json.loads(line) for line in path.read_text().splitlines() if line]


@pytest.fixture
def reader() -> type[FileReadingProcessor]:
    FileReadingProcessor.seen = {}
    plugins.register_processor("reader", FileReadingProcessor)
    return FileReadingProcessor


def write_job(folder: Path, **fields: Any) -> Path:
    """A job on the processor ``reader``: question/answer rows mapped by ``columns``."""
    write_jsonl(folder / "train.jsonl", QUESTIONS)
    (folder / "rewards.py").write_text(REWARDS)
    job = {
        "engine": "reader",
        "agent": {"name": "adder"},
        "train_dataset": "train.jsonl",
        "test_dataset": "train.jsonl",
        "reward": "rewards.py:score",
        "columns": {"prompt": "question", "ground_truth": "answer"},
        "config": {"max_steps": 1},
        **fields,
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def test_a_job_file_gives_a_processor_its_columns_applied_and_the_loaded_reward(
    reader: type[FileReadingProcessor], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_cli(capsys, "train", write_job(tmp_path), "--run-path", tmp_path / "runs")
    assert code == 0, err
    run = only_run_dir(tmp_path / "runs")
    seen = reader.seen
    assert seen["dataset"] == str(run / "dataset" / "train.jsonl"), "a canonical file in the run"
    assert seen["test_dataset"] == str(run / "dataset" / "test.jsonl")
    assert [(row["prompt"], row["ground_truth"]) for row in seen["rows"]] == [
        (row["prompt"], row["ground_truth"]) for row in ARITHMETIC
    ]
    assert seen["rows"][0]["data_source"] == "train" and seen["rows"][2]["extra_info"] == {
        "index": 2
    }
    assert callable(seen["reward"]) and seen["reward"].__name__ == "score"
    assert seen["reward"]("train", "4", "4") == 1.0 and seen["reward"]("train", "5", "4") == 0.0
    final = json.loads((run / "manifest.json").read_text())
    assert final["status"] == "completed" and final["final_metrics"]["reward"] == 1.0
    # The user's own file is untouched, and without columns the processor gets it as it is.
    assert (tmp_path / "train.jsonl").read_text().startswith('{"question"')


def test_without_columns_a_processor_gets_the_users_file(
    reader: type[FileReadingProcessor], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, columns=None)
    write_jsonl(tmp_path / "train.jsonl", ARITHMETIC)
    code, _, err = run_cli(capsys, "check", job)
    assert code == 0, err
    assert reader.seen["dataset"] == str(tmp_path / "train.jsonl")


def test_the_canonical_file_keeps_the_users_format_except_csv(
    reader: type[FileReadingProcessor], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import datasets

    datasets.Dataset.from_list(QUESTIONS).to_parquet(tmp_path / "train.parquet")
    with (tmp_path / "test.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["question", "answer"])
        writer.writeheader()
        writer.writerows(QUESTIONS)
    job = write_job(tmp_path, train_dataset="train.parquet", test_dataset="test.csv")
    code, _, err = run_cli(capsys, "check", job)
    assert code == 0, err
    train, test = Path(reader.seen["dataset"]), Path(reader.seen["test_dataset"])
    assert (train.name, test.name) == ("train.parquet", "test.jsonl")
    for rows in (reader.seen["rows"], reader.seen["test_rows"]):
        assert [row["ground_truth"] for row in rows] == [row["ground_truth"] for row in ARITHMETIC]


def test_several_rewards_named_in_a_job_are_one_callable_of_the_weighted_total(
    reader: type[FileReadingProcessor], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(
        tmp_path, reward=["rewards.py:score", {"name": "rewards.py:length", "weight": 0.5}]
    )
    code, _, err = run_cli(capsys, "check", job)
    assert code == 0, err
    reward = reader.seen["reward"]
    assert isinstance(reward, RewardSpec)
    assert reward("train", "12", "12") == 1.0 + 0.5 * 2


def test_a_built_in_reward_named_in_a_job_is_its_function(
    reader: type[FileReadingProcessor], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aworld_train.reward._builtin import BUILTIN_REWARDS

    code, _, err = run_cli(capsys, "check", write_job(tmp_path, reward="exact_match"))
    assert code == 0, err
    assert reader.seen["reward"] is BUILTIN_REWARDS["exact_match"]


def test_from_python_a_processor_gets_the_users_own_objects(
    reader: type[FileReadingProcessor], tmp_path: Path
) -> None:
    def my_reward(
        data_source: str,
        solution_str: str,
        ground_truth: str,
        extra_info: dict[str, Any] | None = None,
    ) -> float:
        return float(solution_str == ground_truth)

    rows = [dict(row) for row in QUESTIONS]
    config = {"max_steps": 1}
    AgentTrainer(
        agent={"name": "adder"},
        train_dataset=rows,
        reward_func=my_reward,
        config=config,
        columns={"prompt": "question", "ground_truth": "answer"},
        run_path=tmp_path / "runs",
        train_engine_name="reader",
        check_only=True,
    )
    assert reader.seen["dataset"] is rows and rows == QUESTIONS, "the user's rows, unchanged"
    assert reader.seen["reward"] is my_reward
    assert reader.seen["config"] is config


def test_a_near_miss_of_a_common_key_is_refused_on_a_processor(
    reader: type[FileReadingProcessor], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, config={"max_steps": 1, "learning_rat": 0.1})
    line = one_error_line(*run_cli(capsys, "check", job)[::2])
    assert (
        line.startswith(
            "error: config: unknown config key 'learning_rat' (did you mean 'learning_rate'?)"
        )
        and "engine 'reader'" in line
    )

    (tmp_path / "config.yaml").write_text("max_steps: 1\nlearning_rat: 0.1\n")
    job = write_job(tmp_path, config="config.yaml")
    line = one_error_line(*run_cli(capsys, "train", job, "--run-path", tmp_path / "runs")[::2])
    assert (
        f"{tmp_path / 'config.yaml'}: unknown config key 'learning_rat' (did you mean "
        "'learning_rate'?)"
    ) in line

    job = write_job(tmp_path)
    line = one_error_line(*run_cli(capsys, "check", job, "-o", "max_step=3")[::2])
    assert line.startswith("error: -o: unknown config key 'max_step' (did you mean 'max_steps'?)")
    assert list((tmp_path / "runs").iterdir()) == [], "no run is left behind"


def test_a_processors_own_keys_pass(
    reader: type[FileReadingProcessor], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = {
        "mode": "fast",
        "model_path": "some/model",
        "clip_ratio_c": 3.0,
        "epochs": 2,
        "data": {"train_batch_size": 4},
    }
    job = write_job(tmp_path, config={"max_steps": 1, **own})
    code, _, err = run_cli(capsys, "check", job)
    assert code == 0, err
    assert reader.seen["config"] == {"max_steps": 1, **own}, "the job's config, as written"


@pytest.mark.parametrize(
    ("key", "near"),
    [
        ("learning_rat", "learning_rate"),
        ("learningRate", "learning_rate"),
        ("LEARNING-RATE", "learning_rate"),
        ("modle", "model"),
        ("sede", "seed"),
        ("kl_coeff", "kl_coef"),
        ("num_generation", "num_generations"),
        ("resource", "resources"),
        ("mode", None),
        ("models", None),
        ("model_path", None),
        ("clip_ratio_c", None),
        ("seed_everything", None),
        ("min_steps", None),
        ("warmup_steps", None),
        ("algorithm", None),
        ("trainer", None),
        ("reward_model", None),
        ("actor_rollout_ref", None),
    ],
)
def test_what_a_near_miss_is(key: str, near: str | None) -> None:
    assert near_common_key(key) == near
