"""Reading the user's YAML and JSON: hostile and malformed files each fail in one line."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest
from aworld_train.errors import ConfigError, DatasetError, JobError
from aworld_train.job.files import (
    MAX_BYTES,
    MAX_DEPTH,
    load_yaml_text,
    parse_json_text,
    read_mapping,
)


def billion_laughs(levels: int = 9) -> str:
    """The classic alias bomb: each level is ten aliases of the one before, 10**9 values."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        aliases = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{aliases}]")
    return "\n".join(lines) + "\n"


def nested_yaml(depth: int) -> str:
    return "x: " + "[" * (depth - 1) + "]" * (depth - 1) + "\n"  # the mapping is one level


def nested_json(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_plain_mapping_reads(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("engine: trl\nconfig: {max_steps: 3, lr: 1e-3}\n")
    assert read_mapping(tmp_path / "job.yaml", JobError, "job file") == {
        "engine": "trl",
        "config": {"max_steps": 3, "lr": 0.001},
    }


def test_an_alias_bomb_is_refused_without_expanding_it(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(billion_laughs())
    tracemalloc.start()
    try:
        with pytest.raises(
            JobError,
            match=r"job\.yaml:\d+: its aliases expand to more than "
            r"1,000,000 values",
        ):
            read_mapping(tmp_path / "job.yaml", JobError, "job file")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, f"reading the bomb took {peak / 2**20:.0f} MiB"


def test_a_few_aliases_are_fine() -> None:
    text = "base: &base {lr: 0.1, steps: 3}\nfirst: *base\nsecond: *base\n"
    data = load_yaml_text(text, "job.yaml", JobError)
    assert data["first"] == data["second"] == {"lr": 0.1, "steps": 3}


def test_an_alias_that_contains_itself_is_refused() -> None:
    with pytest.raises(
        JobError,
        match=r"^job\.yaml:1: nested deeper than 64 levels once its "
        r"aliases are expanded",
    ):
        load_yaml_text("loop: &loop [*loop]\n", "job.yaml", JobError)


def test_aliases_that_nest_past_the_limit_are_refused() -> None:
    deep = "[" * 40 + "]" * 40
    text = f"a: &a {deep}\nb: &b [{'[' * 30}*a{']' * 30}]\n"
    with pytest.raises(JobError, match="nested deeper than 64 levels once its aliases"):
        load_yaml_text(text, "job.yaml", JobError)


def test_10k_deep_yaml_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(nested_yaml(10_000))
    with pytest.raises(ConfigError, match=r"config\.yaml:1: nested deeper than 64 levels$"):
        read_mapping(tmp_path / "config.yaml", ConfigError, "config")


def test_deep_block_yaml_names_the_line() -> None:
    text = "".join("  " * level + "- \n" for level in range(100))
    with pytest.raises(JobError, match=rf"^job\.yaml:{MAX_DEPTH + 1}: nested deeper than 64"):
        load_yaml_text(text, "job.yaml", JobError)


def test_yaml_up_to_the_depth_limit_reads() -> None:
    assert load_yaml_text(nested_yaml(MAX_DEPTH), "job.yaml", JobError) is not None
    with pytest.raises(JobError, match="nested deeper than 64 levels"):
        load_yaml_text(nested_yaml(MAX_DEPTH + 1), "job.yaml", JobError)


def test_10k_deep_json_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{"x": ' + nested_json(10_000) + "}")
    with pytest.raises(ConfigError, match=r"config\.json: nested deeper than 64 levels$"):
        read_mapping(tmp_path / "config.json", ConfigError, "config")
    with pytest.raises(DatasetError, match=r"^data\.jsonl:3: nested deeper than 64 levels$"):
        parse_json_text(nested_json(10_000), "data.jsonl:3", DatasetError)


def test_json_between_the_limit_and_the_recursion_limit_is_refused_too() -> None:
    assert parse_json_text(nested_json(MAX_DEPTH), "row", DatasetError) == json.loads(
        nested_json(MAX_DEPTH)
    )
    with pytest.raises(DatasetError, match="nested deeper than 64 levels"):
        parse_json_text(nested_json(MAX_DEPTH + 1), "row", DatasetError)
    deep_object = '{"a": ' * 200 + "1" + "}" * 200
    with pytest.raises(DatasetError, match="nested deeper than 64 levels"):
        parse_json_text(deep_object, "row", DatasetError)


def test_a_key_given_twice_names_the_key_and_its_line(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("engine: trl\nconfig:\n  max_steps: 3\n  max_steps: 5\n")
    with pytest.raises(JobError, match=r"^.*job\.yaml:4: key 'max_steps' is given twice$"):
        read_mapping(tmp_path / "job.yaml", JobError, "job file")
    with pytest.raises(JobError, match=r"job\.yaml:3: key 'engine' is given twice"):
        load_yaml_text("engine: trl\nreward: x\nengine: verl\n", "job.yaml", JobError)


def test_a_merge_key_may_be_overridden() -> None:
    text = "base: &base {lr: 0.1, steps: 3}\nrun:\n  <<: *base\n  steps: 5\n"
    assert load_yaml_text(text, "job.yaml", JobError)["run"] == {"lr": 0.1, "steps": 5}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1: one\n", r"job\.yaml:1: key 1 is not a string; put the key in quotes"),
        (
            "engine: trl\non: push\n",
            r"job\.yaml:2: key True is not a string \(YAML reads yes, no, "
            r"on, off and ~ as true, false or null\)",
        ),
        ("~: x\n", r"job\.yaml:1: key None is not a string"),
        ("? [a, b]\n: x\n", r"job\.yaml:1: key \['a', 'b'\] is not a string"),
        ("config: {2.5: x}\n", r"job\.yaml:1: key 2.5 is not a string"),
    ],
)
def test_keys_must_be_strings(text: str, message: str) -> None:
    with pytest.raises(JobError, match=f"^{message}"):
        load_yaml_text(text, "job.yaml", JobError)


def test_an_oversized_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    big = tmp_path / "job.yaml"
    with open(big, "wb") as handle:
        handle.truncate(MAX_BYTES + 1)  # sparse: no disk used
    with pytest.raises(
        JobError,
        match=r"job\.yaml: the job file is 10\.0 MB, over the 10\.0 MB "
        r"limit$",
    ):
        read_mapping(big, JobError, "job file")


def test_oversized_text_is_refused() -> None:
    with pytest.raises(DatasetError, match=r"^row 3: 11 characters, over the 10 limit$"):
        parse_json_text('"abcdefgh"\n', "row 3", DatasetError, max_chars=10)
    with pytest.raises(JobError, match="over the 4 limit"):
        load_yaml_text("a: 12345\n", "job.yaml", JobError, max_chars=4)
    assert parse_json_text('"abcdefgh"', "row", DatasetError, max_chars=None) == "abcdefgh"


def test_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    loop = tmp_path / "job.yaml"
    loop.symlink_to(tmp_path / "other.yaml")
    (tmp_path / "other.yaml").symlink_to(loop)
    with pytest.raises(
        JobError,
        match=r"^cannot read job file .*job\.yaml: Too many levels of "
        r"symbolic links$",
    ):
        read_mapping(loop, JobError, "job file")


def test_a_folder_given_as_a_file(tmp_path: Path) -> None:
    (tmp_path / "conf.yaml").mkdir()
    with pytest.raises(
        ConfigError,
        match=r"^config .*conf\.yaml is a folder; give the file "
        r"inside it$",
    ):
        read_mapping(tmp_path / "conf.yaml", ConfigError, "config")


def test_a_pipe_is_not_read(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "job.yaml")  # reading it would wait for a writer forever
    with pytest.raises(JobError, match=r"job\.yaml is not a regular file$"):
        read_mapping(tmp_path / "job.yaml", JobError, "job file")


def test_a_path_through_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(JobError, match=r"^cannot read job file .*file/job\.yaml: Not a directory$"):
        read_mapping(tmp_path / "file" / "job.yaml", JobError, "job file")


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(JobError, match=r"^job file not found: .*nope\.yaml$"):
        read_mapping(tmp_path / "nope.yaml", JobError, "job file")


def test_text_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_bytes(b"engine: \xff\xfe\n")
    with pytest.raises(JobError, match=r"job\.yaml: not UTF-8 text \(byte 8\)$"):
        read_mapping(tmp_path / "job.yaml", JobError, "job file")


def test_a_byte_order_mark_is_valid_input(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_bytes("\ufeffengine: trl\n".encode())
    (tmp_path / "job.json").write_bytes('\ufeff{"engine": "trl"}'.encode())
    assert read_mapping(tmp_path / "job.yaml", JobError, "job file") == {"engine": "trl"}
    assert read_mapping(tmp_path / "job.json", JobError, "job file") == {"engine": "trl"}
    assert parse_json_text('\ufeff{"a": 1}', "row", DatasetError) == {"a": 1}


def test_invalid_json_names_the_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text('{\n  "a": 1,\n  "b": ,\n}\n')
    with pytest.raises(ConfigError, match=r"config\.json:3: invalid JSON: Expecting value$"):
        read_mapping(tmp_path / "config.json", ConfigError, "config")
    with pytest.raises(DatasetError, match=r"^data\.jsonl:7: invalid JSON: Expecting value$"):
        parse_json_text('{"a": }', "data.jsonl:7", DatasetError)


def test_invalid_and_unsafe_yaml(tmp_path: Path) -> None:
    with pytest.raises(
        JobError,
        match=r"^job\.yaml:2: invalid YAML: mapping values are not "
        r"allowed here$",
    ):
        load_yaml_text("a: 1\nb: c: d\n", "job.yaml", JobError)
    with pytest.raises(
        JobError,
        match=r"^job\.yaml:1: invalid YAML: could not determine a "
        r"constructor for the tag .*python/object/apply",
    ):
        load_yaml_text("a: !!python/object/apply:os.system [echo hi]\n", "job.yaml", JobError)


def test_a_file_that_is_not_a_mapping(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("- a\n")
    with pytest.raises(JobError, match=r"job\.yaml: job file must hold a mapping, not a list$"):
        read_mapping(tmp_path / "job.yaml", JobError, "job file")
    (tmp_path / "empty.yaml").write_text("")
    assert read_mapping(tmp_path / "empty.yaml", JobError, "job file") == {}


def test_a_number_with_an_exponent_and_no_dot_is_a_number(tmp_path: Path) -> None:
    # YAML 1.1 reads 1e-4 as text; an engine's float field (trl.learning_rate) would refuse it.
    path = tmp_path / "config.yaml"
    path.write_text("learning_rate: 1e-4\nscale: -2E+3\nname: v1e5\nversion: 1e\n")
    assert read_mapping(path, ConfigError, "config") == {
        "learning_rate": 0.0001,
        "scale": -2000.0,
        "name": "v1e5",
        "version": "1e",
    }


def test_a_key_given_twice_in_a_json_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"max_steps": 2, "trl": {"beta": 0.0}, "max_steps": 9}')
    with pytest.raises(ConfigError, match=r"config\.json: key 'max_steps' is given twice$"):
        read_mapping(path, ConfigError, "config")
