"""The common settings on ms-swift, without training: each key becomes swift's own argument,
swift builds what it is given, the effective-settings table reads back what swift will use, and
what the engine cannot honour (or a section that disagrees) is one line."""

from __future__ import annotations

import json
import types
from typing import Any

import pytest

from aworld_train import AgentTrainer
from aworld_train.errors import ConfigError

from aworld_train_swift.config import build_arguments


@pytest.fixture(autouse=True)
def _no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine sees no GPU, so that what these checks expect of a CPU holds on a GPU machine
    too (a test that wants one visible says so)."""
    from aworld_train_swift import config as swift_config

    monkeypatch.setattr(swift_config, "_gpu_visible", lambda: False)


def _check(job: dict[str, Any], **config: Any) -> AgentTrainer:
    job["config"] = dict(job["config"], **config)
    return AgentTrainer(**job, check_only=True)


def _settings(trainer: AgentTrainer) -> dict[str, tuple[Any, str, Any, str]]:
    return {s.name: (s.value, s.engine_key, s.engine_value, s.source) for s in trainer.settings}


def _with_test_set(job: dict[str, Any], rows: int = 4) -> None:
    lines = [json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) for d in range(rows)]
    (job["base_dir"] / "test.jsonl").write_text("\n".join(lines) + "\n")
    job["test_dataset"] = "test.jsonl"


def test_the_common_keys_become_swift_arguments_that_swift_builds(job: dict[str, Any]) -> None:
    trainer = _check(
        job,
        swift={"template": "qwen"},
        kl_coef=0.0,
        lr_scheduler="constant",
        warmup_ratio=0.1,
        loss_aggregation="token-mean",
        clip_ratio=0.3,
        entropy_coef=0.0,
        precision="fp32",
        lora={"rank": 8},
        report_to=["tensorboard"],
    )
    config = trainer.hand_off.config
    args = config.arguments
    run_dir = trainer.context.run_dir
    assert (args["beta"], args["lr_scheduler_type"], args["warmup_ratio"]) == (
        0.0,
        "constant_with_warmup",
        0.1,
    )
    assert (args["loss_type"], args["epsilon"]) == ("dapo", 0.3)
    assert (args["torch_dtype"], args["bf16"], args["fp16"]) == ("float32", False, False)
    assert (
        args["tuner_type"],
        args["lora_rank"],
        args["lora_alpha"],
        args["lora_dropout"],
        args["target_modules"],
    ) == ("lora", 8, 16.0, 0.0, ["all-linear"])
    assert args["report_to"] == ["tensorboard"]
    assert args["logging_dir"] == str(run_dir / "tensorboard")

    built = build_arguments(config)  # what swift makes of them
    training = built.training_args
    assert (built.beta, built.loss_type, built.epsilon) == (0.0, "dapo", 0.3)
    assert training.lr_scheduler_type == "constant_with_warmup"
    assert (training.fp16, training.bf16) == (False, False)
    assert built.ref_model is None  # beta 0: no reference model

    settings = _settings(trainer)
    assert settings["kl_coef"] == (0.0, "beta", 0.0, "job")
    assert settings["lr_scheduler"] == (
        "constant",
        "lr_scheduler_type",
        "constant_with_warmup",
        "job",
    )
    assert settings["loss_aggregation"] == ("token-mean", "loss_type", "dapo", "job")
    assert settings["clip_ratio"] == (0.3, "epsilon", 0.3, "job")
    assert settings["entropy_coef"] == (0.0, "", None, "job")
    assert settings["precision"] == ("fp32", "torch_dtype", "float32", "job")
    assert settings["lora"] == (
        {"rank": 8, "alpha": 16.0, "dropout": 0.0, "target_modules": "all-linear"},
        "tuner_type",
        "lora",
        "job",
    )
    assert settings["report_to"] == (["tensorboard"], "report_to", ["tensorboard"], "job")


def test_unset_settings_show_what_swift_itself_uses(job: dict[str, Any]) -> None:
    trainer = _check(job, swift={"template": "qwen"})
    settings = _settings(trainer)
    built = build_arguments(trainer.hand_off.config)
    assert (
        settings["kl_coef"]
        == (built.beta, "beta", built.beta, "default")
        == (0.04, "beta", 0.04, "default")
    )
    assert settings["lr_scheduler"][:3] == ("cosine", "lr_scheduler_type", "cosine")
    assert built.training_args.lr_scheduler_type == "cosine"
    assert settings["loss_aggregation"][:3] == ("seq-mean-token-mean", "loss_type", built.loss_type)
    assert settings["clip_ratio"][:3] == (built.epsilon, "epsilon", 0.2)
    assert settings["warmup_ratio"][0] == built.warmup_ratio == 0.0
    assert settings["entropy_coef"] == (0.0, "", None, "default")
    assert settings["lora"] == (None, "tuner_type", "full", "default")
    assert settings["report_to"] == ([], "report_to", ["none"], "default")
    assert settings["eval_steps"][0] is None
    assert settings["log_samples"] == (4, "", None, "default")
    assert settings["device"] == ("cpu", "use_cpu", True, "default")
    # auto on a CPU: fp32, with neither of swift's half-precision flags (swift would set fp16).
    assert settings["precision"] == ("fp32", "torch_dtype", "float32", "default")
    assert (built.training_args.fp16, built.training_args.bf16) == (False, False)


def test_the_section_s_own_keys_show_as_such(job: dict[str, Any]) -> None:
    section = {
        "template": "qwen",
        "beta": 0.1,
        "loss_type": "dr_grpo",
        "tuner_type": "lora",
        "lora_rank": 4,
        "torch_dtype": "float32",
        "lr_scheduler_type": "linear",
    }
    settings = _settings(_check(job, swift=section))
    assert settings["kl_coef"] == (0.1, "beta", 0.1, "section")
    assert settings["loss_aggregation"] == (
        "seq-mean-token-sum-norm",
        "loss_type",
        "dr_grpo",
        "section",
    )
    assert settings["lora"] == (
        {"rank": 4, "alpha": 32.0, "dropout": 0.05, "target_modules": "all-linear"},
        "tuner_type",
        "lora",
        "section",
    )
    assert settings["precision"] == ("fp32", "torch_dtype", "float32", "section")
    assert settings["lr_scheduler"] == ("linear", "lr_scheduler_type", "linear", "section")


@pytest.mark.parametrize(
    ("common", "section", "message"),
    [
        (
            {"kl_coef": 0.1},
            {"beta": 0.0},
            r"^config kl_coef: 0\.1 and swift\.beta: 0\.0 disagree \(kl_coef sets beta to 0\.1\): "
            r"set one of them$",
        ),
        (
            {"lr_scheduler": "linear"},
            {"lr_scheduler_type": "cosine"},
            r"^config lr_scheduler: 'linear' and swift\.lr_scheduler_type: 'cosine' disagree",
        ),
        (
            {"loss_aggregation": "token-mean"},
            {"loss_type": "grpo"},
            r"^config loss_aggregation: 'token-mean' and swift\.loss_type: \['grpo'\] disagree "
            r"\(loss_aggregation sets loss_type to 'dapo'\)",
        ),
        (
            {"clip_ratio": 0.3},
            {"epsilon_high": 0.28},
            r"^config clip_ratio: 0\.3 and swift\.epsilon_high: 0\.28 disagree",
        ),
        (
            {"precision": "bf16"},
            {"torch_dtype": "float32"},
            r"^config precision: 'bf16' and swift\.torch_dtype: 'float32' disagree \(precision sets "
            r"torch_dtype to 'bfloat16'\)",
        ),
        (
            {"lora": {"rank": 8}},
            {"lora_rank": 4},
            r"^config lora\.rank: 8 and swift\.lora_rank: 4 disagree",
        ),
        (
            {"lora": {"rank": 8}},
            {"tuner_type": "full"},
            r"^config lora: .* and swift\.tuner_type: 'full' disagree",
        ),
        (
            {"report_to": "tensorboard"},
            {"report_to": "none"},
            r"^config report_to: \['tensorboard'\] and swift\.report_to: \['none'\] disagree: "
            r"set one of them$",
        ),
    ],
)
def test_a_common_key_the_section_contradicts_is_one_line_naming_both(
    job: dict[str, Any], common: dict[str, Any], section: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        _check(job, swift={"template": "qwen", **section}, **common)
    assert "\n" not in str(error.value)


def test_a_section_that_agrees_with_the_common_key_passes(job: dict[str, Any]) -> None:
    args = _check(
        job,
        kl_coef=0.0,
        lora={"rank": 4, "alpha": 8},
        swift={
            "template": "qwen",
            "beta": 0.0,
            "lora_rank": 4,
            "lora_alpha": 8,
            "loss_type": "dapo",
        },
        loss_aggregation="token-mean",
    ).hand_off.config.arguments
    assert (args["beta"], args["lora_rank"], args["lora_alpha"]) == (0.0, 4, 8.0)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"entropy_coef": 0.01},
            r"^config entropy_coef is 0\.01: ms-swift's GRPO has no entropy bonus",
        ),
        (
            {"loss_aggregation": "seq-mean-token-sum"},
            r"^config loss_aggregation: ms-swift has no loss_type for seq-mean-token-sum; the swift "
            r"engine takes token-mean \(dapo\)",
        ),
        ({"precision": "fp16"}, r"^config precision: fp16 needs a GPU on the swift engine"),
        (
            {"swift": {"template": "qwen", "torch_dtype": "float16"}},
            r"^config swift\.torch_dtype: fp16 needs a GPU",
        ),
        (
            {"algorithm": "sft", "kl_coef": 0.1, "swift": {"template": "qwen"}},
            r"^config kl_coef: the swift engine uses it for grpo only, not for sft: leave it out$",
        ),
    ],
)
def test_a_value_the_engine_cannot_honour_is_one_line(
    job: dict[str, Any], config: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        _check(job, **config)
    assert "\n" not in str(error.value)


def test_bf16_on_a_cpu_computes_in_bf16(job: dict[str, Any]) -> None:
    trainer = _check(job, precision="bf16")
    args = trainer.hand_off.config.arguments
    assert (args["torch_dtype"], args["bf16"], args["fp16"], args["use_cpu"]) == (
        "bfloat16",
        True,
        False,
        True,
    )
    training = build_arguments(trainer.hand_off.config).training_args
    assert (training.bf16, training.fp16, training.use_cpu) == (True, False, True)
    assert _settings(trainer)["precision"] == ("bf16", "torch_dtype", "bfloat16", "job")


def test_a_missing_tracker_fails_the_check(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "swanlab" else find_spec(name, *a),
    )
    with pytest.raises(
        ConfigError,
        match=r"report_to: swanlab is not installed: pip install "
        r"swanlab",
    ):
        _check(job, swift={"template": "qwen", "report_to": ["swanlab"]})


def test_evaluation_follows_eval_steps_and_eval_limit(job: dict[str, Any]) -> None:
    _with_test_set(job, rows=6)
    trainer = _check(job, eval_steps=2, eval_limit=3)
    config = trainer.hand_off.config
    assert (config.arguments["eval_strategy"], config.arguments["eval_steps"]) == ("steps", 2)
    assert not config.end_only_eval
    assert trainer.hand_off.dataset.test_rows == 3
    assert _settings(trainer)["eval_steps"] == (2, "eval_steps", 2, "job")

    end_only = _check(job, eval_steps=None, eval_limit=None).hand_off.config
    assert end_only.end_only_eval
    assert (end_only.arguments["eval_strategy"], end_only.arguments["eval_steps"]) == ("steps", 4)
    own = _check(job, swift={"template": "qwen", "eval_steps": 3}).hand_off.config
    assert not own.end_only_eval and own.arguments["eval_steps"] == 3


def test_a_job_that_asks_for_the_cpu_keeps_it_where_a_gpu_is_visible(
    job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the two-process training test relies on when it runs on a GPU machine: the engine
    asks for the CPU only where no GPU is visible, the job's own use_cpu and float32 hold, and
    precision auto resolves for the GPU."""
    from aworld_train.engine.settings import resolve_precision

    from aworld_train_swift import config as swift_config

    monkeypatch.setattr(swift_config, "_gpu_visible", lambda: True)
    plain = _check(job).hand_off.config.arguments
    assert "use_cpu" not in plain
    expected = {"bf16": "bfloat16", "fp32": "float32"}[resolve_precision("auto", True)]
    assert plain["torch_dtype"] == expected
    asked = _check(job, swift=dict(job["config"]["swift"], use_cpu=True, torch_dtype="float32"))
    arguments = asked.hand_off.config.arguments
    assert (arguments["use_cpu"], arguments["torch_dtype"], arguments["bf16"]) == (
        True,
        "float32",
        False,
    )
    assert _settings(asked)["device"] == ("cpu", "use_cpu", True, "section")


