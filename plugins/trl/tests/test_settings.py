"""The common keys as TRL's own (precision, LoRA, trackers, RL knobs, evaluation, samples) and
the effective-settings table, at check level."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.errors import ConfigError
from aworld_train.testing.fixtures import hide_packages


def _checked(job: dict[str, Any], trl: dict[str, Any] | None = None, **common: Any) -> Any:
    """The TrlConfig ``check`` resolves for ``job`` with ``common`` keys and a ``trl:`` section."""
    job["config"] = dict(job["config"], **common)
    if trl is not None:
        job["config"]["trl"] = trl
    return AgentTrainer(**job, check_only=True).hand_off.config


def _table(config: Any) -> dict[str, tuple[Any, str, Any, str]]:
    return {s.name: (s.value, s.engine_key, s.engine_value, s.source) for s in config.settings}


def _refused(
    job: dict[str, Any], pattern: str, trl: dict[str, Any] | None = None, **common: Any
) -> None:
    with pytest.raises(ConfigError, match=pattern) as caught:
        _checked(job, trl, **common)
    assert "\n" not in str(caught.value)


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def test_unset_keys_report_grpo_config_defaults(job: dict[str, Any]) -> None:
    config = _checked(job, {})
    table = _table(config)
    assert table["kl_coef"] == (0.0, "beta", 0.0, "default")
    assert table["lr_scheduler"] == ("linear", "lr_scheduler_type", "linear", "default")
    assert table["warmup_ratio"] == (0.0, "warmup_steps", 0, "default")
    assert table["loss_aggregation"] == ("token-mean", "loss_type", "dapo", "default")
    assert table["clip_ratio"] == (0.2, "epsilon", 0.2, "default")
    assert table["entropy_coef"] == (0.0, "entropy_coef", 0.0, "default")
    assert table["lora"] == (None, "peft_config", None, "default")
    assert table["report_to"] == ([], "report_to", "none", "default")
    assert table["eval_steps"][0] is None
    assert table["log_samples"] == (4, "", 4, "default")
    assert list(table) == [
        "device",
        "precision",
        "lora",
        "report_to",
        "lr_scheduler",
        "warmup_ratio",
        "kl_coef",
        "loss_aggregation",
        "clip_ratio",
        "entropy_coef",
        "eval_steps",
        "eval_limit",
        "log_samples",
    ]
    assert table["eval_limit"] == (None, "", None, "default")
    json.dumps([s.value for s in config.settings])  # the manifest keeps the values


def test_auto_precision_is_fp32_on_cpu_and_bf16_on_a_gpu_that_has_it(job: dict[str, Any]) -> None:
    import torch

    config = _checked(job)
    gpu_bf16 = _gpu() and torch.cuda.is_bf16_supported()
    expected = "bf16" if gpu_bf16 else "fp32"
    assert _table(config)["precision"] == (expected, "bf16", gpu_bf16, "default")
    assert (config.arguments["bf16"], config.arguments["fp16"]) == (gpu_bf16, False)
    if not _gpu():
        assert _table(config)["device"] == ("cpu", "use_cpu", True, "default")


def test_use_cpu_in_the_section_keeps_auto_precision_on_fp32(job: dict[str, Any]) -> None:
    config = _checked(job, {"use_cpu": True})
    assert _table(config)["device"] == ("cpu", "use_cpu", True, "section")
    assert _table(config)["precision"] == ("fp32", "bf16", False, "default")
    assert config.arguments["bf16"] is False


def test_resources_device_cpu_keeps_the_run_on_the_cpu(job: dict[str, Any]) -> None:
    config = _checked(job, resources={"device": "cpu"})
    assert _table(config)["device"] == ("cpu", "use_cpu", True, "job")
    assert _table(config)["precision"] == ("fp32", "bf16", False, "default")


def test_bf16_on_cpu_asks_trl_for_bf16(job: dict[str, Any]) -> None:
    config = _checked(job, {"use_cpu": True}, precision="bf16")
    assert (config.arguments["bf16"], config.arguments["fp16"]) == (True, False)
    assert config.arguments["use_cpu"] is True
    assert _table(config)["precision"] == ("bf16", "bf16", True, "job")


def test_fp16_without_a_gpu_is_refused(job: dict[str, Any]) -> None:
    _refused(
        job,
        r"^config precision: fp16 needs a GPU on the trl engine",
        {"use_cpu": True},
        precision="fp16",
    )


def test_fp16_from_the_section_without_a_gpu_names_the_sections_key(job: dict[str, Any]) -> None:
    _refused(
        job,
        r"^config trl\.fp16: fp16 needs a GPU on the trl engine \(trl\.use_cpu keeps "
        r"the run on the CPU\): use bf16 or fp32$",
        {"use_cpu": True, "fp16": True},
    )
    if not _gpu():
        _refused(
            job,
            r"^config trl\.fp16: fp16 needs a GPU on the trl engine \(none is "
            r"visible\)",
            {"fp16": True},
        )


def test_section_precision_flags_count_when_precision_is_auto(job: dict[str, Any]) -> None:
    config = _checked(job, {"use_cpu": True, "bf16": True})
    assert _table(config)["precision"] == ("bf16", "bf16", True, "section")


def test_precision_and_the_sections_flag_must_agree(job: dict[str, Any]) -> None:
    _refused(
        job,
        r"^config precision: 'fp32' and trl\.bf16: true disagree \(precision sets "
        r"bf16 to false\): set one of them$",
        {"bf16": True},
        precision="fp32",
    )


def test_rl_knobs_map_onto_grpo_config(job: dict[str, Any]) -> None:
    config = _checked(
        job,
        {},
        kl_coef=0.05,
        lr_scheduler="cosine",
        warmup_ratio=0.1,
        loss_aggregation="seq-mean-token-mean",
        clip_ratio=0.3,
        entropy_coef=0.01,
    )
    args = config.arguments
    assert (args["beta"], args["lr_scheduler_type"], args["warmup_steps"]) == (0.05, "cosine", 0.1)
    assert (args["loss_type"], args["epsilon"], args["entropy_coef"]) == ("grpo", 0.3, 0.01)
    table = _table(config)
    assert table["kl_coef"] == (0.05, "beta", 0.05, "job")
    assert table["loss_aggregation"] == ("seq-mean-token-mean", "loss_type", "grpo", "job")


@pytest.mark.parametrize(
    ("aggregation", "loss_type"),
    [
        ("token-mean", "dapo"),
        ("seq-mean-token-mean", "grpo"),
        ("seq-mean-token-sum-norm", "dr_grpo"),
    ],
)
def test_loss_aggregation_names_trl_loss_types(
    job: dict[str, Any], aggregation: str, loss_type: str
) -> None:
    assert _checked(job, loss_aggregation=aggregation).arguments["loss_type"] == loss_type


def test_loss_aggregation_without_a_trl_loss_type_is_refused(job: dict[str, Any]) -> None:
    _refused(
        job,
        r"^config loss_aggregation: seq-mean-token-sum has no TRL loss_type on the "
        r"trl engine, which takes token-mean \(dapo\)",
        loss_aggregation="seq-mean-token-sum",
    )


def test_constant_rate_with_warmup_is_constant_with_warmup(job: dict[str, Any]) -> None:
    args = _checked(job, lr_scheduler="constant", warmup_ratio=0.25).arguments
    assert (args["lr_scheduler_type"], args["warmup_steps"]) == ("constant_with_warmup", 0.25)
    args = _checked(job, lr_scheduler="constant", warmup_ratio=None).arguments
    assert args["lr_scheduler_type"] == "constant"


def test_constant_with_warmup_against_the_sections_plain_constant_says_why(
    job: dict[str, Any],
) -> None:
    # Equal names, different schedules: transformers' constant ignores the warmup.
    _refused(
        job,
        r"^config lr_scheduler: constant with warmup_ratio 0\.1 is TRL's "
        r"constant_with_warmup, but trl\.lr_scheduler_type is constant \(no warmup\): set "
        r"one of them$",
        {"lr_scheduler_type": "constant"},
        lr_scheduler="constant",
        warmup_ratio=0.1,
    )
    _refused(
        job,
        r"^config lr_scheduler: constant with trl\.warmup_steps 0\.2 is TRL's "
        r"constant_with_warmup",
        {"lr_scheduler_type": "constant", "warmup_steps": 0.2},
        lr_scheduler="constant",
        warmup_ratio=None,
    )
    args = _checked(
        job,
        {"lr_scheduler_type": "constant_with_warmup"},
        lr_scheduler="constant",
        warmup_ratio=0.1,
    ).arguments
    assert args["lr_scheduler_type"] == "constant_with_warmup"


def test_a_whole_run_of_warmup_is_refused(job: dict[str, Any]) -> None:
    _refused(job, r"^config warmup_ratio: the trl engine takes a ratio below 1", warmup_ratio=1.0)


def test_a_section_key_alone_is_reported_under_its_common_name(job: dict[str, Any]) -> None:
    table = _table(
        _checked(
            job, {"beta": 0.04, "loss_type": "bnpo", "lr_scheduler_type": "constant_with_warmup"}
        )
    )
    assert table["kl_coef"] == (0.04, "beta", 0.04, "section")
    # bnpo has no common name.
    assert table["loss_aggregation"] == (None, "loss_type", "bnpo", "section")
    assert table["lr_scheduler"] == (
        "constant",
        "lr_scheduler_type",
        "constant_with_warmup",
        "section",
    )


@pytest.mark.parametrize(
    ("common", "section", "pattern"),
    [
        (
            {"kl_coef": 0.1},
            {"beta": 0.2},
            r"config kl_coef: 0\.1 and trl\.beta: 0\.2 disagree "
            r"\(kl_coef sets beta to 0\.1\): set one of them$",
        ),
        ({"clip_ratio": 0.2}, {"epsilon": 0.3}, r"config clip_ratio: .* and trl\.epsilon: 0\.3"),
        (
            {"loss_aggregation": "token-mean"},
            {"loss_type": "grpo"},
            r"config loss_aggregation: 'token-mean' and trl\.loss_type: 'grpo' disagree "
            r"\(loss_aggregation sets loss_type to 'dapo'\)",
        ),
        (
            {"lr_scheduler": "linear"},
            {"lr_scheduler_type": "cosine"},
            r"config lr_scheduler: .* and trl\.lr_scheduler_type: 'cosine' disagree",
        ),
        (
            {"report_to": ["tensorboard"]},
            {"report_to": "none"},
            r"config report_to: \['tensorboard'\] and trl\.report_to: 'none' disagree: set one of them$",
        ),
    ],
)
def test_a_common_key_and_its_trl_key_must_agree(
    job: dict[str, Any], common: dict[str, Any], section: dict[str, Any], pattern: str
) -> None:
    _refused(job, f"^{pattern}", section, **common)


def test_the_same_value_in_both_places_passes(job: dict[str, Any]) -> None:
    table = _table(
        _checked(
            job, {"beta": 0.0, "loss_type": "dapo"}, kl_coef=0.0, loss_aggregation="token-mean"
        )
    )
    assert table["kl_coef"][3] == table["loss_aggregation"][3] == "job"


def test_rl_knobs_are_refused_for_sft(job: dict[str, Any]) -> None:
    job["config"].pop("num_generations")
    _refused(
        job,
        r"^config kl_coef: the trl engine uses it for grpo only, not for sft: leave it "
        r"out$",
        {},
        algorithm="sft",
        kl_coef=0.1,
    )


def test_sft_reports_no_rl_knobs(job: dict[str, Any]) -> None:
    job["config"].pop("num_generations")
    table = _table(_checked(job, {}, algorithm="sft", lr_scheduler="constant"))
    assert "kl_coef" not in table and "log_samples" not in table
    assert table["lr_scheduler"] == ("constant", "lr_scheduler_type", "constant", "job")


def test_lora_becomes_a_peft_config(job: dict[str, Any]) -> None:
    config = _checked(job, lora={"rank": 4, "target_modules": ["q_proj", "v_proj"]})
    lora = {"rank": 4, "alpha": 8.0, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    assert config.lora == lora
    assert _table(config)["lora"] == (
        lora,
        "peft_config",
        {
            "r": 4,
            "lora_alpha": 8.0,
            "lora_dropout": 0.0,
            "target_modules": ["q_proj", "v_proj"],
            "task_type": "CAUSAL_LM",
        },
        "job",
    )


def test_lora_without_peft_fails_the_check(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "peft" else find_spec(name, *a),
    )
    _refused(
        job,
        r"^config lora: peft is not installed: pip install 'aworld-train-trl\[lora\]'$",
        lora={"rank": 8},
    )


def test_report_to_keeps_every_log_in_the_run_directory(job: dict[str, Any]) -> None:
    config = _checked(job, report_to=["tensorboard"])
    assert config.arguments["report_to"] == ["tensorboard"]
    run_dir = Path(config.arguments["output_dir"]).parent
    assert config.environment["TENSORBOARD_LOGGING_DIR"] == str(run_dir / "tensorboard")
    assert _table(config)["report_to"] == (["tensorboard"], "report_to", ["tensorboard"], "job")


def test_a_tracker_that_is_not_installed_fails_the_check(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    hide_packages(monkeypatch, "mlflow")
    _refused(
        job,
        r"^config report_to: mlflow is not installed: pip install mlflow$",
        report_to=["mlflow"],
    )
    # The section's own report_to is checked the same way.
    _refused(
        job, r"^config report_to: mlflow is not installed", {"report_to": "mlflow"}, report_to=[]
    )


def _with_test_set(job: dict[str, Any], rows: int) -> None:
    test = [json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) for d in range(rows)]
    (job["base_dir"] / "test.jsonl").write_text("\n".join(test) + "\n")
    job["test_dataset"] = "test.jsonl"


def test_eval_steps_with_a_test_set_sets_trls_cadence(job: dict[str, Any]) -> None:
    _with_test_set(job, 6)
    trainer = AgentTrainer(
        **dict(job, config=dict(job["config"], eval_steps=2, eval_limit=4)), check_only=True
    )
    config = trainer.hand_off.config
    args = config.arguments
    assert (args["eval_strategy"], args["eval_steps"], args["num_generations_eval"]) == (
        "steps",
        2,
        1,
    )
    assert config.evaluate_at_end is False
    assert len(trainer.hand_off.dataset.test) == 4
    assert _table(config)["eval_steps"] == (2, "eval_steps", 2, "job")
    assert _table(config)["eval_limit"] == (4, "", 4, "job")


def test_a_test_set_without_eval_steps_is_scored_at_the_end(job: dict[str, Any]) -> None:
    _with_test_set(job, 3)
    config = _checked(job)
    assert config.evaluate_at_end is True
    assert config.arguments.get("eval_strategy", "no") == "no"
    # The table says what happens: one evaluation, after the last step.
    assert _table(config)["eval_steps"] == (
        "end",
        "trainer.evaluate()",
        "after the last step",
        "default",
    )
    assert _table(config)["eval_limit"] == (None, "", None, "default")


def test_eval_steps_and_trls_own_must_agree(job: dict[str, Any]) -> None:
    _with_test_set(job, 3)
    _refused(job, r"^config eval_steps: 2 and trl\.eval_steps: 3", {"eval_steps": 3}, eval_steps=2)


def test_no_test_set_no_evaluation(job: dict[str, Any]) -> None:
    config = _checked(job)
    assert config.evaluate_at_end is False
    assert "eval_steps" not in config.arguments
    assert _table(config)["eval_steps"] == (None, "eval_strategy", "no", "default")
