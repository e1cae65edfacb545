"""The dataset module: every input form, the columns mapping, and every bad row named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aworld_train.dataset.loading import load_dataset
from aworld_train.errors import DatasetError
from helpers import write_jsonl

QA = [
    {"question": "2+2?", "answer": "4", "level": 1},
    {"question": "3+3?", "answer": 6, "level": 2},
]
COLUMNS = {"prompt": "question", "ground_truth": "answer"}


def check_canonical(dataset: Any, source: str) -> None:
    assert len(dataset) == 2
    assert dataset[0]["prompt"] == "2+2?"
    assert [row["ground_truth"] for row in dataset] == ["4", "6"], "numbers become strings"
    assert [row["extra_info"]["index"] for row in dataset] == [0, 1]
    assert dataset[0]["data_source"] == source
    assert [str(row["level"]) for row in dataset] == ["1", "2"], "other columns pass through"


def test_jsonl_file(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "qa.jsonl", QA)
    check_canonical(load_dataset("qa.jsonl", COLUMNS, tmp_path), "qa")


def test_json_file(tmp_path: Path) -> None:
    (tmp_path / "qa.json").write_text(json.dumps(QA))
    check_canonical(load_dataset(tmp_path / "qa.json", COLUMNS), "qa")


def test_csv_file(tmp_path: Path) -> None:
    (tmp_path / "qa.csv").write_text("question,answer,level\n2+2?,4,1\n3+3?,6,2\n")
    check_canonical(load_dataset(str(tmp_path / "qa.csv"), COLUMNS), "qa")


def test_parquet_file(tmp_path: Path) -> None:
    import pyarrow
    import pyarrow.parquet

    table = pyarrow.Table.from_pylist([dict(row, answer=str(row["answer"])) for row in QA])
    pyarrow.parquet.write_table(table, tmp_path / "qa.parquet")
    check_canonical(load_dataset(tmp_path / "qa.parquet", COLUMNS), "qa")


def test_datasets_dataset() -> None:
    import datasets

    given = datasets.Dataset.from_list([dict(row, answer=str(row["answer"])) for row in QA])
    check_canonical(load_dataset(given, COLUMNS), "train_dataset")


def test_list_of_dicts() -> None:
    check_canonical(
        load_dataset([dict(row) for row in QA], COLUMNS, role="train_dataset"), "train_dataset"
    )


def test_canonical_columns_need_no_mapping() -> None:
    dataset = load_dataset(
        [{"prompt": "p", "ground_truth": "t", "data_source": "gaia", "extra_info": {"level": 3}}]
    )
    assert dataset[0]["data_source"] == "gaia"
    assert dataset[0]["extra_info"] == {"index": 0, "level": 3}


def test_chat_message_prompts() -> None:
    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    dataset = load_dataset([{"prompt": prompt, "ground_truth": "4"}])
    assert dataset[0]["prompt"] == prompt


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"train_dataset not found: .*missing\.jsonl"):
        load_dataset("missing.jsonl", base_dir=tmp_path)


def test_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "latin.jsonl").write_bytes(b'{"prompt": "caf\xe9", "ground_truth": "x"}\n')
    with pytest.raises(DatasetError, match=r"cannot read .*latin\.jsonl"):
        load_dataset(tmp_path / "latin.jsonl")


def test_unsupported_format(tmp_path: Path) -> None:
    (tmp_path / "qa.txt").write_text("2+2? 4\n")
    with pytest.raises(DatasetError, match=r"qa\.txt: unsupported dataset format '\.txt'"):
        load_dataset(tmp_path / "qa.txt")


def test_malformed_jsonl_line_names_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text('{"prompt": "a", "ground_truth": "1"}\n\n{"prompt": "b", "ground_truth": \n')
    with pytest.raises(DatasetError, match=r"qa\.jsonl:3: invalid JSON"):
        load_dataset(path)


def test_malformed_json_file(tmp_path: Path) -> None:
    (tmp_path / "qa.json").write_text('[{"prompt": "a",\n "ground_truth": }]')
    with pytest.raises(DatasetError, match=r"qa\.json:2: invalid JSON"):
        load_dataset(tmp_path / "qa.json")
    (tmp_path / "qa.json").write_text('{"prompt": "a"}')
    with pytest.raises(DatasetError, match="must hold a list of rows"):
        load_dataset(tmp_path / "qa.json")


def test_broken_parquet_file(tmp_path: Path) -> None:
    (tmp_path / "qa.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(DatasetError, match=r"cannot read .*qa\.parquet as parquet"):
        load_dataset(tmp_path / "qa.parquet")


@pytest.mark.parametrize("content", ["", "\n\n", "[]"])
def test_empty_dataset(tmp_path: Path, content: str) -> None:
    path = tmp_path / ("empty.json" if content == "[]" else "empty.jsonl")
    path.write_text(content)
    with pytest.raises(DatasetError, match=r"empty\.jsonl?: the dataset is empty"):
        load_dataset(path)
    with pytest.raises(DatasetError, match="test_dataset: the dataset is empty"):
        load_dataset([], role="test_dataset")


def test_missing_ground_truth_names_file_line_and_column(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "qa.jsonl", [{"prompt": "a", "ground_truth": "1"}, {"prompt": "b"}]
    )
    with pytest.raises(DatasetError) as raised:
        load_dataset(path)
    assert str(raised.value).startswith(f"{path}:2: missing column 'ground_truth'")
    assert "columns: {ground_truth: <your column>}" in str(raised.value)


def test_missing_column_after_the_mapping_names_the_user_column(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [{"question": "2+2?", "solution": "4"}])
    with pytest.raises(
        DatasetError,
        match=r"qa\.jsonl:1: missing column 'ground_truth' "
        r"\(mapped from 'answer'\)",
    ):
        load_dataset(path, COLUMNS)
    with pytest.raises(DatasetError, match=r"qa\.jsonl:1: missing column 'prompt'"):
        load_dataset(path)


def test_row_index_is_named_for_non_jsonl_sources(tmp_path: Path) -> None:
    (tmp_path / "qa.csv").write_text("prompt,answer\na,1\n")
    with pytest.raises(DatasetError, match=r"qa\.csv row 0: missing column 'ground_truth'"):
        load_dataset(tmp_path / "qa.csv")
    with pytest.raises(DatasetError, match="test_dataset row 1: missing column 'prompt'"):
        load_dataset(
            [{"prompt": "a", "ground_truth": "1"}, {"ground_truth": "2"}], role="test_dataset"
        )


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"prompt": 7, "ground_truth": "1"}, "column 'prompt' must be a string or a list"),
        ({"prompt": "  ", "ground_truth": "1"}, "column 'prompt' is empty"),
        (
            {"prompt": [{"role": "robot", "content": "hi"}], "ground_truth": "1"},
            "column 'prompt' message 0 must be",
        ),
        ({"prompt": [{"role": "user"}], "ground_truth": "1"}, "column 'prompt' message 0 must be"),
        (
            {"prompt": "a", "ground_truth": ["1"]},
            "column 'ground_truth' must be a string or a number",
        ),
        (
            {"prompt": "a", "ground_truth": True},
            "column 'ground_truth' must be a string or a number",
        ),
        ({"prompt": "a", "ground_truth": "1", "data_source": 3}, "column 'data_source' must be"),
        (
            {"prompt": "a", "ground_truth": "1", "extra_info": "x"},
            "column 'extra_info' must be an object",
        ),
        ("just a string", "a row must be an object, got str"),
    ],
)
def test_wrong_column_types_name_the_row(tmp_path: Path, row: Any, message: str) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [{"prompt": "ok", "ground_truth": "0"}, row])
    with pytest.raises(DatasetError) as raised:
        load_dataset(path)
    assert str(raised.value).startswith(f"{path}:2: ")
    assert message in str(raised.value)


def test_a_column_of_mixed_types_names_the_row(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "qa.jsonl",
        [
            {"prompt": "a", "ground_truth": "1", "level": 1},
            {"prompt": "b", "ground_truth": "2", "level": 2.5},
            {"prompt": "c", "ground_truth": "3", "level": "hard"},
        ],
    )
    with pytest.raises(DatasetError) as raised:
        load_dataset(path)
    assert str(raised.value) == (
        f"{path}:3: column 'level' holds str but int at {path}:1; use one type per column"
    )


def test_prompt_forms_must_not_mix(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "qa.jsonl",
        [
            {"prompt": "text", "ground_truth": "1"},
            {"prompt": [{"role": "user", "content": "chat"}], "ground_truth": "2"},
        ],
    )
    with pytest.raises(
        DatasetError,
        match=r"qa\.jsonl:2: column 'prompt' is a message list but "
        r"row 0's is a string",
    ):
        load_dataset(path)


def test_a_fault_in_the_last_row_of_many_is_found(tmp_path: Path) -> None:
    rows: list[Any] = [{"prompt": f"q{i}", "ground_truth": str(i)} for i in range(2000)]
    rows[-1] = {"prompt": f"q{len(rows)}", "ground_truth": None}
    path = write_jsonl(tmp_path / "big.jsonl", rows)
    with pytest.raises(DatasetError, match=r"big\.jsonl:2000: missing column 'ground_truth'"):
        load_dataset(path)


def test_columns_mapping_must_name_canonical_columns() -> None:
    with pytest.raises(
        DatasetError,
        match="unknown canonical column 'promt' "
        r"\(did you mean 'prompt'\?\)",
    ):
        load_dataset(QA, {"promt": "question"})
    with pytest.raises(DatasetError, match="columns must map canonical names"):
        load_dataset(QA, {"prompt": 3})  # type: ignore[dict-item]


def test_unsupported_source_type() -> None:
    with pytest.raises(
        DatasetError,
        match="train_dataset must be a .jsonl/.json/.csv/.parquet "
        "path, a datasets.Dataset or a list of dicts, not int",
    ):
        load_dataset(42)


def test_a_byte_order_mark_is_not_data(tmp_path: Path) -> None:
    bom = "\ufeff"
    (tmp_path / "qa.jsonl").write_text(
        bom + "".join(json.dumps(row) + "\n" for row in QA), encoding="utf-8"
    )
    check_canonical(load_dataset(tmp_path / "qa.jsonl", COLUMNS), "qa")
    (tmp_path / "qa.json").write_text(bom + json.dumps(QA), encoding="utf-8")
    check_canonical(load_dataset(tmp_path / "qa.json", COLUMNS), "qa")
    (tmp_path / "qa.csv").write_text(
        bom + "question,answer,level\n2+2?,4,1\n3+3?,6,2\n", encoding="utf-8"
    )
    check_canonical(load_dataset(tmp_path / "qa.csv", COLUMNS), "qa")


def test_a_path_that_is_not_a_regular_file(tmp_path: Path) -> None:
    import os

    (tmp_path / "loop.jsonl").symlink_to(tmp_path / "loop.jsonl")
    with pytest.raises(DatasetError, match=r"^train_dataset .*loop\.jsonl is a symlink loop"):
        load_dataset("loop.jsonl", base_dir=tmp_path)
    (tmp_path / "folder.jsonl").mkdir()
    with pytest.raises(DatasetError, match=r"^test_dataset .*folder\.jsonl is a directory"):
        load_dataset(tmp_path / "folder.jsonl", role="test_dataset")
    os.mkfifo(tmp_path / "fifo.jsonl")
    with pytest.raises(DatasetError, match=r"fifo\.jsonl is not a regular file \(a FIFO"):
        load_dataset(tmp_path / "fifo.jsonl")


@pytest.mark.parametrize("depth", [65, 100_000])
def test_a_deeply_nested_row_names_its_line(tmp_path: Path, depth: int) -> None:
    deep = "[" * depth + "]" * depth
    path = tmp_path / "deep.jsonl"
    path.write_text(
        '{"prompt": "a", "ground_truth": "1"}\n'
        f'{{"prompt": "b", "ground_truth": "2", "extra_info": {{"x": {deep}}}}}\n'
    )
    with pytest.raises(DatasetError, match=rf"^{path}:2: a value is nested deeper than 64 levels$"):
        load_dataset(path)
    (tmp_path / "deep.json").write_text(f'[{{"prompt": "b", "ground_truth": "2", "x": {deep}}}]')
    with pytest.raises(DatasetError, match=r"deep\.json(:| row 0:) a value is nested deeper"):
        load_dataset(tmp_path / "deep.json")


def test_a_deeply_nested_row_given_in_python() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(DatasetError, match="^train_dataset row 1: a value is nested deeper"):
        load_dataset(
            [{"prompt": "a", "ground_truth": "1"}, {"prompt": "b", "ground_truth": "2", "x": deep}]
        )


def test_a_line_over_the_limit_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from aworld_train.dataset import loading as dataset

    monkeypatch.setattr(dataset, "MAX_LINE_CHARS", 60)
    exact = '{"prompt": "a", "ground_truth": "1", "pad": "' + "x" * 13 + '"}'
    assert len(exact) == 60
    path = write_jsonl(
        tmp_path / "long.jsonl", [json.loads(exact), {"prompt": "b" * 60, "ground_truth": "2"}]
    )
    with pytest.raises(DatasetError, match=r"long\.jsonl:2: line longer than 60 characters"):
        load_dataset(path)


def test_streaming_keeps_row_numbers_and_types_across_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aworld_train.dataset import loading as dataset

    monkeypatch.setattr(dataset, "BATCH_ROWS", 3)
    rows: list[Any] = [{"prompt": f"q{i}", "ground_truth": str(i), "level": i} for i in range(7)]
    rows[5]["level"] = 2.5  # ints and floats widen to floats, across batches too
    rows[6]["hint"] = "only the last row has one"
    rows[4]["extra_info"] = {"topic": "sums"}
    path = write_jsonl(tmp_path / "qa.jsonl", rows[:3] + [{}] + rows[3:])
    path.write_text(path.read_text().replace("{}\n", "\n"))  # a blank line: rows 3.. are lines 5..
    loaded = load_dataset(path)
    assert len(loaded) == 7
    assert loaded["level"] == [0.0, 1.0, 2.0, 3.0, 4.0, 2.5, 6.0]
    assert loaded["hint"] == [None] * 6 + ["only the last row has one"]
    assert [row["extra_info"] for row in loaded][3:5] == [
        {"index": 3, "topic": None},
        {"index": 4, "topic": "sums"},
    ]
    assert list(loaded.column_names) == [
        "prompt",
        "ground_truth",
        "level",
        "data_source",
        "extra_info",
        "hint",
    ]

    path = write_jsonl(
        tmp_path / "bad.jsonl", rows + [{"prompt": "q", "ground_truth": "7", "level": "hard"}]
    )
    with pytest.raises(DatasetError) as raised:
        load_dataset(path)
    assert str(raised.value) == (
        f"{path}:8: column 'level' holds str but int at {path}:1; use one type per column"
    )
    with pytest.raises(DatasetError, match="^train_dataset row 7: missing column 'prompt'"):
        load_dataset(rows + [{"ground_truth": "7"}])


def test_a_clash_inside_a_column_across_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    from aworld_train.dataset import loading as dataset

    monkeypatch.setattr(dataset, "BATCH_ROWS", 2)
    rows = [{"prompt": "q", "ground_truth": "1", "extra_info": {"tags": ["a"]}}] * 2 + [
        {"prompt": "q", "ground_truth": "1", "extra_info": {"tags": "a"}}
    ]
    with pytest.raises(
        DatasetError, match="^train_dataset: columns hold values of different types across rows"
    ):
        load_dataset(rows)


def test_a_large_datasets_dataset_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets
    from aworld_train.dataset import loading as dataset

    monkeypatch.setattr(dataset, "BATCH_ROWS", 4)
    given = datasets.Dataset.from_list(
        [{"question": f"q{i}", "answer": str(i)} for i in range(10)]
    ).select(range(9, -1, -1))
    loaded = load_dataset(given, COLUMNS)
    assert loaded["prompt"] == [f"q{i}" for i in range(9, -1, -1)], "the selection, in order"
    assert [row["extra_info"]["index"] for row in loaded] == list(range(10))


def test_a_mapping_must_rename_a_column_the_row_has(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [{"prompt": "2+2?", "ground_truth": "4"}])
    with pytest.raises(DatasetError) as raised:
        load_dataset(path, {"prompt": "question"})
    assert str(raised.value) == (
        f"{path}:1: columns: {{prompt: question}} but the row has no "
        "column 'question' (it has 'prompt' itself); drop the mapping "
        "or fix the name"
    )
    with pytest.raises(
        DatasetError,
        match=r"^train_dataset row 0: columns: \{ground_truth: "
        r"answer\} but the row has both 'answer' and "
        r"'ground_truth'",
    ):
        load_dataset(
            [{"prompt": "q", "answer": "4", "ground_truth": "5"}], {"ground_truth": "answer"}
        )


GAIA_ROWS = [
    {
        "prompt": [{"role": "user", "content": "How many moons has Mars?"}],
        "data_source": "gaia",
        "ability": "agi",
        "reward_model": {"style": "GAIA", "ground_truth": "2"},
        "extra_info": {"index": 7, "task_id": "t-7", "level": 1},
        "agent_name": "gaia_agent",
    },
    {
        "prompt": [{"role": "user", "content": "What is the capital of France?"}],
        "data_source": "gaia",
        "ability": "agi",
        "reward_model": {"style": "GAIA", "ground_truth": "Paris"},
        "extra_info": {"index": 8, "task_id": "t-8", "level": 2},
        "agent_name": "gaia_agent",
    },
]


def write_verl_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Parquet as VeRL's data scripts write it: ``datasets``, nested fields as struct columns."""
    import datasets

    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def test_verl_layout_parquet_loads_as_it_is(tmp_path: Path) -> None:
    """VeRL-layout rows: reward_model.ground_truth is the ground truth, nothing mapped."""
    import pyarrow
    import pyarrow.parquet

    path = write_verl_parquet(tmp_path / "gaia.parquet", GAIA_ROWS)
    assert pyarrow.types.is_struct(pyarrow.parquet.read_schema(path).field("reward_model").type)
    loaded = load_dataset(path)
    assert loaded["ground_truth"] == ["2", "Paris"]
    assert loaded[0]["prompt"] == GAIA_ROWS[0]["prompt"]
    assert loaded[1]["extra_info"] == {"index": 8, "task_id": "t-8", "level": 2}
    assert loaded[1]["reward_model"] == {"style": "GAIA", "ground_truth": "Paris"}
    assert loaded["ability"] == ["agi", "agi"] and loaded["agent_name"] == ["gaia_agent"] * 2
    assert loaded["data_source"] == ["gaia", "gaia"]