def test_engine_keys_name_swift_s_own_keys() -> None:
    from aworld_train_swift.declaration import SETTINGS
    from aworld_train_swift.schema import section_fields

    fields = section_fields("grpo")
    for declared in SETTINGS.keys:
        assert all(key in fields for key in declared.keys), declared.name


def test_eval_limit_keeps_the_first_rows_of_the_test_set(tmp_path: Any) -> None:
    import datasets

    from aworld_train_swift.dataset import datasets_to_swift

    rows = datasets.Dataset.from_list(
        [{"prompt": f"Repeat: {d}", "ground_truth": str(d)} for d in (5, 6, 7)]
    )
    converted = datasets_to_swift(rows, rows, "grpo", tmp_path, eval_limit=2)
    assert converted.test is not None and converted.test_rows == 2
    kept = [json.loads(line)["ground_truth"] for line in converted.test.read_text().splitlines()]
    assert kept == ["5", "6"]


def test_evaluation_at_the_end_only_falls_on_the_last_step_of_an_epoch_run(
    tmp_path: Any,
) -> None:
    """A job trained by epochs has no max_steps to put in eval_steps at check time: the
    callback moves the trainer's cadence to its last step once it knows it."""
    from swift.callbacks import TrainerCallback
    from transformers import TrainerControl, TrainerState

    from aworld_train_swift.callbacks import common_metrics, run_callback

    logged: list[tuple[int, dict[str, Any]]] = []
    callback = run_callback(
        TrainerCallback,
        lambda total, done: None,
        lambda step, metrics: logged.append((step, metrics)),
        run_dir=tmp_path,
        log_samples=0,
        end_only_eval=True,
    )(None, types.SimpleNamespace(_get_train_sampler=lambda *_: None))  # what it wraps of a trainer
    state = TrainerState(max_steps=7, eval_steps=3, global_step=7)
    callback.on_train_begin(None, state, TrainerControl())
    assert state.eval_steps == 7
    callback.on_log(
        None,
        state,
        TrainerControl(),
        logs={"eval_reward": 0.5, "eval_rewards/score/mean": 0.5, "eval_rewards/score/std": 0.1},
    )
    assert logged == [(7, {"eval_reward": 0.5, "eval_score": 0.5, "eval_rewards/score/std": 0.1})]
    assert common_metrics({"rewards/score/mean": 1.0}) == {"rewards/score/mean": 1.0}


def test_fp16_from_the_section_without_a_gpu_names_the_key_that_asked_for_it(
    job: dict[str, Any],
) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^config swift\.fp16: fp16 needs a GPU on the swift "
        r"engine",
    ) as error:
        _check(job, swift={"template": "qwen", "torch_dtype": "float32", "fp16": True})
    assert "\n" not in str(error.value)


def test_constant_with_warmup_against_the_section_s_plain_constant_says_why(
    job: dict[str, Any],
) -> None:
    # Equal names, different schedules: transformers' constant ignores the warmup.
    with pytest.raises(
        ConfigError,
        match=r"^config lr_scheduler: constant with warmup_ratio 0\.1 "
        r"is ms-swift's constant_with_warmup, but "
        r"swift\.lr_scheduler_type is constant \(no warmup\): "
        r"set one of them$",
    ):
        _check(
            job,
            lr_scheduler="constant",
            warmup_ratio=0.1,
            swift={"template": "qwen", "lr_scheduler_type": "constant"},
        )
    with pytest.raises(
        ConfigError,
        match=r"^config lr_scheduler: constant with "
        r"swift\.warmup_steps 3 is ms-swift's "
        r"constant_with_warmup",
    ):
        _check(
            job,
            lr_scheduler="constant",
            warmup_ratio=None,
            swift={"template": "qwen", "lr_scheduler_type": "constant", "warmup_steps": 3},
        )
    args = _check(
        job,
        lr_scheduler="constant",
        warmup_ratio=0.1,
        swift={"template": "qwen", "lr_scheduler_type": "constant_with_warmup"},
    ).hand_off.config.arguments
    assert args["lr_scheduler_type"] == "constant_with_warmup"


