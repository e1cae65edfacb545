"""Bad jobs on the verl engine: the shared cases, then mistakes in what only VeRL reads.

Each case starts from a valid job in its own folder, changes one thing and runs
``aworld-train check --engine verl`` in this process: exit 2, exactly one line on stderr, starting
with ``error:`` and naming the key, row or file; no run directory; no code from the model folder
run. Values VeRL's own dataclasses accept (``top_p: 1.0``, a float temperature) pass.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from aworld_train.testing.bad_jobs import (
    BadJob,
    BadJobSuite,
    JobFolder,
    override,
    set_config,
    without,
)


def _verl(section: dict[str, Any]) -> Any:
    """Set dotted keys of the ``verl:`` section."""

    def edit(job: JobFolder) -> None:
        job.config["verl"] = {**job.config.get("verl", {}), **section}

    return edit


def _model_only_in_the_section(job: JobFolder) -> None:
    """The model named only at VeRL's own key, as a VeRL config names it."""
    job.config["verl"] = {
        **job.config.get("verl", {}),
        "actor_rollout_ref.model.path": job.config.pop("model"),
    }


def _long_prompt(row: int, words: int = 60) -> Any:
    """Row ``row`` gets a prompt longer than the job's max_prompt_length (64), far within the
    model's 1024 positions."""

    def edit(job: JobFolder) -> None:
        rows = [json.loads(line) for line in (job.root / "train.jsonl").read_text().splitlines()]
        rows[row]["prompt"] = [
            {"role": "user", "content": "Repeat: " + " ".join(["seven"] * words)}
        ]
        job.rows(rows)

    return edit


def _copied_model(job: JobFolder) -> Path:
    """A copy of the valid job's tiny model in the job's folder, for a case to damage."""
    folder = job.root / "model"
    shutil.copytree(job.config["model"], folder)
    job.config["model"] = str(folder)
    return folder


def _model_without_weights(job: JobFolder) -> None:
    for weights in _copied_model(job).glob("*.safetensors"):
        weights.unlink()


