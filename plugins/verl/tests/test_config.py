"""check_config: VeRL's own config composed with Hydra, the common keys mapped, the ``verl:``
section applied and checked, VeRL's ``validate_config`` run, the result saved."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aworld_train.job.config import Resources, TrainConfig
from aworld_train.errors import ConfigError
from aworld_train_verl.composition import base_config, flatten
from aworld_train_verl.config import resolve
from aworld_train_verl.overrides import common_overrides, model_overrides
from conftest import make_ctx


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
        (
            {"resources": Resources(nnodes=2, gpus_per_node=4), "batch_size": 16},
            "trainer.nnodes",
            2,
        ),
        (
            {"resources": Resources(nnodes=2, gpus_per_node=4), "batch_size": 16},
            "trainer.n_gpus_per_node",
            4,
        ),
        (
            {"resources": Resources(ray_address="ray://head:10001")},
            "ray_kwargs.ray_init.address",
            "ray://head:10001",
        ),
        (
            {"resources": Resources(ray_address="ray://head:10001")},
            "ray_kwargs.ray_init.num_cpus",
            None,
        ),
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
    assert (
        overrides["actor_rollout_ref.model.path"]
        == overrides["critic.model.path"]
        == "/models/qwen"
    )


def test_batch_size_must_hold_whole_groups_of_generations() -> None:
    with pytest.raises(
        ConfigError,
        match="'batch_size': 6 completions per step do not divide into groups of num_generations=4",
    ):
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
        tmp_path,
        tiny_model,
        learning_rate=1e-5,
        verl={"actor_rollout_ref": {"actor": {"optim": {"lr": 2e-6}}}, "trainer.total_epochs": 4},
    ).config
    assert cfg.actor_rollout_ref.actor.optim.lr == 2e-6
    assert cfg.trainer.total_epochs == 4


def test_a_misspelled_key_is_rejected_with_a_suggestion(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(
        ConfigError, match=r"'verl\.trainer\.total_epoch'.*did you mean 'trainer\.total_epochs'"
    ):
        resolved(tmp_path, tiny_model, verl={"trainer": {"total_epoch": 2}})
    assert not (tmp_path / "run" / "verl_config.yaml").exists()


def test_an_unknown_top_level_key_is_rejected(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(
        ConfigError, match="'no_such_setting' is not a key of VeRL's ppo_trainer config"
    ):
        resolved(tmp_path, tiny_model, verl={"no_such_setting": 1})


def test_a_new_key_is_accepted_with_a_plus(tmp_path: Path, tiny_model: Path) -> None:
    cfg = resolved(
        tmp_path, tiny_model, verl={"+ray_kwargs.ray_init.include_dashboard": False}
    ).config
    assert cfg.ray_kwargs.ray_init.include_dashboard is False


def test_a_value_of_the_wrong_type_is_rejected(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"'verl\.trainer\.total_epochs': expected an integer \(the type of VeRL's default 30\), got 'many'",
    ):
        resolved(tmp_path, tiny_model, verl={"trainer": {"total_epochs": "many"}})


def test_verls_validate_config_rejects_inconsistent_batch_sizes(
    tmp_path: Path, tiny_model: Path
) -> None:
    with pytest.raises(
        ConfigError, match=r"validate_config.*train_batch_size \(2\).*ppo_mini_batch_size \(8\)"
    ):
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


def test_every_base_key_is_known_and_flatten_reads_added_keys_as_hydra_does() -> None:
    """``-o +trainer.x=1`` reads as ``{"+trainer": {"x": 1}}``: Hydra's ``+trainer.x=1``."""
    from aworld_train_verl.composition import known_keys

    keys = known_keys(base_config())
    assert {
        "trainer.total_epochs",
        "actor_rollout_ref.rollout.n",
        "reward.custom_reward_function.path",
    } <= keys
    assert flatten(
        {"a": {"b": 1, "c.d": 2}, "+e": {"f": 3}, "++h": {"i": {"j": 4}}, "g": {}, "+k": {}}
    ) == {"a.b": 1, "a.c.d": 2, "+e.f": 3, "++h.i.j": 4, "+k": {}}


def test_the_cached_base_config_is_what_hydra_composes() -> None:
    """The base config is composed by Hydra once per VeRL version and kept as YAML."""
    from aworld_train.cache import cache_file
    from aworld_train_verl.composition import cache_key, config_dir
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    assert cache_file("verl-ppo_trainer.yaml", cache_key()).is_file()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
        composed = compose("ppo_trainer")
    assert OmegaConf.to_container(base_config()) == OmegaConf.to_container(composed)
    assert OmegaConf.is_struct(base_config())


def test_an_added_key_that_exists_is_refused(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"config key 'verl\.\+trainer\.total_epochs': 'trainer\.total_epochs' is already a key",
    ):
        resolved(tmp_path, tiny_model, verl={"+trainer.total_epochs": 3})


def imported_after(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    code += f"\nimport json, sys\nprint(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def test_the_entry_point_module_imports_nothing_heavy() -> None:
    heavy = ("torch", "transformers", "datasets", "ray", "verl", "hydra", "omegaconf")
    assert imported_after("import aworld_train_verl.engine", heavy) == []


def test_every_default_of_verls_config_passes_the_value_checks() -> None:
    """Set back to its default, no key is refused: the types come from VeRL's own dataclasses,
    the ranges leave VeRL's defaults alone."""
    from aworld_train_verl.schema import check_values, schema
    from omegaconf import OmegaConf

    defaults = flatten(OmegaConf.to_container(base_config(), resolve=False))
    defaults = {key: value for key, value in defaults.items() if value != "???"}  # mandatory, unset
    check_values(defaults, {key: f"config key 'verl.{key}'" for key in defaults}, base_config())
    assert schema().types["actor_rollout_ref.rollout.top_p"] == "float"
    assert "vllm" in schema().choices["actor_rollout_ref.rollout.name"]


def test_an_interpolation_is_left_to_verl(tmp_path: Path, tiny_model: Path) -> None:
    cfg = resolved(
        tmp_path,
        tiny_model,
        verl={
            "critic.ppo_micro_batch_size_per_gpu": "${actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu}"
        },
    ).config
    assert (
        cfg.critic.ppo_micro_batch_size_per_gpu
        == cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu
    )


# --- A VeRL config written for a framework that fills some keys in (AWorld Train's) ----------

# AWorld Train's train_gaia_with_aworld_verl/grpo_trainer.yaml, key for key, trimmed to run on the
# CPU: its null keys for the framework to fill, its float sampling values, its 8-GPU sizes; the
# lengths fit the tiny model, which stands in for Qwen/Qwen3-32B, and the multi-turn tool file
# (a path in AWorld's repository) is left out.
AWORLD_GRPO_TRAINER = """
data:
  train_files:
  val_files:
  max_prompt_length: 2048
  max_response_length: 64
  return_raw_chat: true
  train_batch_size: 1
  filter_overlong_prompts: true
  truncation: error
custom_reward_function:
  path:
  name:
actor_rollout_ref:
  model:
    path: MODEL
    use_remove_padding: true
    enable_gradient_checkpointing: true
    use_fused_kernels: true
  actor:
    use_kl_loss: false
    kl_loss_coef: 0.0
    clip_ratio_low: 0.2
    clip_ratio_high: 0.28
    clip_ratio_c: 10.0
    optim:
      lr: 0.000006
    use_dynamic_bsz: false
    ppo_mini_batch_size: 1
    ppo_micro_batch_size_per_gpu: 1
    ppo_max_token_len_per_gpu: 4096
    ulysses_sequence_parallel_size: 8
    strategy: fsdp2
    fsdp_config:
      model_dtype: bf16
      param_offload: true
      optimizer_offload: true
      fsdp_size: -1
  ref:
    log_prob_micro_batch_size_per_gpu: 1
  rollout:
    name: vllm
    mode: async
    max_num_batched_tokens: 4096
    prompt_length: 2048
    response_length: 64
    tensor_model_parallel_size: 8
    enforce_eager: true
    free_cache_engine: true
    gpu_memory_utilization: 0.8
    n: 8
    max_num_seqs: 8
    log_prob_micro_batch_size_per_gpu: 1
    temperature: 1.0
    top_p: 1.0
    top_k: 80
    dtype: bfloat16
    agent:
      agent_loop_config_path:
    multi_turn:
      enable: false
      max_user_turns: 8
      max_assistant_turns: 8
      format: hermes
    val_kwargs:
      top_p: 0.6
      temperature: 1.0
      n: 1
    trace:
      backend: mlflow
algorithm:
  adv_estimator: grpo
  use_kl_in_reward: false
  kl_ctrl:
    kl_coef: 0.0
trainer:
  logger: [ 'console' ]
  project_name: verl_train
  experiment_name: verl_experiment
  nnodes: 1
  n_gpus_per_node: 8
  default_local_dir:
  total_epochs: 1
  val_before_train: false
  log_val_generations: 0
  save_freq: 30
  test_freq: 0
"""

TOOLS_FILE = '''
def lookup(word: str) -> str:
    """Look a word up.

    Args:
        word: the word.
    """
    return word
'''


def aworld_grpo_trainer(model: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(AWORLD_GRPO_TRAINER.replace("MODEL", str(model)))


def saved_config_of(tmp_path: Path, model: Path | None, reward_file: Path, config: Any) -> Any:
    """Check a job whose agent has a tool (so the agent loop is wired) through AgentTrainer, as
    a user's script does; the run directory and its saved VeRL config, read back.

    :param model: the agent's model, or ``None`` when the config names it."""
    from aworld_train import AgentTrainer
    from conftest import repeat_rows
    from omegaconf import OmegaConf

    (tmp_path / "tools.py").write_text(TOOLS_FILE)
    trainer = AgentTrainer(
        agent={
            "name": "lookup-agent",
            "tools": ["tools.py:lookup"],
            **({"model": str(model)} if model else {}),
        },
        config=config,
        reward_func=f"{reward_file.name}:exact",
        train_dataset=repeat_rows(4),
        train_engine_name="verl",
        run_path=tmp_path / "runs",
        base_dir=tmp_path,
        show_progress=False,
    )
    return trainer.run_dir.path, OmegaConf.load(trainer.run_dir.path / "verl_config.yaml")


def assert_engine_wiring(run_dir: Path, saved: Any, model: Path) -> None:
    assert Path(saved.data.train_files).is_file() and Path(saved.data.val_files).is_file()
    assert Path(saved.data.train_files).parent == run_dir / "data"
    loop = Path(saved.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    assert loop.is_file() and loop.parent == run_dir
    assert Path(saved.trainer.default_local_dir).parent == run_dir
    reward = Path(saved.reward.custom_reward_function.path)
    assert (
        reward.is_file() and reward.parent == run_dir and saved.reward.custom_reward_function.name
    )
    assert saved.custom_reward_function.path is None, (
        "no legacy value for VeRL to copy over the wired one"
    )
    assert Path(saved.actor_rollout_ref.model.path) == model.resolve()


def test_aworlds_verl_config_under_verl_passes_check_and_saves_the_engines_wiring(
    tmp_path: Path, tool_model: Path, reward_file: Path
) -> None:
    """Gaps 1 and 3: a whole VeRL config whose framework-filled keys are null gets the engine's
    wiring (data files, agent loop, checkpoints, reward), and its float sampling values pass."""
    run_dir, saved = saved_config_of(
        tmp_path, tool_model, reward_file, {"verl": aworld_grpo_trainer(tool_model)}
    )
    assert_engine_wiring(run_dir, saved, tool_model)
    # The user's own values stay.
    assert saved.trainer.experiment_name == "verl_experiment"
    assert (
        saved.actor_rollout_ref.rollout.top_p == 1.0
        and saved.actor_rollout_ref.rollout.val_kwargs.temperature == 1.0
    )
    assert saved.actor_rollout_ref.rollout.tensor_model_parallel_size == 8
    assert saved.trainer.n_gpus_per_node == 8


def test_aworlds_verl_config_file_as_the_whole_config_is_the_verl_section(
    tmp_path: Path, tool_model: Path, reward_file: Path
) -> None:
    """Gaps 2 and 3: AWorld's example passes its VeRL config file as the job's config
    (config="grpo_trainer.yaml"); it works as the verl section, its model key is the job's one
    model, and the saved config holds the engine's wiring."""
    import yaml

    config_file = tmp_path / "grpo_trainer.yaml"
    config_file.write_text(yaml.safe_dump(aworld_grpo_trainer(tool_model)))
    run_dir, saved = saved_config_of(tmp_path, None, reward_file, str(config_file))
    assert_engine_wiring(run_dir, saved, tool_model)
    assert saved.trainer.experiment_name == "verl_experiment"
    assert saved.actor_rollout_ref.rollout.top_p == 1.0


def overrides_of(
    tmp_path: Path, model: Path | None, verl: dict[str, Any], **inputs: Any
) -> dict[str, Any]:
    from aworld_train_verl.overrides import job_overrides

    ctx = make_ctx(tmp_path / "run", model, verl=verl)
    return job_overrides(ctx.config, ctx.run_dir, inputs=inputs)[0]


WIRED_FILES = {
    "data.train_files": "/runs/r/data/train.parquet",
    "data.val_files": "/runs/r/data/test.parquet",
    "reward.custom_reward_function.path": "/runs/r/verl_reward.py",
    "reward.custom_reward_function.name": "compute_score",
}


@pytest.mark.parametrize(
    ("key", "value", "wired", "fix"),
    [
        (
            "data.train_files",
            "~/data/gaia/train.parquet",
            "/runs/r/data/train.parquet",
            "the job's train_dataset",
        ),
        (
            "data.val_files",
            ["/data/test.parquet"],
            "/runs/r/data/test.parquet",
            "the job's test_dataset",
        ),
        (
            "reward.custom_reward_function.name",
            "gaia_reward_func",
            "compute_score",
            "the job's reward",
        ),
        ("trainer.default_local_dir", "/ckpt", None, "the run's checkpoints"),
    ],
)
def test_a_value_that_contradicts_the_engines_wiring_is_one_error_naming_both(
    tmp_path: Path, tiny_model: Path, key: str, value: Any, wired: str | None, fix: str
) -> None:
    """A non-null value for a key the engine wires names the key, both values, and the fix."""
    wired = wired or str(tmp_path / "run" / "checkpoints")
    with pytest.raises(ConfigError) as caught:
        overrides_of(tmp_path, tiny_model, {key: value}, **WIRED_FILES)
    assert str(caught.value) == (
        f"config key 'verl.{key}': {value!r} contradicts {wired!r}, which the engine wires there; "
        f"leave it null: the engine writes {fix}"
        + (" (else its train_dataset)" if key == "data.val_files" else "")
        + " there"
    )


def test_a_value_that_agrees_with_the_engines_wiring_is_accepted(
    tmp_path: Path, tiny_model: Path
) -> None:
    run_dir = tmp_path / "run"
    overrides = overrides_of(
        tmp_path,
        tiny_model,
        {
            "trainer.default_local_dir": str(run_dir / "checkpoints"),
            "data.train_files": "/runs/r/data/train.parquet",
        },
        **WIRED_FILES,
    )
    assert overrides["trainer.default_local_dir"] == str(run_dir / "checkpoints")


def test_the_legacy_reward_keys_null_or_agreeing_leave_the_wired_reward(
    tmp_path: Path, tiny_model: Path
) -> None:
    """VeRL copies a set legacy custom_reward_function over reward.custom_reward_function: null
    or the engine's own value, it is left out; any other value is refused."""
    from aworld_train_verl.composition import compose_config

    for legacy in (
        {"path": None, "name": None},
        {"path": "/runs/r/verl_reward.py", "name": "compute_score"},
    ):
        composed = compose_config(
            overrides_of(tmp_path, tiny_model, {"custom_reward_function": legacy}, **WIRED_FILES)
        )
        assert (
            composed.custom_reward_function.path is None
            and composed.custom_reward_function.name is None
        )
        assert composed.reward.custom_reward_function.path == "/runs/r/verl_reward.py"
    with pytest.raises(
        ConfigError,
        match=(
            r"^config key 'verl\.custom_reward_function\.path': 'reward/gaia_reward_function\.py' contradicts "
            r"'/runs/r/verl_reward\.py', which the engine wires at 'reward\.custom_reward_function\.path'; "
            r"leave it null: the engine writes the job's reward there$"
        ),
    ):
        overrides_of(
            tmp_path,
            tiny_model,
            {"custom_reward_function.path": "reward/gaia_reward_function.py"},
            **WIRED_FILES,
        )


def test_a_null_for_a_key_the_engine_sets_keeps_the_engines_value(
    tmp_path: Path, tiny_model: Path
) -> None:
    """Null for a default, a common key or run wiring is "engine, fill it in"; null for any
    other key keeps VeRL's meaning of null."""
    cfg = resolved(
        tmp_path,
        tiny_model,
        verl={
            "trainer": {
                "project_name": None,
                "experiment_name": None,
                "total_training_steps": None,
            },
            "actor_rollout_ref": {
                "rollout": {"name": None},
                "actor": {"optim": {"min_lr_ratio": None}},
            },
        },
    ).config
    assert cfg.trainer.project_name == "aworld-train"
    assert cfg.trainer.experiment_name == "run"
    assert cfg.trainer.total_training_steps == 2  # max_steps
    assert cfg.actor_rollout_ref.rollout.name == "vllm"
    assert cfg.actor_rollout_ref.actor.optim.min_lr_ratio is None


def test_the_one_model_reaches_actor_rollout_reference_and_critic(
    tmp_path: Path, tiny_model: Path
) -> None:
    """Gap 2, the engine's part: the job's model (config.model, where the core puts the model
    however the job named it) is what the actor, its rollout and reference, and the critic load;
    a null model key is filled with it."""
    cfg = resolve(
        make_ctx(tmp_path / "run", tiny_model, verl={"actor_rollout_ref.model.path": None}).config,
        tmp_path / "run",
    ).config
    assert cfg.actor_rollout_ref.model.path == cfg.critic.model.path == str(tiny_model)
    assert "path" not in cfg.actor_rollout_ref.rollout and "path" not in cfg.actor_rollout_ref.ref


def test_a_model_key_naming_another_model_is_refused(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=(
            r"^config key 'verl\.actor_rollout_ref\.model\.path': 'Qwen/Qwen3-32B' contradicts '.+', which "
            r"the engine wires there; leave it null: the engine writes the job's model there$"
        ),
    ):
        overrides_of(
            tmp_path, tiny_model, {"actor_rollout_ref": {"model": {"path": "Qwen/Qwen3-32B"}}}
        )


def test_a_null_model_key_and_no_model_is_still_no_model(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path / "run", None, verl={"actor_rollout_ref.model.path": None})
    with pytest.raises(ConfigError, match="^no model: set config key 'model'"):
        resolve(ctx.config, ctx.run_dir)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("actor_rollout_ref.rollout.top_p", 1.0),
        ("actor_rollout_ref.rollout.top_p", 1),
        ("actor_rollout_ref.rollout.val_kwargs.temperature", 1.0),
        ("actor_rollout_ref.rollout.val_kwargs.top_p", 0.6),
        ("actor_rollout_ref.actor.clip_ratio_c", 10.0),
        ("actor_rollout_ref.model.target_modules", ["q_proj", "v_proj"]),
    ],
)
def test_values_are_checked_against_verls_declared_types(
    tmp_path: Path, tiny_model: Path, key: str, value: Any
) -> None:
    """Gap 5: a float field takes 1 and 1.0 whatever the type of its default (VeRL's default
    top_p is the int 1), and a field VeRL declares Any takes a list where its default is a str."""
    from omegaconf import OmegaConf

    assert OmegaConf.select(resolved(tmp_path, tiny_model, verl={key: value}).config, key) == value


def test_an_int_key_no_dataclass_declares_refuses_a_float(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"'verl\.trainer\.total_epochs': expected an integer \(the type of VeRL's default 30\), got 2\.0",
    ):
        resolved(tmp_path, tiny_model, verl={"trainer.total_epochs": 2.0})


def test_config_layout_names_verls_top_level_keys_without_importing_verl() -> None:
    """The core places a whole VeRL config's keys in the verl section by these names, and takes
    its model key as the job's model; once the composed config is cached, the hook imports
    neither VeRL nor torch."""
    from aworld_train.job.config import ConfigLayout
    from aworld_train_verl import engine

    layout = engine.config_layout()
    assert isinstance(layout, ConfigLayout) and not layout.takes_any
    assert {
        "data",
        "actor_rollout_ref",
        "critic",
        "trainer",
        "algorithm",
        "reward",
        "custom_reward_function",
        "reward_model",
        "ray_kwargs",
    } <= layout.section_keys
    assert "model" not in layout.section_keys and "verl" not in layout.section_keys
    assert layout.model_key == "actor_rollout_ref.model.path"
    code = "from aworld_train_verl import engine\nassert 'trainer' in engine.config_layout().section_keys"
    assert imported_after(code, ("torch", "verl", "hydra")) == []


# --- VeRL's own configs: what VeRL's code takes, check takes -----------------------------------


def job_config(model: Path, **data: Any) -> TrainConfig:
    """A config as the core loads a job's (a whole VeRL config's top-level keys claimed, which
    common keys the job set recorded)."""
    from aworld_train.job.config import load_config
    from aworld_train_verl.engine import config_layout

    overrides = data.pop("overrides", ())
    data = {"model": str(model), "batch_size": 4, "num_generations": 2, "max_steps": 2, **data}
    return load_config(
        data, overrides, engine_names=("verl",), engine="verl", layout=config_layout()
    )


def resolved_job(tmp_path: Path, model: Path, **data: Any) -> Any:
    return resolve(
        job_config(model, **data), tmp_path / "run", inputs=model_overrides(str(model))
    ).config


CRITIC = {"critic": {"optim": {"lr": 1e-5}, "ppo_micro_batch_size_per_gpu": 4}}


@pytest.mark.parametrize(
    ("data", "estimator"),
    [
        (CRITIC, "gae"),  # VeRL's quickstart: a critic, the estimator left to VeRL
        ({**CRITIC, "algorithm": "grpo"}, "grpo"),  # the job's own choice
        ({**CRITIC, "overrides": ["algorithm=grpo"]}, "grpo"),
        ({"critic": {"enable": False, "optim": {"lr": 1e-5}}}, "grpo"),
        ({"trainer": {"logger": "console"}}, "grpo"),  # no critic: the common default
        ({**CRITIC, "algorithm": {"adv_estimator": "rloo"}}, "rloo"),
    ],
)
def test_the_common_algorithm_left_unset_keeps_verls_estimator_for_a_config_with_a_critic(
    tmp_path: Path, tiny_model: Path, data: dict[str, Any], estimator: str
) -> None:
    assert resolved_job(tmp_path, tiny_model, **data).algorithm.adv_estimator == estimator


def test_a_logger_given_as_one_name_is_taken_as_verls_tracking_takes_it(
    tmp_path: Path, tiny_model: Path
) -> None:
    assert (
        resolved(tmp_path, tiny_model, verl={"trainer.logger": "console"}).config.trainer.logger
        == "console"
    )
    with pytest.raises(
        ConfigError,
        match=r"'verl\.trainer\.logger': 'consol' is not one of VeRL's trackers.*did you mean 'console'",
    ):
        resolved(tmp_path, tiny_model, verl={"trainer.logger": ["consol"]})


def test_the_older_micro_batch_sizes_replace_the_engines_per_gpu_defaults(
    tmp_path: Path, tiny_model: Path
) -> None:
    """VeRL refuses a micro batch size given both ways; a config that gives the older global
    form gets none of the engine's per-GPU defaults."""
    older = {
        f"actor_rollout_ref.{key}": 2
        for key in (
            "actor.ppo_micro_batch_size",
            "rollout.log_prob_micro_batch_size",
            "ref.log_prob_micro_batch_size",
        )
    }
    cfg = resolved(tmp_path, tiny_model, kl_coef=0.1, verl=older).config
    assert cfg.actor_rollout_ref.actor.ppo_micro_batch_size == 2
    assert cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu is None
    assert cfg.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu is None
    assert cfg.actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu is None


@pytest.mark.parametrize("how", ["section", "-o"])
def test_hydras_add_or_override_sets_a_key_that_exists_and_adds_one_that_does_not(
    tmp_path: Path, tiny_model: Path, how: str
) -> None:
    items = {"++trainer.val_before_train": True, "++trainer.brand_new": 3}
    data: dict[str, Any] = (
        {"verl": items}
        if how == "section"
        else {"overrides": [f"{key}={str(value).lower()}" for key, value in items.items()]}
    )
    cfg = resolved_job(tmp_path, tiny_model, **data)
    assert cfg.trainer.val_before_train is True and cfg.trainer.brand_new == 3


def test_a_value_given_with_add_or_override_is_checked_as_the_key_itself(
    tmp_path: Path, tiny_model: Path
) -> None:
    with pytest.raises(
        ConfigError, match=r"'verl\.\+\+trainer\.total_epochs': expected an integer"
    ):
        resolved_job(tmp_path, tiny_model, verl={"++trainer.total_epochs": "many"})


def test_hydras_add_of_a_key_that_exists_is_refused_from_an_override_too(
    tmp_path: Path, tiny_model: Path
) -> None:
    """``-o +trainer.val_before_train=false`` (an older VeRL script's) reads as a mapping under
    ``+trainer``: refused as Hydra refuses it."""
    with pytest.raises(ConfigError, match=r"'trainer\.val_before_train' is already a key.*'\+\+'"):
        resolved_job(tmp_path, tiny_model, overrides=["+trainer.val_before_train=false"])


@pytest.mark.parametrize(
    ("key", "value"),
    [("actor_rollout_ref.actor.kl_loss_type", "low_var_kll"), ("algorithm.kl_penalty", "full")],
)
def test_a_kl_estimator_verl_cannot_compute_is_refused_with_its_names(
    tmp_path: Path, tiny_model: Path, key: str, value: str
) -> None:
    """VeRL's kl_penalty fails on these at the first KL it computes (the first actor update)."""
    with pytest.raises(
        ConfigError,
        match=rf"'verl\.{key}': '{value}' is not one of VeRL's KL estimators.*low_var_kl",
    ):
        resolved(tmp_path, tiny_model, verl={key: value})


def test_the_kl_estimators_are_read_from_verls_code() -> None:
    import torch
    from aworld_train_verl.schema import kl_estimators
    from verl.trainer.ppo.core_algos import kl_penalty

    names = kl_estimators()
    assert {
        "kl",
        "k1",
        "abs",
        "mse",
        "k2",
        "low_var_kl",
        "k3",
        "k3+",
    } <= names and "full" not in names
    zero = torch.zeros(1)
    for name in names:
        kl_penalty(zero, zero, name)  # each one computes
