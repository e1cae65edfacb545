"""check_dataset: the canonical rows as VeRL's parquet, read back by VeRL's RLHFDataset, and the
prompts VeRL cannot train on found before any GPU is touched."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from aworld_train.agent import AgentSpec
from aworld_train.errors import DatasetError
from conftest import Checks, dataset, make_ctx, repeat_rows


def agent_checked(tmp_path: Path, tiny_model: Path, **config) -> Checks:
    checks = Checks(make_ctx(tmp_path / "run", tiny_model, **config))
    checks.check_agent(AgentSpec(system_prompt="Answer with the digit."))
    return checks


def test_rows_round_trip_through_rlhf_dataset(tmp_path: Path, tiny_model: Path) -> None:
    import pyarrow.parquet as pq

    checks = agent_checked(tmp_path, tiny_model)
    ctx = checks.ctx
    rows = repeat_rows(6)
    rows[2]["difficulty"] = "easy"
    for row in rows:
        row.setdefault("difficulty", "hard")
    data = checks.check_dataset(dataset(rows), dataset(repeat_rows(2, prompt_as_text=False)))

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


def test_without_a_test_set_training_rows_serve_validation(
    tmp_path: Path, tiny_model: Path
) -> None:
    data = agent_checked(tmp_path, tiny_model).check_dataset(dataset(repeat_rows(4)))
    assert data.test_file is None
    assert data.overrides["data.val_files"] == str(data.train_file)


def test_overlong_prompts_are_an_error_naming_their_rows(tmp_path: Path, tiny_model: Path) -> None:
    rows = repeat_rows(20)
    for index in (3, 17):
        rows[index]["prompt"] = "Repeat: " + "x" * 200
    checks = agent_checked(tmp_path, tiny_model)
    with pytest.raises(
        DatasetError,
        match=r"^train_dataset row 3: the prompt \(with the chat template and system prompt\) is \d+ tokens, "
        r"past data.max_prompt_length=64 \(2 row\(s\): 3, 17\)",
    ):
        checks.check_dataset(dataset(rows))


def test_overlong_prompts_are_counted_when_verl_is_told_to_drop_them(
    tmp_path: Path, tiny_model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = repeat_rows(8)
    rows[5]["prompt"] = "Repeat: " + "x" * 200
    checks = agent_checked(tmp_path, tiny_model, verl={"data": {"filter_overlong_prompts": True}})
    with caplog.at_level(logging.WARNING, logger="aworld_train"):
        data = checks.check_dataset(dataset(rows))
    assert data.overlong == [5]
    assert data.rows == 7
    assert "train_dataset row 5: the prompt" in caplog.text and "(1 row(s): 5)" in caplog.text
    assert all(row["extra_info"]["index"] != 5 for row in data.samples)


def test_a_long_list_of_overlong_rows_is_shortened(tmp_path: Path, tiny_model: Path) -> None:
    rows = repeat_rows(30)
    for row in rows[:25]:
        row["prompt"] = "x" * 200
    with pytest.raises(
        DatasetError, match=r"\(25 row\(s\): 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 and 15 more\)"
    ):
        agent_checked(tmp_path, tiny_model).check_dataset(dataset(rows))


GAIA_ROWS = [
    {
        "prompt": [{"role": "user", "content": f"Repeat: {digit}"}],
        "data_source": "gaia",
        "ability": "agi",
        "reward_model": {"style": "GAIA", "ground_truth": digit},
        "extra_info": {
            "index": 10 + int(digit),
            "task_id": f"t-{digit}",
            "level": 1,
            "split": "validation",
        },
        "agent_name": "gaia_agent",
    }
    for digit in "0123"
]


@pytest.mark.parametrize("agent_name", [None, "aworld_train_agent"])
def test_a_verl_layout_parquet_converts_and_rlhf_dataset_reads_it(
    tmp_path: Path, tiny_model: Path, agent_name: str | None
) -> None:
    """VeRL-layout parquet (as VeRL's and AWorld Train's data scripts write it) loads as it is
    and converts: the engine's reward_model (from the canonical ground truth) and agent_name
    (the job's agent loop, or none for VeRL's default loop) replace the rows' own; ability and
    extra_info pass through; VeRL's RLHFDataset reads the converted file."""
    import datasets
    from aworld_train.dataset.loading import load_dataset
    from aworld_train_verl import dataset as verl_dataset
    from aworld_train_verl.agent import load_tokenizer
    from aworld_train_verl.overrides import preview
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    source = tmp_path / "gaia.parquet"
    datasets.Dataset.from_list(GAIA_ROWS).to_parquet(str(source))
    ctx = make_ctx(tmp_path / "run", tiny_model)
    data_config = preview(ctx.config, ctx.run_dir, inputs={}).data
    tokenizer = load_tokenizer(str(tiny_model))
    data = verl_dataset.convert(
        load_dataset(source),
        None,
        tokenizer=tokenizer,
        data_config=data_config,
        system_prompt="Be brief.",
        folder=ctx.run_dir / "data",
        logger=ctx.logger,
        agent_name=agent_name,
    )

    config = OmegaConf.merge(
        data_config, {"filter_overlong_prompts": False, "dataloader_num_workers": 0}
    )
    read = RLHFDataset(data_files=[str(data.train_file)], tokenizer=tokenizer, config=config)
    assert len(read) == 4
    row = read[2]
    assert row["raw_prompt"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Repeat: 2"},
    ]
    assert row["reward_model"] == {"style": "rule", "ground_truth": "2"}
    assert row["data_source"] == "gaia" and row["ability"] == "agi"
    assert row["extra_info"]["task_id"] == "t-2" and row["extra_info"]["split"] == "validation"
    assert row["index"] == 12, "the row's own extra_info.index"
    if agent_name is None:
        assert "agent_name" not in row, "VeRL's default loop runs a row without agent_name"
    else:
        assert row["agent_name"] == agent_name