def _model_with_auto_map(job: JobFolder) -> None:
    """The tokenizer names code of the folder that would leave EXECUTED behind if it ran."""
    folder = _copied_model(job)
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    settings["auto_map"] = {"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]}
    (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    (folder / "tokenization_evil.py").write_text(
        f"from pathlib import Path\nPath({str(folder / 'EXECUTED')!r}).write_text('ran')\n"
        "from transformers import PreTrainedTokenizerFast as EvilTokenizer\n"
    )


VERL_CASES: tuple[BadJob, ...] = (
    # Keys the engine wires from the job, given something else.
    BadJob(
        "train_files_contradict_the_wiring",
        _verl({"data.train_files": "gaia/train.parquet"}),
        r"'verl\.data\.train_files': 'gaia/train\.parquet' contradicts '.+/data/train\.parquet', which the "
        r"engine wires there; leave it null: the engine writes the job's train_dataset there",
    ),
    BadJob(
        "legacy_reward_contradicts_the_wiring",
        _verl({"custom_reward_function.name": "gaia_reward_func"}),
        r"'verl\.custom_reward_function\.name': 'gaia_reward_func' contradicts '\w+', which the engine "
        r"wires at 'reward\.custom_reward_function\.name'; leave it null",
    ),
    BadJob(
        "checkpoints_elsewhere",
        _verl({"trainer.default_local_dir": "/tmp/ckpt"}),
        r"'verl\.trainer\.default_local_dir': '/tmp/ckpt' contradicts '.+/checkpoints'",
    ),
    BadJob(
        "model_key_names_another_model",
        _verl({"actor_rollout_ref.model.path": "Qwen/Qwen3-32B"}),
        r"config key 'verl\.actor_rollout_ref\.model\.path' names Qwen/Qwen3-32B: name the model once",
    ),
    # Values of a type VeRL's dataclass (or default) does not declare.
    BadJob(
        "total_epochs_text",
        _verl({"trainer.total_epochs": "many"}),
        r"'verl\.trainer\.total_epochs': expected an integer \(the type of VeRL's default 30\), got 'many'$",
    ),
    BadJob(
        "top_p_text",
        _verl({"actor_rollout_ref.rollout.top_p": "high"}),
        r"'verl\.actor_rollout_ref\.rollout\.top_p': expected a number \(as VeRL's RolloutConfig\.top_p "
        r"declares\), got 'high'",
    ),
    BadJob(
        "rollout_n_bool",
        _verl({"actor_rollout_ref.rollout.n": True}),
        r"'verl\.actor_rollout_ref\.rollout\.n': expected an integer .*, got true$",
    ),
    BadJob(
        "use_kl_loss_text",
        _verl({"actor_rollout_ref.actor.use_kl_loss": "yes"}),
        r"'verl\.actor_rollout_ref\.actor\.use_kl_loss': expected true or false",
    ),
    BadJob(
        "logger_not_list", _verl({"trainer.logger": 5}), r"'verl\.trainer\.logger': expected a list"
    ),
    BadJob(
        "max_model_len_float",
        _verl({"actor_rollout_ref.rollout.max_model_len": 512.5}),
        r"'verl\.actor_rollout_ref\.rollout\.max_model_len': expected an integer or null",
    ),
    BadJob(
        "section_given_a_value", _verl({"trainer": 5}), r"'verl\.trainer'.*section of VeRL's config"
    ),
    # Names VeRL looks up in its registries, or checks in a dataclass's __post_init__.
    BadJob(
        "adv_estimator_misspelled",
        _verl({"algorithm.adv_estimator": "grpoo"}),
        r"'verl\.algorithm\.adv_estimator': 'grpoo' is not one of VeRL's advantage estimators "
        r"\(did you mean 'grpo'\?\)",
    ),
    BadJob(
        "rollout_name_misspelled",
        _verl({"actor_rollout_ref.rollout.name": "vllmm"}),
        r"'verl\.actor_rollout_ref\.rollout\.name'.*rollout backends \(did you mean 'vllm'\?\)",
    ),
    BadJob(
        "policy_loss_unknown",
        _verl({"actor_rollout_ref.actor.policy_loss.loss_mode": "ppo2"}),
        r"'verl\.actor_rollout_ref\.actor\.policy_loss\.loss_mode'.*policy losses",
    ),
    BadJob(
        "reward_manager_unknown",
        _verl({"reward.reward_manager.name": "fancy"}),
        r"'verl\.reward\.reward_manager\.name'.*reward managers",
    ),
    BadJob(
        "loss_agg_mode_unknown",
        _verl({"actor_rollout_ref.actor.loss_agg_mode": "token-avg"}),
        r"'verl\.actor_rollout_ref\.actor\.loss_agg_mode'.*Invalid loss_agg_mode: token-avg",
    ),
    BadJob(
        "rollout_mode_sync",
        _verl({"actor_rollout_ref.rollout.mode": "sync"}),
        r"'verl\.actor_rollout_ref\.rollout\.mode'.*'sync' has been removed",
    ),
    # Numbers that are not finite, or out of the range VeRL needs.
    BadJob(
        "lr_nan",
        _verl({"actor_rollout_ref.actor.optim.lr": float("nan")}),
        r"'verl\.actor_rollout_ref\.actor\.optim\.lr': \.nan is not a finite number$",
    ),
    BadJob(
        "clip_ratio_inf",
        _verl({"actor_rollout_ref.actor.clip_ratio": float("inf")}),
        r"'verl\.actor_rollout_ref\.actor\.clip_ratio': \.inf is not a finite number$",
    ),
    BadJob(
        "temperature_nan_override",
        override("verl.actor_rollout_ref.rollout.temperature=.nan"),
        r"verl\.actor_rollout_ref\.rollout\.temperature",
    ),
    BadJob(
        "train_batch_size_negative",
        _verl({"data.train_batch_size": -4}),
        r"'verl\.data\.train_batch_size': must be at least 1, not -4",
    ),
    BadJob(
        "micro_batch_size_zero",
        _verl({"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 0}),
        r"'verl\.actor_rollout_ref\.actor\.ppo_micro_batch_size_per_gpu': must be at least 1",
    ),
    BadJob(
        "rollout_n_zero",
        _verl({"actor_rollout_ref.rollout.n": 0}),
        r"'verl\.actor_rollout_ref\.rollout\.n': must be at least 1",
    ),
    BadJob(
        "top_p_above_one",
        _verl({"actor_rollout_ref.rollout.top_p": 1.5}),
        r"'verl\.actor_rollout_ref\.rollout\.top_p': must be above 0 and at most 1",
    ),
    BadJob(
        "gpu_memory_zero",
        _verl({"actor_rollout_ref.rollout.gpu_memory_utilization": 0}),
        r"'verl\.actor_rollout_ref\.rollout\.gpu_memory_utilization': must be above 0",
    ),
    BadJob(
        "temperature_negative",
        _verl({"actor_rollout_ref.rollout.temperature": -0.5}),
        r"'verl\.actor_rollout_ref\.rollout\.temperature': must be at least 0",
    ),
    # Keys VeRL's config does not have.
    BadJob(
        "nested_key_misspelled",
        _verl({"trainer": {"total_epoch": 2}}),
        r"'verl\.trainer\.total_epoch'.*did you mean 'trainer\.total_epochs'",
    ),
    BadJob(
        "deep_key_misspelled",
        _verl({"actor_rollout_ref.rollout.val_kwargs.temprature": 0.5}),
        r"'verl\.actor_rollout_ref\.rollout\.val_kwargs\.temprature'.*did you mean",
    ),
    BadJob(
        "top_level_key_unknown",
        _verl({"no_such_setting": 1}),
        r"'no_such_setting' is not a key of VeRL",
    ),
    # Settings VeRL's validate_config finds inconsistent.
    BadJob(
        "mini_batch_above_train_batch",
        _verl({"actor_rollout_ref.actor.ppo_mini_batch_size": 8}),
        r"'verl\.actor_rollout_ref\.actor\.ppo_mini_batch_size'.*validate_config",
    ),
    # Lengths: VeRL drops a prompt past data.max_prompt_length without a word.
    BadJob(
        "prompt_longer_than_max_prompt_length",
        _long_prompt(5),
        r"^error: train_dataset row 5: the prompt \(with the chat template and system prompt\) is \d+ "
        r"tokens, past data\.max_prompt_length=64",
    ),
    BadJob(
        "verl_max_prompt_length_too_small",
        _verl({"data.max_prompt_length": 8}),
        r"train_dataset row 0:.*past data\.max_prompt_length=8",
    ),
    BadJob(
        "max_model_len_past_positions",
        _verl({"actor_rollout_ref.rollout.max_model_len": 100000}),
        r"'verl\.actor_rollout_ref\.rollout\.max_model_len': 100000 is past the model's 1024 positions",
    ),
    BadJob(
        "response_length_past_positions",
        _verl({"data.max_response_length": 2000}),
        r"'verl\.data\.max_response_length' \(2000 tokens\): max_completion_length 2000 leaves no "
        r"room for a prompt within the model's 1024 positions",
    ),
    # The model: no weights, code of its own, a hub id VeRL's check cannot read offline.
    BadJob("model_folder_without_weights", _model_without_weights, r"weights"),
    BadJob("model_tokenizer_auto_map", _model_with_auto_map, r"trust_remote_code"),
    BadJob(
        "remote_code_through_the_section",
        _verl({"actor_rollout_ref.model.trust_remote_code": True}),
        r"'verl\.actor_rollout_ref\.model\.trust_remote_code'.*'trust_remote_code: true'",
    ),
    BadJob("model_hub_id", set_config(model="Qwen/Qwen2.5-0.5B-Instruct"), r"not a local folder"),
    # What VeRL needs of the job as a whole.
    BadJob("no_train_dataset", without("train_dataset"), r"train_dataset"),
    BadJob("no_reward", without("reward"), r"reward"),
    BadJob(
        "algorithm_sft", set_config(algorithm="sft"), r"'algorithm'.*verl engine trains with RL"
    ),
    BadJob(
        "algorithm_not_an_estimator",
        set_config(algorithm="rlooo"),
        r"config key 'algorithm': 'rlooo' is not one of VeRL's advantage estimators \(did you mean 'rloo'\?\)",
    ),
    BadJob(
        "batch_size_not_whole_groups",
        set_config(batch_size=6, num_generations=4),
        r"'batch_size': 6 completions per step do not divide into groups of num_generations=4",
    ),
)

# Values VeRL's own code accepts; each job passes check.
ACCEPTED: tuple[tuple[str, Any], ...] = (
    ("top_p_float", _verl({"actor_rollout_ref.rollout.top_p": 1.0})),
    ("val_temperature_float", _verl({"actor_rollout_ref.rollout.val_kwargs.temperature": 1.0})),
    ("lr_int_where_float", _verl({"actor_rollout_ref.actor.optim.lr": 1})),
    ("max_model_len_int", _verl({"actor_rollout_ref.rollout.max_model_len": 1024})),
    ("estimator_in_the_section", _verl({"algorithm.adv_estimator": "rloo"})),
    ("estimator_as_the_algorithm", set_config(algorithm="rloo")),
    (
        "framework_filled_keys_null",
        _verl(
            {
                "data": {"train_files": None, "val_files": None},
                "trainer.default_local_dir": None,
                "actor_rollout_ref.rollout.agent.agent_loop_config_path": None,
                "actor_rollout_ref.model.path": None,
                "custom_reward_function": {"path": None, "name": None},
                "reward.custom_reward_function.path": None,
            }
        ),
    ),
    ("model_only_at_verls_key", _model_only_in_the_section),
    (
        "any_typed_key_given_a_list",
        _verl({"actor_rollout_ref.model.target_modules": ["q_proj", "v_proj"]}),
    ),
    (
        "nested_mapping_and_new_key",
        _verl({"trainer": {"total_epochs": 2}, "+ray_kwargs.ray_init.include_dashboard": False}),
    ),
)


class TestVerlBadJobs(BadJobSuite):
    engine_name = "verl"
    engine_cases = VERL_CASES

    @pytest.mark.parametrize(
        "edit", [edit for _, edit in ACCEPTED], ids=[name for name, _ in ACCEPTED]
    )
    def test_values_verl_accepts_pass_check(
        self, edit: Any, job_folder: JobFolder, capsys: pytest.CaptureFixture[str]
    ) -> None:
        edit(job_folder)
        code, err = self.run_check(job_folder, capsys)
        assert (code, err) == (0, "")
