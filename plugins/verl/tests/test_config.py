"""check_config: VeRL's own config composed with Hydra, the common keys mapped, the ``verl:``
section applied and checked, VeRL's ``validate_config`` run, the result saved."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import make_ctx

from aworld_train.config import Resources, TrainConfig
from aworld_train.errors import ConfigError
from aworld_train_verl.config import (
    base_config,
    common_overrides,
    flatten,
    model_overrides,
    resolve,
)


def resolved(tmp_path: Path, model: Path, **config: Any) -> Any:
    ctx = make_ctx(tmp_path / "run", model, **config)
    return resolve(ctx.config, ctx.run_dir, inputs=model_overrides(str(model)))


@pytest.mark.parametrize(
    ("common", "key", "value"),
    [
        ({"algorithm": "grpo"}, "algorithm.adv_estimator", "grpo"),
        ({"algorithm": "ppo"}, "algorithm.adv_estimator", "gae"),
        ({"algorithm": "rloo"}, "algorithm.adv_estimator", "rloo"),
        ({"learning_rate": 3e-6}, "actor_rollout_ref.actor.optim.lr", 3e-6),
        ({"max_steps": 7}, "trainer.total_training_steps", 7),
        ({"num_epochs": 2.5}, "trainer.total_epochs", 3),
        ({"batch_size": 8, "num_generations": 2}, "data.train_batch_size", 4),
        ({"batch_size": 8, "num_generations": 2}, "actor_rollout_ref.actor.ppo_mini_batch_size", 4),
        ({"batch_size": 8, "num_generations": 4}, "data.train_batch_size", 2),
        ({"num_generations": 4}, "actor_rollout_ref.rollout.n", 4),
        ({"max_prompt_length": 100}, "data.max_prompt_length", 100),
        ({"max_prompt_length": 100}, "actor_rollout_ref.rollout.prompt_length", 100),
        ({"max_completion_length": 16}, "data.max_response_length", 16),
        ({"seed": 7}, "data.seed", 7),
        ({"seed": 7}, "actor_rollout_ref.rollout.seed", 7),
        ({"save_steps": 5}, "trainer.save_freq", 5),
        ({"resources": Resources(nnodes=2, gpus_per_node=4), "batch_size": 16}, "trainer.nnodes", 2),
        ({"resources": Resources(nnodes=2, gpus_per_node=4), "batch_size": 16}, "trainer.n_gpus_per_node", 4),
        ({"resources": Resources(ray_address="ray://head:10001")}, "ray_kwargs.ray_init.address", "ray://head:10001"),
        ({"resources": Resources(ray_address="ray://head:10001")}, "ray_kwargs.ray_init.num_cpus", None),
        ({}, "actor_rollout_ref.model.trust_remote_code", False),
        ({"trust_remote_code": True}, "actor_rollout_ref.model.trust_remote_code", True),
        ({"trust_remote_code": True}, "data.trust_remote_code", True),
    ],
)
def test_common_keys_map_onto_verl_keys(
    tmp_path: Path, tiny_model: Path, common: dict[str, Any], key: str, value: Any
) -> None:
    from omegaconf import OmegaConf

    result = resolved(tmp_path, tiny_model, **common)
    assert OmegaConf.select(result.config, key) == value


def test_model_key_sets_the_policy_path(tmp_path: Path) -> None:
    overrides = common_overrides(TrainConfig(model="/models/qwen"))
    assert overrides["actor_rollout_ref.model.path"] == overrides["critic.model.path"] == "/models/qwen"


def test_batch_size_must_hold_whole_groups_of_generations() -> None:
    with pytest.raises(ConfigError, match="'batch_size': 6 completions per step do not divide into groups of num_generations=4"):
        common_overrides(TrainConfig(batch_size=6, num_generations=4))


def test_sft_is_refused_with_the_engines_that_do_it() -> None:
    with pytest.raises(ConfigError, match="'algorithm'.*not 'sft'.*trl or swift"):
        common_overrides(TrainConfig(algorithm="sft"))


def test_mandatory_choices_get_defaults_and_the_run_gets_its_directories(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    cfg = resolved(tmp_path, tiny_model).config
    assert cfg.actor_rollout_ref.rollout.name == "vllm"
    assert cfg.actor_rollout_ref.rollout.mode == "async"
    assert cfg.trainer.default_local_dir == str(tmp_path / "run" / "checkpoints")
    assert cfg.trainer.experiment_name == "run"
    assert cfg.ray_kwargs.ray_init.num_cpus >= 1
    assert "wandb" not in cfg.trainer.logger


def test_joining_a_cluster_from_ray_address_sets_no_cpu_count(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")
    assert resolved(tmp_path, tiny_model).config.ray_kwargs.ray_init.num_cpus is None


def test_verl_section_wins_over_common_keys(tmp_path: Path, tiny_model: Path) -> None:
    cfg = resolved(
        tmp_path, tiny_model, learning_rate=1e-5,
        verl={"actor_rollout_ref": {"actor": {"optim": {"lr": 2e-6}}}, "trainer.total_epochs": 4},
    ).config
    assert cfg.actor_rollout_ref.actor.optim.lr == 2e-6
    assert cfg.trainer.total_epochs == 4


def test_a_misspelled_key_is_rejected_with_a_suggestion(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(ConfigError, match=r"'verl\.trainer\.total_epoch'.*did you mean 'trainer\.total_epochs'"):
        resolved(tmp_path, tiny_model, verl={"trainer": {"total_epoch": 2}})
    assert not (tmp_path / "run" / "verl_config.yaml").exists()


def test_an_unknown_top_level_key_is_rejected(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(ConfigError, match="'no_such_setting' is not a key of VeRL's ppo_trainer config"):
        resolved(tmp_path, tiny_model, verl={"no_such_setting": 1})


def test_a_new_key_is_accepted_with_a_plus(tmp_path: Path, tiny_model: Path) -> None:
    cfg = resolved(tmp_path, tiny_model, verl={"+ray_kwargs.ray_init.include_dashboard": False}).config
    assert cfg.ray_kwargs.ray_init.include_dashboard is False


def test_a_value_of_the_wrong_type_is_rejected(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(ConfigError, match=r"'verl\.trainer\.total_epochs': must be int \(the type of VeRL's default 30\), not 'many'"):
        resolved(tmp_path, tiny_model, verl={"trainer": {"total_epochs": "many"}})


def test_verls_validate_config_rejects_inconsistent_batch_sizes(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(ConfigError, match=r"validate_config.*train_batch_size \(2\).*ppo_mini_batch_size \(8\)"):
        resolved(tmp_path, tiny_model, verl={"actor_rollout_ref.actor.ppo_mini_batch_size": 8})


def test_verls_rollout_config_rejects_a_bad_value(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(ConfigError, match="actor_rollout_ref.rollout"):
        resolved(tmp_path, tiny_model, verl={"actor_rollout_ref.rollout.mode": "sync"})


def test_no_model_is_an_error(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path / "run", None)
    with pytest.raises(ConfigError, match="no model"):
        resolve(ctx.config, ctx.run_dir)


def test_the_saved_config_is_what_main_ppo_composes(tmp_path: Path, tiny_model: Path) -> None:
    """main_ppo reads the saved file through Hydra with --config-path/--config-name."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    result = resolved(tmp_path, tiny_model, batch_size=8, verl={"trainer.total_epochs": 4})
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(result.path.parent), version_base=None):
        reread = compose(result.path.stem)
    assert OmegaConf.to_container(reread) == OmegaConf.to_container(result.config)


