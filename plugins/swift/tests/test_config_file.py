"""An ms-swift config file (swift's arguments at its top level) as a job's whole ``config:``,
and swift's ``model`` argument as one of the places that name the job's one model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.errors import ConfigError
from aworld_train.testing.fixtures import check_config_file

# An ms-swift config file for GRPO: swift's arguments at the top level, beside keys aworld-train
# also has (learning_rate, max_steps, seed, num_generations); each test adds the model.
SWIFT_FILE = {
    "rlhf_type": "grpo",
    "template": "qwen",
    "beta": 0.04,
    "per_device_train_batch_size": 4,
    "num_generations": 2,
    "max_completion_length": 6,
    "warmup_ratio": 0.1,
    "max_steps": 3,
    "learning_rate": 2.0e-5,
    "seed": 7,
}


def test_section_keys_are_every_argument_but_the_jobs_own_fields() -> None:
    """The layout claims the arguments of each dataclass the engine parses an algorithm into,
    ``model`` among them, but not ``columns``, which at a config's top level is a misplaced
    job field."""
    from aworld_train_swift.schema import MODEL_KEY, section_keys
    from swift.arguments import RLHFArguments, SftArguments

    keys = section_keys()
    assert {"template", "beta", "num_generations", "lora_rank", MODEL_KEY} <= keys
    arguments = {
        name
        for cls in (RLHFArguments, SftArguments)
        for name, f in cls.__dataclass_fields__.items()
        if f.init
    }
    assert keys == arguments - {"columns"}


def test_an_ms_swift_config_file_as_the_whole_config_passes_check(
    job: dict[str, Any], tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ms-swift-style config file given as ``config:`` passes ``check``, and the resolved
    arguments carry its values and its model."""
    code, err = check_config_file(job, capsys, "swift", dict(SWIFT_FILE, model=str(tiny_model)))
    assert code == 0, err

    trainer = AgentTrainer(**job, check_only=True)
    arguments = trainer.hand_off.config.arguments
    carried = {key: value for key, value in SWIFT_FILE.items() if key != "rlhf_type"}
    assert {key: arguments[key] for key in carried} == carried
    assert arguments["model"] == str(tiny_model)


def test_model_in_the_swift_section_is_the_jobs_model(
    job: dict[str, Any], tiny_model: Path
) -> None:
    """``swift: {model: ...}`` without a common ``model`` names the model."""
    job["config"].pop("model")
    job["config"]["swift"] = {"template": "qwen", "beta": 0.0, "model": str(tiny_model)}
    trainer = AgentTrainer(**job, check_only=True)
    assert trainer.hand_off.config.arguments["model"] == str(tiny_model)


def test_swift_model_disagreeing_with_model_is_one_line(
    job: dict[str, Any], tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config whose ``swift.model`` names another model than the common ``model``:
    ``check`` refuses it in one line naming both."""
    code, err = check_config_file(
        job,
        capsys,
        "swift",
        dict(SWIFT_FILE, model="Qwen/Qwen2.5-0.5B-Instruct", swift={"model": str(tiny_model)}),
    )
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    for named in ("swift.model", str(tiny_model), "Qwen/Qwen2.5-0.5B-Instruct"):
        assert named in err, err
    assert not job["run_path"].exists()


def test_managed_arguments_left_null_or_as_the_engine_sets_them_pass() -> None:
    """An ms-swift config file may leave the arguments the engine sets null, and may repeat
    ``rlhf_type`` when it is the job's algorithm: the engine fills them in."""
    from aworld_train_swift.schema import validate_section

    section = {"output_dir": None, "dataset": None, "rlhf_type": "grpo", "beta": 0.0}
    assert validate_section(section, "grpo") == {"beta": 0.0}


def test_managed_argument_contradicting_the_engine_names_both() -> None:
    """An ``rlhf_type`` other than the job's algorithm is one line naming both values."""
    from aworld_train_swift.schema import validate_section

    with pytest.raises(
        ConfigError,
        match=(
            r"^config key 'swift\.rlhf_type' is 'dpo', but aworld-train sets it from the config's "
            r"`algorithm` key \('grpo'\); leave it out or null$"
        ),
    ):
        validate_section({"rlhf_type": "dpo"}, "grpo")
