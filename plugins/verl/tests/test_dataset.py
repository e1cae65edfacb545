"""check_dataset: the canonical rows as VeRL's parquet, read back by VeRL's RLHFDataset, and the
prompts VeRL cannot train on found before any GPU is touched."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from conftest import dataset, make_ctx, repeat_rows

from aworld_train.agent import AgentSpec
from aworld_train.errors import DatasetError
from aworld_train_verl import engine


def checked_ctx(tmp_path: Path, tiny_model: Path, **config):
    ctx = make_ctx(tmp_path / "run", tiny_model, **config)
    ctx.results["agent"] = engine.check_agent(AgentSpec(system_prompt="Answer with the digit."), ctx)
    return ctx


def test_rows_round_trip_through_rlhf_dataset(tmp_path: Path, tiny_model: Path) -> None:
    import pyarrow.parquet as pq

    ctx = checked_ctx(tmp_path, tiny_model)
    rows = repeat_rows(6)
    rows[2]["difficulty"] = "easy"
    for row in rows:
        row.setdefault("difficulty", "hard")
    data = engine.check_dataset(dataset(rows), dataset(repeat_rows(2, prompt_as_text=False)), ctx)

    assert data.train_file == ctx.run_dir / "data" / "train.parquet"
    assert data.test_file == ctx.run_dir / "data" / "test.parquet"
    assert data.rows == 6 and data.overlong == []
    table = pq.read_table(data.train_file).to_pylist()
    assert table[0]["prompt"] == [
        {"role": "system", "content": "Answer with the digit."},
        {"role": "user", "content": "Repeat: 0"},
    ]
    test_table = pq.read_table(data.test_file).to_pylist()
    assert test_table[1]["prompt"][1] == {"role": "user", "content": "Repeat: 1"}
    assert test_table[1]["extra_info"]["split"] == "test"
    assert table[3]["reward_model"] == {"style": "rule", "ground_truth": "3"}
    assert table[3]["data_source"] == "repeat"
    assert table[3]["extra_info"]["index"] == 3 and table[3]["extra_info"]["split"] == "train"
    assert table[2]["difficulty"] == "easy"
    assert data.overrides["data.train_files"] == str(data.train_file)
    assert data.overrides["data.val_files"] == str(data.test_file)
    assert len(data.samples) == 4


def test_without_a_test_set_training_rows_serve_validation(tmp_path: Path, tiny_model: Path) -> None:
    data = engine.check_dataset(dataset(repeat_rows(4)), None, checked_ctx(tmp_path, tiny_model))
    assert data.test_file is None
    assert data.overrides["data.val_files"] == str(data.train_file)
    assert data.overrides["trainer.test_freq"] == -1


def test_overlong_prompts_are_an_error_naming_their_rows(tmp_path: Path, tiny_model: Path) -> None:
    rows = repeat_rows(20)
    for index in (3, 17):
        rows[index]["prompt"] = "Repeat: " + "x" * 200
    ctx = checked_ctx(tmp_path, tiny_model)
    with pytest.raises(DatasetError, match=r"^train_dataset row 3: the prompt \(with the chat template and system prompt\) is \d+ tokens, "
                       r"past data.max_prompt_length=64 \(2 row\(s\): 3, 17\)"):
        engine.check_dataset(dataset(rows), None, ctx)


def test_overlong_prompts_are_counted_when_verl_is_told_to_drop_them(
    tmp_path: Path, tiny_model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = repeat_rows(8)
    rows[5]["prompt"] = "Repeat: " + "x" * 200
    ctx = checked_ctx(tmp_path, tiny_model, verl={"data": {"filter_overlong_prompts": True}})
    with caplog.at_level(logging.WARNING, logger="aworld_train"):
        data = engine.check_dataset(dataset(rows), None, ctx)
    assert data.overlong == [5]
    assert data.rows == 7
    assert "train_dataset row 5: the prompt" in caplog.text and "(1 row(s): 5)" in caplog.text
    assert all(row["extra_info"]["index"] != 5 for row in data.samples)


def test_a_long_list_of_overlong_rows_is_shortened(tmp_path: Path, tiny_model: Path) -> None:
    rows = repeat_rows(30)
    for row in rows[:25]:
        row["prompt"] = "x" * 200
    with pytest.raises(DatasetError, match=r"\(25 row\(s\): 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 15 more\)"):
        engine.check_dataset(dataset(rows), None, checked_ctx(tmp_path, tiny_model))