def test_verl_layout_with_a_text_prompt_and_a_ground_truth_column(tmp_path: Path) -> None:
    """A ground_truth column of its own wins over reward_model's: nothing is guessed."""
    rows = [
        dict(row, prompt=row["prompt"][0]["content"], ground_truth=f"own {index}")
        for index, row in enumerate(GAIA_ROWS)
    ]
    loaded = load_dataset(write_verl_parquet(tmp_path / "gaia.parquet", rows))
    assert loaded["ground_truth"] == ["own 0", "own 1"]
    assert loaded[0]["prompt"] == "How many moons has Mars?"


def test_columns_take_dotted_paths_into_nested_fields(tmp_path: Path) -> None:
    """columns: values may be dotted paths; the column holding the field stays."""
    rows = [
        {
            "question": {"text": "2+2?", "lang": "en"},
            "meta": {"answer": {"value": 4}},
            "answer.text": "four",
        }
    ]
    path = write_jsonl(tmp_path / "nested.jsonl", rows)
    loaded = load_dataset(path, {"prompt": "question.text", "ground_truth": "meta.answer.value"})
    assert loaded[0]["prompt"] == "2+2?" and loaded[0]["ground_truth"] == "4"
    assert loaded[0]["question"] == {"text": "2+2?", "lang": "en"}
    dotted_name = load_dataset(path, {"prompt": "question.text", "ground_truth": "answer.text"})
    assert dotted_name[0]["ground_truth"] == "four", "a column named with a dot is that column"
    parquet = write_verl_parquet(tmp_path / "gaia.parquet", GAIA_ROWS)
    mapped = load_dataset(parquet, {"ground_truth": "reward_model.ground_truth"})
    assert mapped["ground_truth"] == ["2", "Paris"]


