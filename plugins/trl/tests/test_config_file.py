"""A TRL config file (what ``trl grpo --config grpo.yaml`` reads) as a job's whole ``config:``,
and ``model_name_or_path`` as one of the places that name the job's one model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.testing.fixtures import check_config_file

# A TRL config file: GRPOConfig fields at the top level, beside keys aworld-train also has
# (learning_rate, max_steps, seed); each test adds ModelConfig's model_name_or_path.
TRL_FILE = {
    "beta": 0.04,
    "per_device_train_batch_size": 4,
    "num_generations": 2,
    "max_completion_length": 6,
    "loss_type": "dr_grpo",
    "max_steps": 3,
    "learning_rate": 2.0e-5,
    "seed": 7,
}


def test_section_keys_are_every_trainer_field_and_the_model_key() -> None:
    """The layout claims the fields of each trainer config the engine maps (GRPO's and SFT's
    own ones too), TRL's model key, and what ``trl sft --config`` also reads: ScriptArguments,
    ModelConfig and the launcher's keys; nothing else."""
    from aworld_train_trl.config import section_keys
    from trl import GRPOConfig, ModelConfig, ScriptArguments, SFTConfig

    keys = section_keys()
    assert {
        "beta",
        "num_generations",
        "packing",
        "model_name_or_path",
        "dataset_name",
        "lora_r",
        "num_processes",
    } <= keys
    assert "model" not in keys
    fields = {
        f.name
        for cls in (GRPOConfig, SFTConfig, ScriptArguments, ModelConfig)
        for f in cls.__dataclass_fields__.values()
        if f.init
    }
    assert keys == fields | {"model_name_or_path", "num_processes", "accelerate_config"}


def test_a_trl_config_file_as_the_whole_config_passes_check(
    job: dict[str, Any], tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A TRL-style config file given as ``config:`` passes ``check``, and the resolved
    GRPOConfig arguments carry its values and its model."""
    code, err = check_config_file(
        job, capsys, "trl", dict(TRL_FILE, model_name_or_path=str(tiny_model))
    )
    assert code == 0, err

    trainer = AgentTrainer(**job, check_only=True)
    args = trainer.hand_off.config.arguments
    assert {key: args[key] for key in TRL_FILE} == TRL_FILE
    assert trainer.hand_off.agent.model == str(tiny_model)
    assert trainer.context.config.model == str(tiny_model)
    assert "model_name_or_path" not in trainer.context.config.engine_section()


def test_model_name_or_path_in_the_trl_section_is_the_jobs_model(
    job: dict[str, Any], tiny_model: Path
) -> None:
    """``trl: {model_name_or_path: ...}`` without a common ``model`` names the model."""
    job["config"].pop("model")
    job["config"]["trl"] = {"beta": 0.0, "model_name_or_path": str(tiny_model)}
    trainer = AgentTrainer(**job, check_only=True)
    assert trainer.hand_off.agent.model == str(tiny_model)


def test_model_name_or_path_agreeing_with_model_passes(
    job: dict[str, Any], tiny_model: Path
) -> None:
    """The same folder named twice (once relative to the job's folder) is one model."""
    relative = Path("..") / tiny_model.relative_to(job["base_dir"].parent)
    job["config"]["trl"] = {"beta": 0.0, "model_name_or_path": str(relative)}
    trainer = AgentTrainer(**job, check_only=True)
    assert trainer.hand_off.agent.model == str(tiny_model)


def test_model_name_or_path_disagreeing_with_model_is_one_line(
    job: dict[str, Any], tiny_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A TRL config file whose ``model_name_or_path`` names another model than the common
    ``model``: ``check`` refuses it in one line naming both."""
    code, err = check_config_file(
        job,
        capsys,
        "trl",
        dict(TRL_FILE, model="Qwen/Qwen2.5-0.5B-Instruct", model_name_or_path=str(tiny_model)),
    )
    assert code == 2, err
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    for named in ("model_name_or_path", str(tiny_model), "Qwen/Qwen2.5-0.5B-Instruct"):
        assert named in err, err
    assert not job["run_path"].exists()


def test_engine_keys_left_null_are_filled_by_the_engine(
    job: dict[str, Any], tiny_model: Path
) -> None:
    """A TRL config file may leave the keys the engine sets null: the engine fills them in."""
    job["config"]["trl"] = {"beta": 0.0, "output_dir": None, "trust_remote_code": None}
    trainer = AgentTrainer(**job, check_only=True)
    args = trainer.hand_off.config.arguments
    assert args["output_dir"] == str(trainer.context.run_dir / "checkpoints")
    assert args["trust_remote_code"] is False