def test_the_table_shows_an_evaluation_at_the_end_and_eval_limit(job: dict[str, Any]) -> None:
    _with_test_set(job, rows=6)
    settings = _settings(_check(job))
    # No eval_steps: swift's step-based evaluation falls on the last step (max_steps 4) only.
    assert settings["eval_steps"] == ("end", "eval_steps", 4, "default")
    assert settings["eval_limit"] == (None, "", None, "default")
    settings = _settings(_check(job, eval_steps=2, eval_limit=3))
    assert settings["eval_steps"] == (2, "eval_steps", 2, "job")
    assert settings["eval_limit"] == (3, "", 3, "job")
    assert list(settings)[-3:] == ["eval_steps", "eval_limit", "log_samples"]


def test_rollout_samples_keep_the_user_message_not_the_rendered_prompt() -> None:
    from collections import deque

    from aworld_train_swift.callbacks import record_user_prompts, rollout_samples

    class Trainer:
        """What swift's GRPO trainer does for its completion log (``_log_rollout``)."""

        reward_func_names = ["score"]

        def __init__(self) -> None:
            import torch

            self.reward_weights = torch.tensor([1.0])
            self._logs = {
                "prompt": deque(maxlen=2),
                "completion": deque(maxlen=2),
                "rewards": {"score": deque(maxlen=2)},
            }

        def _apply_chat_template_to_messages_list(self, messages_list: Any) -> list[str]:
            return [
                "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>"
                f"user\n{m[-1]['content']}<|im_end|>\n<|im_start|>assistant\n"
                for m in messages_list
            ]

        def log_rollout(self, digits: list[int]) -> None:
            messages = [[{"role": "user", "content": f"Repeat: {d}"}] for d in digits]
            self._logs["prompt"].extend(self._apply_chat_template_to_messages_list(messages))
            self._logs["completion"].extend(str(d) for d in digits)
            self._logs["rewards"]["score"].extend(1.0 for _ in digits)

    trainer = Trainer()
    record_user_prompts(trainer)
    trainer.log_rollout([1, 2])
    trainer.log_rollout([3, 4])
    rows = rollout_samples(trainer, 2)
    assert [(row["prompt"], row["completion"]) for row in rows] == [
        ("Repeat: 3", "3"),
        ("Repeat: 4", "4"),
    ]


def test_an_agent_without_a_system_prompt_gets_the_prompt_its_chat_template_renders(
    job: dict[str, Any], tiny_model: Any
) -> None:
    """The tiny model's chat template adds no system turn; swift's qwen template would add
    "You are a helpful assistant." (as the trl engine and `aworld-train eval` do not)."""
    from aworld_train.engine.runtime import load_tokenizer

    job["agent"] = {"name": "tiny"}
    config = _check(job).hand_off.config
    assert config.arguments["system"] == ""
    built = build_arguments(config)
    template = built.get_template()
    messages = [{"role": "user", "content": "Repeat: 7"}]
    encoded = template.encode({"messages": messages})
    expected = load_tokenizer(tiny_model).apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True
    )
    assert template.safe_decode(encoded["input_ids"]) == expected
    assert "system" not in expected

    # An agent's own system prompt goes to swift as it is.
    job["agent"] = {"name": "tiny", "system_prompt": "Answer with the digit."}
    assert _check(job).hand_off.config.arguments["system"] == "Answer with the digit."