@pytest.mark.parametrize(
    ("second", "columns", "message"),
    [
        (
            {"prompt": "q", "reward_model": {"style": "GAIA"}},
            {},
            "missing column 'ground_truth' (read from 'reward_model.ground_truth', the nested "
            "layout): 'reward_model' has no field 'ground_truth'",
        ),
        (
            {"prompt": "q", "reward_model": {"ground_truht": "1"}},
            {},
            "'reward_model' has no field 'ground_truth' (did you mean 'ground_truht'?)",
        ),
        (
            {"prompt": "q", "reward_model": None},
            {"ground_truth": "reward_model.ground_truth"},
            "missing column 'ground_truth' (mapped from 'reward_model.ground_truth'): "
            "'reward_model' is null",
        ),
        (
            {"prompt": "q", "reward_model": "GAIA"},
            {"ground_truth": "reward_model.ground_truth"},
            "'reward_model' is str, not an object",
        ),
        (
            {"prompt": "q", "reward_model": {"ground_truth": None}},
            {},
            "missing column 'ground_truth' (read from 'reward_model.ground_truth'",
        ),
    ],
)
def test_a_row_without_the_nested_path_names_row_and_path(
    tmp_path: Path, second: dict[str, Any], columns: dict[str, str], message: str
) -> None:
    """A row missing a dotted path: one error naming the file, the row and the path."""
    first = {"prompt": "p", "reward_model": {"style": "GAIA", "ground_truth": "0"}}
    path = write_jsonl(tmp_path / "qa.jsonl", [first, second])
    with pytest.raises(DatasetError) as raised:
        load_dataset(path, columns)
    assert str(raised.value).startswith(f"{path}:2: ")
    assert message in str(raised.value)


