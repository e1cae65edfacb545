"""The config module: dict, YAML/JSON path, dotted overrides; unknown keys and wrong types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from aworld_train.config import TrainConfig, load_config, merge, parse_overrides
from aworld_train.errors import ConfigError

ENGINES = ("toy", "trl", "verl")


def test_config_from_a_dict() -> None:
    config = load_config({"max_steps": 50, "learning_rate": 1, "resources": {"nnodes": 2},
                          "trl": {"beta": 0.0}}, engine_names=ENGINES)
    assert config.max_steps == 50
    assert config.learning_rate == 1.0 and isinstance(config.learning_rate, float)
    assert config.resources.nnodes == 2 and config.resources.gpus_per_node is None
    assert config.engine_section("trl") == {"beta": 0.0}
    assert config.engine_section("verl") == {}
    assert config.algorithm == "grpo" and config.seed == 42, "defaults"


def test_config_from_a_yaml_path(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "algorithm: sft\nlearning_rate: 1e-5\nmax_steps: 3\ntoy:\n  temperature: 0.5\n")
    config = load_config("config.yaml", engine_names=ENGINES, base_dir=tmp_path)
    assert config.algorithm == "sft"
    assert config.learning_rate == pytest.approx(1e-5), "PyYAML reads 1e-5 as a string"
    assert config.engine_section("toy") == {"temperature": 0.5}


def test_config_from_a_json_path(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"batch_size": 4, "seed": 7}))
    config = load_config(tmp_path / "config.json")
    assert (config.batch_size, config.seed) == (4, 7)


def test_dotted_overrides_win_over_the_config(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("max_steps: 3\ntrl:\n  beta: 0.1\n  epsilon: 0.2\n")
    config = load_config(
        tmp_path / "config.yaml",
        ["max_steps=9", "trl.beta=0.0", "resources.gpus_per_node=2", "model=./tiny",
         "toy.candidates=[a, b]"],
        engine_names=ENGINES,
    )
    assert config.max_steps == 9
    assert config.engine_section("trl") == {"beta": 0.0, "epsilon": 0.2}
    assert config.resources.gpus_per_node == 2
    assert config.model == "./tiny"
    assert config.engine_section("toy") == {"candidates": ["a", "b"]}


def test_parse_overrides_reads_yaml_scalars() -> None:
    assert parse_overrides(["a=1", "b=0.5", "c=true", "d=text", "e=", "f.g.h=null"]) == {
        "a": 1, "b": 0.5, "c": True, "d": "text", "e": "", "f": {"g": {"h": None}}}
    assert parse_overrides(["x=[unclosed"]) == {"x": "[unclosed"}, "unparseable YAML stays text"


def test_merge_is_deep_and_leaves_its_inputs_alone() -> None:
    base = {"trl": {"beta": 0.1, "epsilon": 0.2}, "max_steps": 3}
    assert merge(base, {"trl": {"beta": 0.0}}) == {"trl": {"beta": 0.0, "epsilon": 0.2},
                                                   "max_steps": 3}
    assert base["trl"]["beta"] == 0.1


def test_config_round_trips_through_to_dict() -> None:
    config = load_config({"max_steps": 5, "toy": {"temperature": 2.0}}, engine_names=ENGINES)
    again = load_config(config, engine_names=ENGINES)
    assert again == config
    assert config.to_dict() == {"algorithm": "grpo", "max_steps": 5, "seed": 42,
                                "resources": {"nnodes": 1}, "toy": {"temperature": 2.0}}


def test_none_is_the_default_config() -> None:
    assert load_config(None) == TrainConfig()


def test_null_keys_keep_their_defaults(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("seed:\nalgorithm: null\nmax_steps: ~\n"
                                          "resources: {nnodes: null}\n")
    assert load_config(tmp_path / "config.yaml") == TrainConfig()
    assert load_config({}, ["seed=null"]).seed == 42


def test_unknown_key_suggests_the_right_one() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config({"max_step": 5}, engine_names=ENGINES)
    message = str(raised.value)
    assert message.startswith("config: unknown config key 'max_step' (did you mean 'max_steps'?)")
    assert "known keys:" in message and "toy" in message


def test_unknown_key_in_a_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("learning_rat: 0.1\n")
    with pytest.raises(ConfigError, match=r"config\.yaml: unknown config key 'learning_rat' "
                                          r"\(did you mean 'learning_rate'\?\)"):
        load_config(tmp_path / "config.yaml")


def test_unknown_override_key_is_rejected_too() -> None:
    with pytest.raises(ConfigError, match="unknown config key 'max_stpes'"):
        load_config({}, ["max_stpes=3"])


def test_engine_section_of_an_unknown_engine_is_rejected() -> None:
    with pytest.raises(ConfigError, match="unknown config key 'tyo' .did you mean 'toy'"):
        load_config({"tyo": {}}, engine_names=ENGINES)


def test_unknown_resources_key() -> None:
    with pytest.raises(ConfigError, match=r"unknown config key 'resources\.nnode' "
                                          r"\(did you mean 'nnodes'\?\)"):
        load_config({"resources": {"nnode": 2}})


@pytest.mark.parametrize(("config", "message"), [
    ({"max_steps": "ten"}, "'max_steps' must be int, got str 'ten'"),
    ({"max_steps": 2.5}, "'max_steps' must be int, got float 2.5"),
    ({"max_steps": True}, "'max_steps' must be int, got bool True"),
    ({"learning_rate": "fast"}, "'learning_rate' must be float or int, got str 'fast'"),
    ({"algorithm": 3}, "'algorithm' must be str"),
    ({"resources": {"nnodes": "two"}}, "'resources.nnodes' must be int"),
    ({"resources": 4}, "'resources' must be a mapping"),
    ({"toy": [1]}, "'toy' must be a mapping of toy settings"),
])
def test_key_of_the_wrong_type(config: dict, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(config, engine_names=ENGINES)
    assert message in str(raised.value)


@pytest.mark.parametrize(("override", "message"), [
    ("max_steps", "is not KEY=VALUE"),
    ("=3", "is not KEY=VALUE"),
    ("trl..beta=1", "is not KEY=VALUE"),
])
def test_malformed_overrides(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config({}, [override])


def test_override_inside_a_value() -> None:
    with pytest.raises(ConfigError, match="sets a key inside 'max_steps', which is a value"):
        parse_overrides(["max_steps=3", "max_steps.inner=1"])


def test_config_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config not found: .*missing\.yaml"):
        load_config("missing.yaml", base_dir=tmp_path)
    (tmp_path / "bad.yaml").write_text("max_steps: 3\n  seed: [\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+: invalid YAML"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match=r"list\.yaml: config must hold a mapping, not a list"):
        load_config(tmp_path / "list.yaml")
    with pytest.raises(ConfigError, match="config must be a mapping or a YAML/JSON path, not list"):
        load_config([1, 2])  # type: ignore[arg-type]


def test_yaml_is_read_safely(tmp_path: Path) -> None:
    (tmp_path / "unsafe.yaml").write_text("max_steps: !!python/object/apply:os.getcwd []\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(tmp_path / "unsafe.yaml")