def test_every_base_key_is_known_and_flatten_keeps_new_keys_whole() -> None:
    from aworld_train_verl.config import known_keys

    keys = known_keys(base_config())
    assert {"trainer.total_epochs", "actor_rollout_ref.rollout.n", "reward.custom_reward_function.path"} <= keys
    assert flatten({"a": {"b": 1, "c.d": 2}, "+e": {"f": 3}, "g": {}}) == {"a.b": 1, "a.c.d": 2, "+e": {"f": 3}}


def test_the_cached_base_config_is_what_hydra_composes() -> None:
    """The base config is composed by Hydra once per VeRL version and kept as YAML."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from aworld_train_verl.config import config_dir
    from aworld_train_verl.schema import cache_file

    assert cache_file("ppo_trainer.yaml").is_file()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
        composed = compose("ppo_trainer")
    assert OmegaConf.to_container(base_config()) == OmegaConf.to_container(composed)
    assert OmegaConf.is_struct(base_config())


def test_an_added_key_that_exists_is_refused(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(ConfigError, match=r"config key 'verl\.\+trainer\.total_epochs': 'trainer\.total_epochs' is already a key"):
        resolved(tmp_path, tiny_model, verl={"+trainer.total_epochs": 3})


def test_the_entry_point_module_imports_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "import aworld_train_verl.engine\n"
        "heavy = ('torch', 'transformers', 'datasets', 'ray', 'verl', 'hydra', 'omegaconf')\n"
        "print(json.dumps(sorted(m for m in heavy if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_every_default_of_verls_config_passes_the_value_checks() -> None:
    """Set back to its default, no key is refused: the types come from VeRL's own dataclasses,
    the ranges leave VeRL's defaults alone."""
    from omegaconf import OmegaConf

    from aworld_train_verl.schema import check_values, schema

    defaults = flatten(OmegaConf.to_container(base_config(), resolve=False))
    defaults = {key: value for key, value in defaults.items() if value != "???"}  # mandatory, unset
    check_values(defaults, {key: f"config key 'verl.{key}'" for key in defaults}, base_config())
    assert schema().types["actor_rollout_ref.rollout.top_p"] == "float"
    assert "vllm" in schema().choices["actor_rollout_ref.rollout.name"]


def test_an_interpolation_is_left_to_verl(tmp_path: Path, tiny_model: Path) -> None:
    cfg = resolved(tmp_path, tiny_model, verl={
        "critic.ppo_micro_batch_size_per_gpu": "${actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu}"}).config
    assert cfg.critic.ppo_micro_batch_size_per_gpu == cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu
