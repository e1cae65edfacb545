"""The common settings on VeRL: precision, LoRA, trackers and the RL knobs mapped onto VeRL's own
keys in the composed config (and the saved ``verl_config.yaml`` main_ppo reads), each refusal
one line, and the effective-settings table read back from the composed config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from aworld_train.job.config import Resources
from aworld_train.engine import ConfigError, Lora, Setting
from aworld_train.testing.fixtures import hide_packages
from aworld_train_verl.config import VerlConfig, resolve
from aworld_train_verl.device import ENVIRONMENT
from aworld_train_verl.gpus import visible_gpus
from aworld_train_verl.overrides import model_overrides, schedule_overrides
from aworld_train_verl.settings import FSDP_NODES, effective_settings
from conftest import make_ctx

ACTOR = "actor_rollout_ref.actor"


def resolved(tmp_path: Path, model: Path, **config: Any) -> VerlConfig:
    ctx = make_ctx(tmp_path / "run", model, **config)
    return resolve(ctx.config, ctx.run_dir, inputs=model_overrides(str(model)))


def saved(result: VerlConfig, key: str) -> Any:
    """``key`` in the saved verl_config.yaml, as main_ppo reads it."""
    from omegaconf import OmegaConf

    value = OmegaConf.select(OmegaConf.load(result.path), key)
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def table(tmp_path: Path, model: Path, **config: Any) -> dict[str, Setting]:
    ctx = make_ctx(tmp_path / "run", model, **config)
    result = resolve(ctx.config, ctx.run_dir, inputs=model_overrides(str(model)))
    return {row.name: row for row in effective_settings(result.config, ctx.config)}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("precision", "dtype"), [("fp32", "float32"), ("bf16", "bfloat16"), ("fp16", "float16")]
)
def test_precision_sets_every_fsdp_engine_and_the_rollout(
    tmp_path: Path, tiny_model: Path, precision: str, dtype: str
) -> None:
    result = resolved(tmp_path, tiny_model, precision=precision)
    for node in FSDP_NODES:
        assert saved(result, f"{node}.mixed_precision") == {
            "param_dtype": precision,
            "reduce_dtype": "fp32",
            "buffer_dtype": "fp32",
        }
        assert saved(result, f"{node}.dtype") == dtype
        assert saved(result, f"{node}.model_dtype") == "fp32"  # the master weights
    assert saved(result, "actor_rollout_ref.rollout.dtype") == dtype


@pytest.mark.skipif(visible_gpus() > 0, reason="a visible GPU resolves auto by its bf16 support")
def test_auto_trains_on_the_cpu_in_fp32_where_no_gpu_is_visible(
    tmp_path: Path, tiny_model: Path
) -> None:
    rows = table(tmp_path, tiny_model)
    assert (rows["precision"].value, rows["precision"].source) == ("fp32", "default")
    device = rows["device"]
    assert (device.value, device.engine_key, device.engine_value, device.source) == (
        "cpu",
        "VERL_PLATFORM",
        "cpu",
        "default",
    )


def test_a_job_sized_for_a_cluster_gpu_is_checked_for_it_not_for_the_cpu(
    tmp_path: Path, tiny_model: Path
) -> None:
    """``auto`` keeps a job of several GPUs (or of a stated GPU size) on GPUs: checked here,
    trained elsewhere, in VeRL's own bf16."""
    rows = table(tmp_path, tiny_model, resources=Resources(gpus_per_node=4))
    assert (
        rows["precision"].value == "bf16" and rows["device"].engine_key == "trainer.n_gpus_per_node"
    )
    sized = resolved(tmp_path, tiny_model, resources=Resources(gpu_memory_gb=80))
    assert "VERL_PLATFORM" not in sized.variables


def test_a_dtype_of_the_section_that_contradicts_precision_is_one_line_naming_both(
    tmp_path: Path, tiny_model: Path
) -> None:
    with pytest.raises(ConfigError) as caught:
        resolved(
            tmp_path,
            tiny_model,
            precision="fp32",
            verl={"actor_rollout_ref.rollout.dtype": "bfloat16"},
        )
    assert str(caught.value) == (
        "config precision: 'fp32' and verl.actor_rollout_ref.rollout.dtype: 'bfloat16' disagree (precision sets "
        "actor_rollout_ref.rollout.dtype to 'float32'): set one of them"
    )


def test_the_section_may_choose_dtypes_when_precision_is_auto(
    tmp_path: Path, tiny_model: Path
) -> None:
    result = resolved(tmp_path, tiny_model, verl={"actor_rollout_ref.rollout.dtype": "float32"})
    assert saved(result, "actor_rollout_ref.rollout.dtype") == "float32"
    # VeRL's own names for the same dtype agree with the common key.
    resolved(
        tmp_path, tiny_model, precision="bf16", verl={"actor_rollout_ref.rollout.dtype": "bf16"}
    )


def test_lora_sets_verls_fsdp_lora_keys(tmp_path: Path, tiny_model: Path) -> None:
    result = resolved(tmp_path, tiny_model, lora=Lora(rank=8, target_modules=("q_proj", "v_proj")))
    assert saved(result, "actor_rollout_ref.model.lora_rank") == 8
    assert saved(result, "actor_rollout_ref.model.lora_alpha") == 16
    assert saved(result, "actor_rollout_ref.model.target_modules") == ["q_proj", "v_proj"]
    rows = table(tmp_path, tiny_model, lora=Lora(rank=8))
    assert rows["lora"].value == {
        "rank": 8,
        "alpha": 16.0,
        "dropout": 0.0,
        "target_modules": "all-linear",
    }
    assert (rows["lora"].engine_key, rows["lora"].engine_value, rows["lora"].source) == (
        "actor_rollout_ref.model.lora_rank",
        8,
        "job",
    )


@pytest.mark.parametrize(
    ("lora", "message"),
    [
        (
            Lora(rank=8, dropout=0.05),
            "config key 'lora.dropout': the verl engine cannot honour 0.05: VeRL's FSDP "
            "LoRA builds peft's LoraConfig without dropout; set 0 or train with the trl "
            "or swift engine",
        ),
        (
            Lora(rank=8, alpha=12.5),
            "config key 'lora.alpha': the verl engine takes a whole number (VeRL's "
            "actor_rollout_ref.model.lora_alpha is an int), not 12.5",
        ),
        (
            Lora(rank=1024),
            "config key 'lora.rank': 1024 is past vLLM's largest LoRA rank, 512, which VeRL's "
            "rollout refuses; lower it",
        ),
    ],
)
def test_a_lora_verl_cannot_train_is_one_line(
    tmp_path: Path, tiny_model: Path, lora: Lora, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        resolved(tmp_path, tiny_model, lora=lora)
    assert str(caught.value) == message


def test_report_to_adds_trackers_to_verls_logger_and_keeps_their_files_in_the_run(
    tmp_path: Path, tiny_model: Path
) -> None:
    result = resolved(tmp_path, tiny_model, report_to=("tensorboard",))
    assert saved(result, "trainer.logger") == ["console", "file", "tensorboard"]
    trackers = {name: value for name, value in result.variables.items() if name not in ENVIRONMENT}
    assert trackers == {"TENSORBOARD_DIR": str(tmp_path / "run" / "tensorboard")}
    assert table(tmp_path, tiny_model, report_to=("tensorboard",))["report_to"].value == [
        "tensorboard"
    ]


def test_a_tracker_the_section_chooses_logs_inside_the_run_too(
    tmp_path: Path, tiny_model: Path
) -> None:
    result = resolved(tmp_path, tiny_model, verl={"trainer.logger": ["console", "tensorboard"]})
    assert result.variables["TENSORBOARD_DIR"] == str(tmp_path / "run" / "tensorboard")


def test_a_logger_of_the_section_with_other_trackers_contradicts_report_to(
    tmp_path: Path, tiny_model: Path
) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^config report_to: \['tensorboard'\] and verl\.trainer\.logger: "
        r"\['console', 'wandb'\] disagree \(report_to sets trainer\.logger to "
        r"\['console', 'file', 'tensorboard'\]\): set one of them$",
    ):
        resolved(
            tmp_path,
            tiny_model,
            report_to=("tensorboard",),
            verl={"trainer.logger": ["console", "wandb"]},
        )


@pytest.mark.parametrize("missing", ["swanlab", "mlflow"])
def test_a_tracker_that_is_not_installed_fails_the_check(
    tmp_path: Path, tiny_model: Path, missing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_packages(monkeypatch, missing)
    with pytest.raises(
        ConfigError, match=f"^config report_to: {missing} is not installed: pip install {missing}$"
    ):
        resolved(tmp_path, tiny_model, verl={"trainer.logger": ["console", missing]})


@pytest.mark.parametrize(
    ("common", "expected"),
    [
        (
            {"kl_coef": 0.0},
            {
                f"{ACTOR}.use_kl_loss": False,
                f"{ACTOR}.kl_loss_coef": 0.0,
                "algorithm.use_kl_in_reward": False,
            },
        ),
        ({"kl_coef": 0.05}, {f"{ACTOR}.use_kl_loss": True, f"{ACTOR}.kl_loss_coef": 0.05}),
        ({"lr_scheduler": "cosine"}, {f"{ACTOR}.optim.lr_scheduler_type": "cosine"}),
        (
            {"lr_scheduler": "constant", "warmup_ratio": 0.1},
            {
                f"{ACTOR}.optim.lr_scheduler_type": "constant",
                f"{ACTOR}.optim.lr_warmup_steps_ratio": 0.1,
            },
        ),
        (
            {"loss_aggregation": "seq-mean-token-sum-norm"},
            {f"{ACTOR}.loss_agg_mode": "seq-mean-token-sum-norm"},
        ),
        (
            {"clip_ratio": 0.3},
            {
                f"{ACTOR}.clip_ratio": 0.3,
                f"{ACTOR}.clip_ratio_low": 0.3,
                f"{ACTOR}.clip_ratio_high": 0.3,
            },
        ),
        ({"entropy_coef": 0.01}, {f"{ACTOR}.entropy_coeff": 0.01}),
        ({"eval_steps": 5}, {"trainer.test_freq": 5}),
        ({"log_samples": 0}, {"trainer.rollout_data_dir": None}),
    ],
)
def test_rl_knobs_set_verls_keys_in_the_saved_config(
    tmp_path: Path, tiny_model: Path, common: dict[str, Any], expected: dict[str, Any]
) -> None:
    result = resolved(tmp_path, tiny_model, **common)
    assert {key: saved(result, key) for key in expected} == expected


def test_kl_coef_zero_loads_no_reference_model(tmp_path: Path, tiny_model: Path) -> None:
    from verl.trainer.ppo.utils import need_reference_policy

    assert not need_reference_policy(resolved(tmp_path, tiny_model, kl_coef=0.0).config)
    assert need_reference_policy(resolved(tmp_path, tiny_model, kl_coef=0.01).config)


def test_rollouts_are_dumped_inside_the_run_by_default(tmp_path: Path, tiny_model: Path) -> None:
    result = resolved(tmp_path, tiny_model)
    assert saved(result, "trainer.rollout_data_dir") == str(tmp_path / "run" / "rollouts")
    assert saved(result, "trainer.val_before_train") is False


def _disagreement(common: str, value: str, key: str, given: str, sets: str) -> str:
    """The line every engine gives for a common key and a section key set differently."""
    return f"config {common}: {value} and verl.{key}: {given} disagree ({common} sets {key} to {sets}): set one of them"


# (the common key, its value, the section's key, its value, what the common key sets it to), as the line shows them
DISAGREEMENTS = [
    ("kl_coef", "0.1", f"{ACTOR}.kl_loss_coef", "0.2", "0.1"),
    ("kl_coef", "0.0", "algorithm.use_kl_in_reward", "true", "false"),
    ("kl_coef", "0.1", f"{ACTOR}.use_kl_loss", "false", "true"),
    ("lr_scheduler", "'cosine'", f"{ACTOR}.optim.warmup_style", "'constant'", "'cosine'"),
    ("warmup_ratio", "0.1", f"{ACTOR}.optim.lr_warmup_steps", "10", "-1"),
    (
        "loss_aggregation",
        "'token-mean'",
        f"{ACTOR}.loss_agg_mode",
        "'seq-mean-token-mean'",
        "'token-mean'",
    ),
    ("clip_ratio", "0.2", f"{ACTOR}.clip_ratio_high", "0.28", "0.2"),
    ("entropy_coef", "0.0", f"{ACTOR}.entropy_coeff", "0.001", "0.0"),
    ("eval_steps", "5", "trainer.test_freq", "10", "5"),
]


@pytest.mark.parametrize(("common", "value", "key", "given", "sets"), DISAGREEMENTS)
def test_a_common_key_and_the_sections_key_that_disagree_are_one_line_naming_both(
    tmp_path: Path, tiny_model: Path, common: str, value: str, key: str, given: str, sets: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        resolved(
            tmp_path,
            tiny_model,
            verl={key: yaml.safe_load(given)},
            **{common: yaml.safe_load(value)},
        )
    assert str(caught.value) == _disagreement(common, value, key, given, sets)


def test_a_common_key_and_the_sections_key_that_agree_are_accepted(
    tmp_path: Path, tiny_model: Path
) -> None:
    result = resolved(
        tmp_path,
        tiny_model,
        kl_coef=0.05,
        entropy_coef=0,
        verl={f"{ACTOR}.kl_loss_coef": 0.05, f"{ACTOR}.entropy_coeff": 0.0},
    )
    assert saved(result, f"{ACTOR}.kl_loss_coef") == 0.05


def test_a_linear_schedule_is_refused_in_one_line(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        resolved(tmp_path, tiny_model, lr_scheduler="linear")
    assert str(caught.value) == (
        "config key 'lr_scheduler': the verl engine has no 'linear' schedule (VeRL's "
        f"{ACTOR}.optim.lr_scheduler_type is one of constant, cosine); choose one of those"
    )


def test_the_settings_table_shows_verls_defaults_when_nothing_is_set(
    tmp_path: Path, tiny_model: Path
) -> None:
    rows = table(tmp_path, tiny_model)
    shown = {
        name: (row.value, row.engine_key, row.source)
        for name, row in rows.items()
        if name != "device"
    }
    assert shown == {
        "precision": (
            rows["precision"].value,
            f"{ACTOR}.fsdp_config.mixed_precision.param_dtype",
            "default",
        ),
        "lora": (None, "actor_rollout_ref.model.lora_rank", "default"),
        "report_to": ([], "trainer.logger", "default"),
        "kl_coef": (0.0, f"{ACTOR}.use_kl_loss", "default"),
        "lr_scheduler": ("constant", f"{ACTOR}.optim.lr_scheduler_type", "default"),
        "warmup_ratio": (0.0, f"{ACTOR}.optim.lr_warmup_steps_ratio", "default"),
        "loss_aggregation": ("token-mean", f"{ACTOR}.loss_agg_mode", "default"),
        "clip_ratio": (0.2, f"{ACTOR}.clip_ratio", "default"),
        "entropy_coef": (0.0, f"{ACTOR}.entropy_coeff", "default"),
        "eval_steps": (None, "trainer.test_freq", "default"),
        "eval_limit": (None, "", "default"),
        "log_samples": (4, "trainer.rollout_data_dir", "default"),
    }


def test_the_eval_steps_row_shows_one_value_for_validating_at_the_end(
    tmp_path: Path, tiny_model: Path
) -> None:
    """With a test set and no eval_steps the engine sets test_freq to the last step: the row says
    "end" (as TRL's and ms-swift's do), not "none" beside a frequency."""
    ctx = make_ctx(tmp_path / "run", tiny_model)
    last = {**model_overrides(str(tiny_model)), "trainer.test_freq": 8}
    rows = {
        row.name: row
        for row in effective_settings(
            resolve(ctx.config, ctx.run_dir, inputs=last).config, ctx.config
        )
    }
    row = rows["eval_steps"]
    assert (row.value, row.engine_key, row.engine_value, row.source) == (
        "end",
        "trainer.test_freq",
        8,
        "default",
    )
    assert table(tmp_path / "every", tiny_model, eval_steps=2)["eval_steps"].value == 2
    section = table(tmp_path / "section", tiny_model, verl={"trainer.test_freq": 5})["eval_steps"]
    assert (section.value, section.engine_value, section.source) == (5, 5, "section")


def test_the_settings_table_names_the_job_and_the_section(tmp_path: Path, tiny_model: Path) -> None:
    rows = table(
        tmp_path,
        tiny_model,
        kl_coef=0.05,
        precision="fp32",
        verl={f"{ACTOR}.clip_ratio_high": 0.28, f"{ACTOR}.optim.lr_scheduler_type": "cosine"},
    )
    assert (
        rows["kl_coef"].value,
        rows["kl_coef"].engine_key,
        rows["kl_coef"].engine_value,
        rows["kl_coef"].source,
    ) == (0.05, f"{ACTOR}.kl_loss_coef", 0.05, "job")
    assert (rows["precision"].value, rows["precision"].engine_value, rows["precision"].source) == (
        "fp32",
        "fp32",
        "job",
    )
    assert (rows["clip_ratio"].value, rows["clip_ratio"].source) == (
        {"low": 0.2, "high": 0.28},
        "section",
    )
    assert (rows["lr_scheduler"].value, rows["lr_scheduler"].source) == ("cosine", "section")


def test_a_null_of_the_section_leaves_the_setting_to_the_engine(
    tmp_path: Path, tiny_model: Path
) -> None:
    """A VeRL config written for a framework leaves trainer.logger null for it to fill."""
    rows = table(tmp_path, tiny_model, verl={"trainer": {"logger": None}})
    assert (rows["report_to"].engine_value, rows["report_to"].source) == (
        ["console", "file"],
        "default",
    )


def test_without_eval_steps_verl_validates_and_saves_after_the_last_step_only(
    tmp_path: Path, tiny_model: Path
) -> None:
    """VeRL validates (and saves) at multiples of its frequency and at its last step: a
    frequency no earlier step reaches leaves the last step only."""
    ctx = make_ctx(
        tmp_path / "run", tiny_model, max_steps=None, num_epochs=2
    )  # batch_size 4 / 2 = 2 prompts
    inputs = model_overrides(str(tiny_model))
    assert schedule_overrides(ctx.config, ctx.run_dir, inputs, rows=9, has_test=True) == {
        "trainer.test_freq": 8,
        "trainer.save_freq": 8,
    }
    assert schedule_overrides(ctx.config, ctx.run_dir, inputs, rows=9, has_test=False) == {
        "trainer.test_freq": -1,
        "trainer.save_freq": 8,
    }
    ctx = make_ctx(tmp_path / "run", tiny_model, max_steps=3, eval_steps=2, save_steps=1)
    assert schedule_overrides(ctx.config, ctx.run_dir, inputs, rows=9, has_test=True) == {}


@pytest.mark.parametrize("key", ["eval_steps", "eval_limit"])
def test_evaluation_without_a_test_set_is_one_line(
    tmp_path: Path, tiny_model: Path, key: str
) -> None:
    from aworld_train import AgentTrainer

    rows = [{"prompt": "Repeat: 3", "ground_truth": "3"}] * 4
    with pytest.raises(ConfigError) as caught:
        AgentTrainer(
            train_dataset=rows,
            reward_func="exact_match",
            config={
                "model": str(tiny_model),
                "max_steps": 2,
                "batch_size": 4,
                "num_generations": 2,
                key: 2,
            },
            train_engine_name="verl",
            run_path=tmp_path / "runs",
            check_only=True,
        )
    assert str(caught.value) == (
        f"config {key}: the job has no test_dataset to evaluate; add one or remove {key}"
    )


def test_a_rollout_dump_elsewhere_contradicts_log_samples(tmp_path: Path, tiny_model: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^config log_samples: 2 and verl\.trainer\.rollout_data_dir: '/elsewhere' "
        r"disagree \(log_samples sets trainer\.rollout_data_dir to '.*/run/rollouts'\)",
    ):
        resolved(
            tmp_path, tiny_model, log_samples=2, verl={"trainer.rollout_data_dir": "/elsewhere"}
        )
    # Unset, log_samples leaves the folder to the section: samples come from where VeRL dumps.
    assert saved(
        resolved(tmp_path, tiny_model, verl={"trainer.rollout_data_dir": str(tmp_path / "dump")}),
        "trainer.rollout_data_dir",
    ) == str(tmp_path / "dump")