def test_a_null_nested_field_in_parquet_names_the_row(tmp_path: Path) -> None:
    """A struct column's missing field reads back as null: the row and path are named."""
    rows = [dict(GAIA_ROWS[0]), dict(GAIA_ROWS[1], reward_model={"style": "GAIA"})]
    path = write_verl_parquet(tmp_path / "gaia.parquet", rows)
    with pytest.raises(
        DatasetError,
        match=r"gaia\.parquet row 1: missing column 'ground_truth' "
        r"\(read from 'reward_model\.ground_truth'",
    ):
        load_dataset(path)


def test_a_dotted_mapping_beside_the_canonical_column_is_ambiguous() -> None:
    """Mapping a nested field onto a column the row has already is refused, as a rename is."""
    with pytest.raises(
        DatasetError,
        match=r"^train_dataset row 0: columns: \{ground_truth: "
        r"reward_model\.ground_truth\} but the row has both",
    ):
        load_dataset(
            [{"prompt": "q", "ground_truth": "1", "reward_model": {"ground_truth": "2"}}],
            {"ground_truth": "reward_model.ground_truth"},
        )
    with pytest.raises(
        DatasetError,
        match=r"has no column 'reward_model\.ground_truth' \(it has "
        r"'ground_truth' itself\)",
    ):
        load_dataset(
            [{"prompt": "q", "ground_truth": "1"}], {"ground_truth": "reward_model.ground_truth"}
        )


def test_a_typo_in_a_dotted_path_suggests_the_column(tmp_path: Path) -> None:
    """A dotted path whose top-level part is misspelt gets a did-you-mean over the columns."""
    path = write_verl_parquet(tmp_path / "gaia.parquet", GAIA_ROWS)
    with pytest.raises(DatasetError) as raised:
        load_dataset(path, {"ground_truth": "reward_modle.ground_truth"})
    assert str(raised.value) == (
        f"{path} row 0: missing column 'ground_truth' (mapped from 'reward_modle.ground_truth'): "
        "the row has no column 'reward_modle' (did you mean 'reward_model'?); map your column "
        "with columns: {ground_truth: <your column>}"
    )
