"""The job file: fields, relative paths, flags that replace fields, and its errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from aworld_train.errors import JobError
from aworld_train.job import JOB_FIELDS, load_job


def test_job_file_fields_and_base_dir(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(
        "engine: toy\n"
        "agent: {name: adder}\n"
        "train_dataset: data/train.jsonl\n"
        "reward: rewards.py:score\n"
        "columns: {prompt: question, ground_truth: answer}\n"
        "config: {max_steps: 5, toy: {temperature: 0.5}}\n"
    )
    job = load_job(tmp_path / "job.yaml")
    assert job.engine == "toy"
    assert job.agent == {"name": "adder"}
    assert job.train_dataset == "data/train.jsonl", "kept relative to base_dir"
    assert job.base_dir == tmp_path.resolve()
    assert job.columns == {"prompt": "question", "ground_truth": "answer"}
    assert job.config == {"max_steps": 5, "toy": {"temperature": 0.5}}
    assert job.run_path == "runs"
    assert job.test_dataset is None


def test_flags_replace_fields_and_become_absolute(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "job.yaml").write_text("engine: toy\ntrain_dataset: a.jsonl\nreward: exact_match\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "b.jsonl").write_text("")
    monkeypatch.chdir(elsewhere)
    job = load_job(tmp_path / "job.yaml", engine="twin", train_dataset="b.jsonl",
                   reward="mine.py:score", test_dataset=None)
    assert job.engine == "twin"
    assert job.train_dataset == str((elsewhere / "b.jsonl").resolve())
    assert job.reward == f"{(elsewhere / 'mine.py').resolve()}:score"
    assert job.test_dataset is None, "a flag left unset keeps the file's field"
    assert load_job(None, train_dataset="b.jsonl", reward="answer_match").reward == "answer_match"


def test_job_file_missing(tmp_path: Path) -> None:
    with pytest.raises(JobError, match=r"job file not found: .*nope\.yaml"):
        load_job(tmp_path / "nope.yaml")


def test_job_file_with_a_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("engine: toy\ntrain_dataset: [a.jsonl\nreward: x\n")
    with pytest.raises(JobError, match=r"job\.yaml:\d+: invalid YAML"):
        load_job(tmp_path / "job.yaml")


def test_job_file_with_an_unknown_field_suggests_one(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("engine: toy\ntrain_datset: a.jsonl\n")
    with pytest.raises(JobError) as raised:
        load_job(tmp_path / "job.yaml")
    message = str(raised.value)
    assert "job.yaml: unknown job field 'train_datset' (did you mean 'train_dataset'?)" in message
    assert all(field in message for field in JOB_FIELDS)


def test_job_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("- engine\n")
    with pytest.raises(JobError, match="job file must hold a mapping, not a list"):
        load_job(tmp_path / "job.yaml")


def test_job_without_a_training_dataset(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("engine: toy\n")
    with pytest.raises(JobError, match="no train_dataset"):
        load_job(tmp_path / "job.yaml")
