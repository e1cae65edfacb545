"""The config module: dict, YAML/JSON path, dotted overrides; unknown keys, wrong types and
values out of range."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from aworld_train.job.config import (
    ConfigLayout,
    TrainConfig,
    load_config,
    without_section_key,
)
from aworld_train.job.overrides import merge, parse_overrides
from aworld_train.job.declaration import SettingsDeclaration
from aworld_train.errors import ConfigError, PluginError

ENGINES = ("toy", "trl", "verl")


def test_config_from_a_dict() -> None:
    config = load_config(
        {"max_steps": 50, "learning_rate": 1, "resources": {"nnodes": 2}, "trl": {"beta": 0.0}},
        engine_names=ENGINES,
    )
    assert config.max_steps == 50
    assert config.learning_rate == 1.0 and isinstance(config.learning_rate, float)
    assert config.resources.nnodes == 2 and config.resources.gpus_per_node is None
    assert config.engine_section("trl") == {"beta": 0.0}
    assert config.engine_section("verl") == {}
    assert config.algorithm == "grpo" and config.seed == 42, "defaults"


def test_config_from_a_yaml_path(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "algorithm: sft\nlearning_rate: 1e-5\nmax_steps: 3\ntoy:\n  temperature: 0.5\n"
    )
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
        [
            "max_steps=9",
            "trl.beta=0.0",
            "resources.gpus_per_node=2",
            "model=./tiny",
            "toy.candidates=[a, b]",
        ],
        engine_names=ENGINES,
    )
    assert config.max_steps == 9
    assert config.engine_section("trl") == {"beta": 0.0, "epsilon": 0.2}
    assert config.resources.gpus_per_node == 2
    assert config.model == "./tiny"
    assert config.engine_section("toy") == {"candidates": ["a", "b"]}


def test_parse_overrides_reads_yaml_scalars() -> None:
    assert parse_overrides(["a=1", "b=0.5", "c=true", "d=text", "e=", "f.g.h=null"]) == {
        "a": 1,
        "b": 0.5,
        "c": True,
        "d": "text",
        "e": "",
        "f": {"g": {"h": None}},
    }
    assert parse_overrides(["x=[unclosed"]) == {"x": "[unclosed"}, "unparseable YAML stays text"


def test_merge_is_deep_and_leaves_its_inputs_alone() -> None:
    base = {"trl": {"beta": 0.1, "epsilon": 0.2}, "max_steps": 3}
    assert merge(base, {"trl": {"beta": 0.0}}) == {
        "trl": {"beta": 0.0, "epsilon": 0.2},
        "max_steps": 3,
    }
    assert base["trl"]["beta"] == 0.1


def test_config_round_trips_through_to_dict() -> None:
    config = load_config({"max_steps": 5, "toy": {"temperature": 2.0}}, engine_names=ENGINES)
    again = load_config(config, engine_names=ENGINES)
    assert again == config
    assert config.to_dict() == {
        "algorithm": "grpo",
        "max_steps": 5,
        "seed": 42,
        "resources": {"nnodes": 1},
        "toy": {"temperature": 2.0},
    }


def test_none_is_the_default_config() -> None:
    assert load_config(None) == TrainConfig()


def test_null_keys_keep_their_defaults(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "seed:\nalgorithm: null\nmax_steps: ~\nresources: {nnodes: null}\n"
    )
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
    with pytest.raises(
        ConfigError,
        match=r"config\.yaml: unknown config key 'learning_rat' "
        r"\(did you mean 'learning_rate'\?\)",
    ):
        load_config(tmp_path / "config.yaml")


def test_unknown_override_key_is_rejected_too() -> None:
    with pytest.raises(ConfigError, match="unknown config key 'max_stpes'"):
        load_config({}, ["max_stpes=3"])


def test_engine_section_of_an_unknown_engine_is_rejected() -> None:
    with pytest.raises(ConfigError, match="unknown config key 'tyo' .did you mean 'toy'"):
        load_config({"tyo": {}}, engine_names=ENGINES)


def test_unknown_resources_key() -> None:
    with pytest.raises(
        ConfigError,
        match=r"unknown config key 'resources\.nnode' "
        r"\(did you mean 'nnodes'\?\)",
    ):
        load_config({"resources": {"nnode": 2}})


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"max_steps": "ten"}, "config 'max_steps' must be an integer >= 1, got str 'ten'"),
        ({"max_steps": 2.5}, "config 'max_steps' must be an integer >= 1, got float 2.5"),
        ({"max_steps": True}, "config 'max_steps' must be an integer >= 1, got bool True"),
        (
            {"learning_rate": "fast"},
            "config 'learning_rate' must be a finite number > 0, got str 'fast'",
        ),
        ({"learning_rate": False}, "config 'learning_rate' must be a finite number > 0, got bool"),
        (
            {"algorithm": 3},
            "config 'algorithm' must be an algorithm name such as grpo, ppo, sft, dpo, got int 3",
        ),
        ({"model": ["a"]}, "config 'model' must be a model folder or hub id (a non-empty string)"),
        ({"model": "  "}, "config 'model' must be a model folder or hub id"),
        ({"resources": {"nnodes": "two"}}, "config 'resources.nnodes' must be an integer >= 1"),
        ({"resources": {"ray_address": 5}}, "config 'resources.ray_address' must be a Ray address"),
        ({"resources": 4}, "'resources' must be a mapping"),
        ({"toy": [1]}, "'toy' must be a mapping of toy settings"),
        (
            {"trust_remote_code": "yes"},
            "config 'trust_remote_code' must be true or false, got str 'yes'",
        ),
        ({"trust_remote_code": 1}, "config 'trust_remote_code' must be true or false, got int 1"),
    ],
)
def test_key_of_the_wrong_type(config: dict, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(config, engine_names=ENGINES)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("batch_size", 0, "an integer >= 1"),
        ("learning_rate", -1, "a finite number > 0"),
        ("learning_rate", 0, "a finite number > 0"),
        ("learning_rate", float("nan"), "a finite number > 0"),
        ("learning_rate", float("inf"), "a finite number > 0"),
        ("learning_rate", "nan", "a finite number > 0"),
        ("max_steps", -5, "an integer >= 1"),
        ("max_steps", 0, "an integer >= 1"),
        ("num_epochs", 0, "a finite number > 0"),
        ("num_epochs", float("-inf"), "a finite number > 0"),
        ("num_generations", 0, "an integer >= 1"),
        ("max_prompt_length", -1, "an integer >= 1"),
        ("max_completion_length", 0, "an integer >= 1"),
        ("seed", 10**20, "an integer from 0 to 4294967295"),
        ("seed", 2**32, "an integer from 0 to 4294967295"),
        ("seed", -1, "an integer from 0 to 4294967295"),
        ("seed", 3.0, "an integer from 0 to 4294967295"),
        ("seed", "1e20", "an integer from 0 to 4294967295"),
        ("save_steps", -3, "an integer >= 1"),
        ("logging_steps", 0, "an integer >= 1"),
        ("reward_timeout", 0, "a number of seconds > 0 and <= 600"),
        ("reward_timeout", 601, "a number of seconds > 0 and <= 600"),
        ("reward_timeout", float("nan"), "a number of seconds > 0 and <= 600"),
    ],
)
def test_key_out_of_range(key: str, value: object, rule: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config({key: value})
    assert (
        str(raised.value) == f"config '{key}' must be {rule}, got {type(value).__name__} {value!r}"
    )


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("gpus_per_node", -2, "an integer >= 0"),
        ("nnodes", 0, "an integer >= 1"),
        ("nnodes", -1, "an integer >= 1"),
    ],
)
def test_resources_out_of_range_are_refused_not_changed(key: str, value: int, rule: str) -> None:
    with pytest.raises(
        ConfigError,
        match=rf"^config 'resources\.{key}' must be {rule}, "
        rf"got int {value}$",
    ):
        load_config({"resources": {key: value}})


def test_a_range_error_in_a_file_names_the_file_and_its_yaml_reading(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("learning_rate: .nan\nseed: 1e20\n")
    with pytest.raises(
        ConfigError,
        match=r"config\.yaml: config 'learning_rate' must be a finite "
        r"number > 0, got float nan$",
    ):
        load_config(tmp_path / "config.yaml")
    (tmp_path / "config.yaml").write_text("seed: 1e20\n")
    with pytest.raises(
        ConfigError,
        match=r"config\.yaml: config 'seed' must be an integer from 0 "
        r"to 4294967295, got float 1e\+20",
    ):
        load_config(tmp_path / "config.yaml")


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("learning_rate=.nan", "learning_rate"),
        ("learning_rate=-.inf", "learning_rate"),
        ("batch_size=0", "batch_size"),
        ("resources.gpus_per_node=-2", "resources.gpus_per_node"),
    ],
)
def test_an_override_out_of_range_names_the_override(override: str, key: str) -> None:
    with pytest.raises(ConfigError, match=rf"^-o {re.escape(override)}: config '{key}' must be"):
        load_config({"learning_rate": 0.1}, [override])


def test_numbers_in_range_and_their_yaml_forms(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "learning_rate: 1e-3\nnum_epochs: 2\nseed: 0\nreward_timeout: 600\n"
        "trust_remote_code: true\nresources: {gpus_per_node: 0, nnodes: 1}\n"
    )
    config = load_config(tmp_path / "config.yaml", ["seed=4294967295"])
    assert config.learning_rate == pytest.approx(1e-3)
    assert config.num_epochs == 2.0 and isinstance(config.num_epochs, float)
    assert config.seed == 2**32 - 1
    assert config.reward_timeout == 600.0 and config.trust_remote_code is True
    assert config.resources.gpus_per_node == 0


def test_the_safety_keys_default_and_stay_out_of_a_saved_job() -> None:
    config = load_config({})
    assert (config.trust_remote_code, config.reward_timeout) == (False, 5.0)
    assert "trust_remote_code" not in config.to_dict()
    assert "reward_timeout" not in config.to_dict()
    changed = load_config({"trust_remote_code": True, "reward_timeout": 30})
    assert changed.to_dict()["trust_remote_code"] is True
    assert changed.to_dict()["reward_timeout"] == 30.0
    assert load_config(changed.to_dict()) == changed


def test_the_core_checks_an_algorithms_form_and_leaves_the_choice_to_the_engine() -> None:
    # VeRL trains any of its advantage estimators by name; each engine refuses the rest.
    assert load_config({"algorithm": "rloo"}).algorithm == "rloo"
    with pytest.raises(ConfigError, match=r"got str 'GRPO' \(did you mean 'grpo'\?\)"):
        load_config({"algorithm": "GRPO"})
    with pytest.raises(ConfigError, match=r"^config 'algorithm' must be an algorithm name"):
        load_config({"algorithm": "g r p o"})


def test_a_key_that_is_not_a_name() -> None:
    with pytest.raises(ConfigError, match=r"^config: config key 1 is not a name \(a string\)"):
        load_config({1: 2})  # type: ignore[dict-item]
    with pytest.raises(ConfigError, match=r"config key resources\.True is not a name"):
        load_config({"resources": {True: 2}})


def test_the_engine_is_set_by_the_core_and_reads_its_own_section() -> None:
    config = load_config(
        {"trl": {"beta": 0.1}, "toy": {"x": 1}}, engine_names=ENGINES, engine="toy"
    )
    assert config.engine == "toy"
    assert config.engine_section() == {"x": 1}
    assert config.engine_section("toy") == {"x": 1}
    assert "engine" not in config.to_dict()
    assert load_config(config, engine_names=ENGINES).engine == "toy", "a config keeps its engine"
    with pytest.raises(
        PluginError,
        match=r"^engine 'toy' reads the 'trl' section, but it is "
        r"installed as 'toy'",
    ):
        config.engine_section("trl")


def test_an_engine_outside_the_known_names_may_have_its_section() -> None:
    config = load_config({"mine": {"depth": 2}}, engine="mine")
    assert config.engine_section() == {"depth": 2}


def test_without_an_engine_a_section_is_read_by_name() -> None:
    config = TrainConfig(sections={"trl": {"beta": 0.0}})
    assert config.engine_section("trl") == {"beta": 0.0}
    assert config.engine_section() == {}


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("max_steps", "is not KEY=VALUE"),
        ("=3", "is not KEY=VALUE"),
        ("trl..beta=1", "is not KEY=VALUE"),
    ],
)
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


def test_first_non_finite_looks_inside_mappings_lists_and_tuples() -> None:
    from aworld_train.job.config import first_non_finite

    assert first_non_finite({"a": [1, 2.5, "x"], "b": (0.0,), "c": None}) is None
    assert first_non_finite(float("inf")) == float("inf")
    found = first_non_finite({"kwargs": {"min_lr": [1.0, float("nan")]}})
    assert found is not None and found != found  # NaN
    assert first_non_finite(("ok", -float("inf"))) == -float("inf")


# --- A whole engine config: what the engine's layout claims moves into its section ----------

VERL_LIKE = ConfigLayout(
    section_keys=frozenset({"data", "actor_rollout_ref", "trainer", "algorithm"}),
    model_key="actor_rollout_ref.model.path",
)


def test_a_whole_engine_config_file_is_its_section(tmp_path: Path) -> None:
    """A full VeRL-style config given as config: is the verl section, nulls and all."""
    (tmp_path / "grpo_trainer.yaml").write_text(
        "data:\n  train_files: null\n  train_batch_size: 8\n"
        "actor_rollout_ref:\n  model:\n    path: Qwen/Qwen3-0.6B\n"
        "trainer:\n  default_local_dir: null\n"
        "algorithm:\n  adv_estimator: grpo\n"
        "max_steps: 3\n"
    )
    config = load_config(
        "grpo_trainer.yaml",
        engine_names=ENGINES,
        base_dir=tmp_path,
        engine="verl",
        layout=VERL_LIKE,
    )
    assert config.engine_section() == {
        "data": {"train_files": None, "train_batch_size": 8},
        "actor_rollout_ref": {"model": {"path": "Qwen/Qwen3-0.6B"}},
        "trainer": {"default_local_dir": None},
        "algorithm": {"adv_estimator": "grpo"},
    }
    assert config.max_steps == 3, "common keys stay common"
    assert config.algorithm == "grpo", "algorithm as a mapping is the engine's; the name stays"
    assert load_config(config.to_dict(), engine_names=ENGINES, engine="verl") == config, (
        "the saved config reads back the same"
    )


def test_claimed_keys_deep_merge_with_the_section() -> None:
    config = load_config(
        {
            "data": {"train_batch_size": 8},
            "trainer": {"x": 1},
            "verl": {"data": {"max_prompt_length": 64, "train_batch_size": 8}},
        },
        engine_names=ENGINES,
        engine="verl",
        layout=VERL_LIKE,
    )
    assert config.engine_section() == {
        "data": {"max_prompt_length": 64, "train_batch_size": 8},
        "trainer": {"x": 1},
    }


def test_a_key_given_at_the_top_and_in_the_section_with_two_values_names_both() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^config: config key 'data\.train_batch_size' is int "
        r"8 but 'verl\.data\.train_batch_size' is int 16: give "
        r"it once, at the top or under 'verl:'$",
    ):
        load_config(
            {"data": {"train_batch_size": 8}, "verl": {"data": {"train_batch_size": 16}}},
            engine_names=ENGINES,
            engine="verl",
            layout=VERL_LIKE,
        )


def test_overrides_are_claimed_too_and_win_over_the_file(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("data: {train_batch_size: 8, seed: 1}\n")
    config = load_config(
        tmp_path / "config.yaml",
        ["data.train_batch_size=16", "verl.trainer.x=2"],
        engine_names=ENGINES,
        engine="verl",
        layout=VERL_LIKE,
    )
    assert config.engine_section() == {
        "data": {"train_batch_size": 16, "seed": 1},
        "trainer": {"x": 2},
    }


def test_what_the_layout_does_not_claim_is_still_unknown() -> None:
    with pytest.raises(ConfigError, match=r"^config: unknown config key 'critic'"):
        load_config({"critic": {}}, engine_names=ENGINES, engine="verl", layout=VERL_LIKE)
    # Common keys, resources and other engines' sections are never claimed.
    config = load_config(
        {"seed": 3, "resources": {"nnodes": 2}, "trl": {"beta": 0.1}},
        engine_names=ENGINES,
        engine="verl",
        layout=ConfigLayout(section_keys=frozenset({"seed", "resources", "trl"})),
    )
    assert (config.seed, config.resources.nnodes, config.engine_section()) == (3, 2, {})


def test_a_layout_that_takes_any_key_owns_the_config_format() -> None:
    """A processor is given a whole VeRL config: the core does not refuse it."""
    given = {
        "data": {"train_files": None},
        "actor_rollout_ref": {"model": {"path": None}},
        "algorithm": {"adv_estimator": "grpo"},
        "anything": 1,
        "max_steps": 2,
    }
    config = load_config(given, engine="proc", layout=ConfigLayout(takes_any=True))
    assert config.engine_section() == {
        key: given[key] for key in ("data", "actor_rollout_ref", "algorithm", "anything")
    }
    assert config.max_steps == 2 and config.algorithm == "grpo"
    assert given["data"] == {"train_files": None}, "the user's mapping is left as given"


def test_without_a_layout_a_whole_config_is_refused_as_before() -> None:
    with pytest.raises(ConfigError, match=r"unknown config key 'data'"):
        load_config({"data": {}}, engine_names=ENGINES, engine="verl")


HINT = "this looks like a whole VeRL config: run it with --engine verl, or put it under 'verl:'"
# An installed engine that declares its own config file's top-level keys.
VERL = {
    "verl": SettingsDeclaration(
        "VeRL",
        (),
        frozenset({"data", "actor_rollout_ref", "trainer", "critic", "custom_reward_function",
                   "reward_model", "ray_kwargs", "algorithm"}),
    )
}  # fmt: skip


@pytest.mark.parametrize(
    "key",
    [
        "data",
        "actor_rollout_ref",
        "trainer",
        "critic",
        "custom_reward_function",
        "reward_model",
        "ray_kwargs",
    ],
)
def test_a_verl_key_on_another_engine_says_where_it_belongs(key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config({key: {}}, engine_names=ENGINES, engine="toy", declarations=VERL)
    message = str(raised.value)
    assert message.startswith(f"config: unknown config key '{key}'") and message.endswith(HINT)
    assert "\n" not in message


def test_the_verl_hint_is_only_for_verl_names_and_other_engines() -> None:
    with pytest.raises(ConfigError) as raised:
        load_config({"colour": 1}, engine_names=ENGINES, engine="toy")
    assert "VeRL" not in str(raised.value)
    with pytest.raises(ConfigError) as raised:
        load_config({"critic": {}}, engine_names=ENGINES, engine="verl")
    assert "VeRL" not in str(raised.value), "already on verl: the layout decides"
    with pytest.raises(
        ConfigError,
        match=r"config 'algorithm' must be an algorithm name .*got "
        rf"dict .*; {re.escape(HINT)}$",
    ):
        load_config(
            {"algorithm": {"adv_estimator": "grpo"}},
            engine_names=ENGINES,
            engine="toy",
            declarations=VERL,
        )


@pytest.mark.parametrize(
    ("key", "flag"), [("reward", "--reward or "), ("agent", "--agent or "), ("engine", "")]
)
def test_a_job_field_given_as_a_config_key_says_where_it_belongs(key: str, flag: str) -> None:
    # `-o reward=rewards.py:score` means the job's reward, though VeRL's config has a 'reward'.
    with pytest.raises(ConfigError) as raised:
        load_config({key: "x"}, engine_names=ENGINES, engine="toy")
    message = str(raised.value)
    assert "VeRL" not in message
    assert message.endswith(
        f"; '{key}' is a field of the job, not of its config: give it as "
        f"{flag}a top-level key of the job file"
    )


@pytest.mark.parametrize(
    "section",
    [
        {"actor_rollout_ref": {"model": {"path": "m", "dtype": "bf16"}}},
        {"actor_rollout_ref.model.path": "m", "actor_rollout_ref": {"model": {"dtype": "bf16"}}},
        {"actor_rollout_ref": {"model.path": "m", "model": {"dtype": "bf16"}}},
    ],
)
def test_a_section_key_is_found_nested_or_dotted_and_left_out_of_a_new_section(
    section: dict,
) -> None:
    given = copy.deepcopy(section)
    found, value, rest = without_section_key(section, "actor_rollout_ref.model.path")
    assert (found, value) == (True, "m")
    assert rest["actor_rollout_ref"]["model"] == {"dtype": "bf16"}
    assert "actor_rollout_ref.model.path" not in rest
    assert section == given, "the section given stays as it was"
    assert without_section_key(rest, "actor_rollout_ref.model.path") == (False, None, rest)


def test_a_null_section_key_is_found() -> None:
    section = {"model_name_or_path": None, "beta": 0.1}
    assert without_section_key(section, "model_name_or_path") == (True, None, {"beta": 0.1})
    assert without_section_key({"a": 1}, "a.b") == (False, None, {"a": 1}), (
        "a value is not a mapping"
    )


def test_the_common_settings_read_and_write_back() -> None:
    import yaml
    from aworld_train.job.settings import Lora

    config = load_config(
        {
            "precision": "bf16",
            "lora": {"rank": 8},
            "report_to": "tensorboard",
            "kl_coef": 0,
            "lr_scheduler": "constant",
            "warmup_ratio": 0.1,
            "loss_aggregation": "token-mean",
            "clip_ratio": 0.2,
            "entropy_coef": 0.0,
            "eval_steps": 5,
            "eval_limit": 10,
            "log_samples": 0,
        }
    )
    assert config.lora == Lora(rank=8, alpha=16.0, dropout=0.0, target_modules="all-linear")
    assert config.report_to == ("tensorboard",)
    assert config.kl_coef == 0.0 and isinstance(config.kl_coef, float)
    data = config.to_dict()
    assert data["lora"] == {
        "rank": 8,
        "alpha": 16.0,
        "dropout": 0.0,
        "target_modules": "all-linear",
    }
    assert data["report_to"] == ["tensorboard"]
    assert yaml.safe_load(yaml.safe_dump(data)) == data, "job.yaml holds plain data"
    assert load_config(config) == config
    defaults = TrainConfig()
    assert (defaults.precision, defaults.lora, defaults.report_to) == ("auto", None, ())
    assert not {"precision", "report_to", "lora", "kl_coef"} & set(defaults.to_dict())


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("none", ()),
        ([], ()),
        ("wandb", ("wandb",)),
        (None, ()),
        (["mlflow", "tensorboard", "mlflow"], ("mlflow", "tensorboard")),
    ],
)
def test_report_to_takes_one_name_a_list_or_none(value: object, expected: tuple) -> None:
    assert load_config({"report_to": value}).report_to == expected


def test_lora_keys_from_overrides_keep_the_rest_default() -> None:
    config = load_config({}, ["lora.rank=4", "lora.target_modules=[q_proj, v_proj]"])
    assert config.lora is not None
    assert config.lora.to_dict() == {
        "rank": 4,
        "alpha": 8.0,
        "dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"],
    }


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"precision": "bf32"},
            "config 'precision' must be one of auto, fp32, bf16, fp16, got str "
            "'bf32' (did you mean 'fp32'?)",
        ),
        (
            {"lr_scheduler": "cosine_with_restarts"},
            "config 'lr_scheduler' must be one of constant, "
            "linear, cosine, got str 'cosine_with_restarts'",
        ),
        (
            {"loss_aggregation": "token_mean"},
            "config 'loss_aggregation' must be one of token-mean, "
            "seq-mean-token-mean, seq-mean-token-sum, seq-mean-token-sum-norm, got str 'token_mean' "
            "(did you mean 'token-mean'?)",
        ),
        (
            {"report_to": ["tensorbord"]},
            "config 'report_to' must be none, or a list of tensorboard,"
            " wandb, mlflow, swanlab, trackio, got list ['tensorbord'] (did you mean 'tensorboard'?)",
        ),
        (
            {"report_to": ["none", "wandb"]},
            "config 'report_to' must be none, or a list of "
            "tensorboard, wandb, mlflow, swanlab, trackio, got list ['none', 'wandb']",
        ),
        ({"kl_coef": -0.1}, "config 'kl_coef' must be a finite number >= 0, got float -0.1"),
        (
            {"warmup_ratio": 1.5},
            "config 'warmup_ratio' must be a number from 0 to 1, got float 1.5",
        ),
        ({"clip_ratio": 0}, "config 'clip_ratio' must be a finite number > 0, got int 0"),
        (
            {"entropy_coef": ".nan"},
            "config 'entropy_coef' must be a finite number >= 0, got str '.nan'",
        ),
        ({"eval_steps": 0}, "config 'eval_steps' must be an integer >= 1, got int 0"),
        ({"eval_limit": 2.0}, "config 'eval_limit' must be an integer >= 1, got float 2.0"),
        ({"log_samples": -1}, "config 'log_samples' must be an integer >= 0 (0: none), got int -1"),
        (
            {"lora": 8},
            "config 'lora' must be a mapping of rank, alpha, dropout, target_modules (for "
            "example lora: {rank: 8}), got int 8",
        ),
        (
            {"lora": {"alpha": 16}},
            "config 'lora.rank' is missing: give the adapter's rank, an "
            "integer >= 1 (for example lora: {rank: 8})",
        ),
        (
            {"lora": {"rank": 8, "rnak": 8}},
            "unknown config key 'lora.rnak' (did you mean 'rank'?); "
            "known keys: rank, alpha, dropout, target_modules",
        ),
        ({"lora": {"rank": 0}}, "config 'lora.rank' must be an integer >= 1, got int 0"),
        (
            {"lora": {"rank": 8, "dropout": 1}},
            "config 'lora.dropout' must be a number >= 0 and < 1, got int 1",
        ),
        (
            {"lora": {"rank": 8, "target_modules": []}},
            "config 'lora.target_modules' must be "
            "'all-linear' or a non-empty list of module names, got list []",
        ),
    ],
)
def test_a_bad_common_setting_is_one_line_naming_the_key(config: dict, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(config)
    assert str(raised.value) == message


def test_a_bad_lora_key_in_a_file_or_override_names_where(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("lora:\n  rank: 8\n  alpha: 0\n")
    with pytest.raises(
        ConfigError,
        match=r"^.*config\.yaml: config 'lora\.alpha' must be a "
        r"finite number > 0, got int 0$",
    ):
        load_config(tmp_path / "config.yaml")
    with pytest.raises(
        ConfigError,
        match=r"^-o lora\.rank=x: config 'lora\.rank' must be an "
        r"integer >= 1, got str 'x'$",
    ):
        load_config({}, ["lora.rank=x"])


def test_a_loaded_config_knows_which_common_keys_the_job_set() -> None:
    """An engine with a default of its own (VeRL's estimator) keeps it where the job set nothing:
    a default the job left alone is not set, one it wrote out is, from a file or ``-o`` alike."""
    config = load_config({"max_steps": 5, "seed": 42}, ["learning_rate=1e-5"], engine_names=ENGINES)
    assert config.is_set("seed") and config.is_set("max_steps") and config.is_set("learning_rate")
    assert not config.is_set("algorithm") and config.algorithm == "grpo"
    assert load_config({"algorithm": "grpo"}, engine_names=ENGINES).is_set("algorithm")
    assert TrainConfig(algorithm="ppo").is_set("algorithm") and not TrainConfig().is_set(
        "algorithm"
    )
    assert config == load_config({"max_steps": 5, "learning_rate": 1e-5}, engine_names=ENGINES)
