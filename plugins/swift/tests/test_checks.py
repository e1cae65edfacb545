"""The check hooks: conversion of each module and the errors bad input gets, without training."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.errors import AgentError, ConfigError, DatasetError, RewardError
from aworld_train.reward import RewardFunction, RewardSpec
from aworld_train.testing.bad_jobs import vllm_can_run
from aworld_train_swift.dataset import convert_dataset
from aworld_train_swift.reward import reward_to_swift, score_batch


def _check(job: dict[str, Any], **config: Any) -> AgentTrainer:
    job["config"] = dict(job["config"], **config)
    return AgentTrainer(**job, check_only=True)


def _rows(chat: bool = True) -> Any:
    import datasets

    second: Any = "Repeat: 8"
    if chat:
        second = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Repeat: 8"},
        ]
    first: Any = [{"role": "user", "content": "Repeat: 3"}] if chat else "Repeat: 3"
    return datasets.Dataset.from_list(
        [
            {
                "prompt": first,
                "ground_truth": "3",
                "data_source": "digits",
                "extra_info": {"index": 0, "digit": "3"},
                "difficulty": 1,
            },
            {
                "prompt": second,
                "ground_truth": "8",
                "data_source": "digits",
                "extra_info": {"index": 1, "digit": "8"},
                "difficulty": 2,
            },
        ]
    )


def test_grpo_rows_keep_the_prompt_and_the_columns_rewards_need(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    assert convert_dataset(_rows(), path, "grpo", "train_dataset") == 2
    first, second = [json.loads(line) for line in path.read_text().splitlines()]
    assert first["messages"] == [{"role": "user", "content": "Repeat: 3"}]
    assert second["messages"][0] == {"role": "system", "content": "Be brief."}
    assert (first["solution"], first["ground_truth"], first["data_source"]) == ("3", "3", "digits")
    assert json.loads(second["extra_info"]) == {"index": 1, "digit": "8"}
    assert second["difficulty"] == 2


def test_sft_rows_end_with_the_ground_truth_as_the_reply(tmp_path: Path) -> None:
    path = tmp_path / "train.jsonl"
    convert_dataset(_rows(chat=False), path, "sft", "train_dataset")
    second = json.loads(path.read_text().splitlines()[1])
    assert second["messages"] == [
        {"role": "user", "content": "Repeat: 8"},
        {"role": "assistant", "content": "8"},
    ]


def test_a_column_swift_reads_itself_is_refused(tmp_path: Path) -> None:
    rows = _rows().add_column("images", [None, None])
    with pytest.raises(DatasetError, match="train_dataset: column 'images'.*columns: mapping"):
        convert_dataset(rows, tmp_path / "train.jsonl", "grpo", "train_dataset")


def test_dpo_rows_need_a_rejected_reply(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="train_dataset row 0: DPO needs a 'rejected' column"):
        convert_dataset(_rows(), tmp_path / "train.jsonl", "dpo", "train_dataset")


def test_the_orm_batch_scores_each_completion_against_its_own_row() -> None:
    seen: list[tuple[str, str, dict]] = []

    def reward(
        data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None
    ) -> float:
        seen.append((solution_str, ground_truth, extra_info))
        return float(solution_str == ground_truth)

    spec = RewardSpec([RewardFunction("reward", reward)])
    columns = {
        "solution": ["3", "3", "8", "8"],
        "ground_truth": ["3", "3", "8", "8"],
        "data_source": ["digits"] * 4,
        "extra_info": ['{"index": 0}', '{"index": 0}', '{"index": 1}', '{"index": 1}'],
        "trainer_state": None,
    }
    assert score_batch(spec, ["3", "x", "8", "8 "], columns) == [1.0, 0.0, 1.0, 0.0]
    assert seen[2] == ("8", "8", {"index": 1})


def test_a_reward_failing_in_the_orm_names_the_dataset_row() -> None:
    def broken(
        data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None
    ) -> float:
        raise ZeroDivisionError("planted")

    spec = RewardSpec([RewardFunction("broken", broken)])
    with pytest.raises(RewardError, match="row 13.*planted"):
        score_batch(spec, ["7"], {"ground_truth": ["7"], "extra_info": ['{"index": 13}']})


def test_check_maps_the_job_onto_swift_arguments(job: dict[str, Any]) -> None:
    job["agent"] = dict(job["agent"], llm_temperature=0.7, llm_top_p=0.9)
    trainer = _check(job)
    agent, config = trainer.hand_off.agent, trainer.hand_off.config
    assert (agent.model_type, agent.template) == ("qwen2", "qwen")
    args = config.arguments
    assert args["model"] == str(Path(job["config"]["model"]).resolve())
    assert args["check_model"] is False
    assert args["tuner_type"] == "full"
    assert (args["max_steps"], args["per_device_train_batch_size"], args["num_generations"]) == (
        4,
        4,
        2,
    )
    assert (args["learning_rate"], args["max_completion_length"]) == (1e-3, 4)
    assert (args["temperature"], args["top_p"]) == (0.7, 0.9)
    assert args["system"] == "Answer with the digit."
    assert args["beta"] == 0.0
    assert args["reward_funcs"] == ["aworld_score"]
    run_dir = trainer.context.run_dir
    assert Path(args["output_dir"]).is_relative_to(run_dir)
    assert Path(config.cache_dir).is_relative_to(run_dir)
    assert args["dataset"] == [str(run_dir / "data" / "train.jsonl")]
    assert not config.distributed


def test_weighted_rewards_become_one_swift_reward_each(job: dict[str, Any]) -> None:
    from swift.rewards import orms

    job["reward_func"] = [
        {"name": "rewards.py:score", "weight": 1.0},
        {"name": "rewards.py:length", "weight": 0.5},
    ]
    args = _check(job).hand_off.config.arguments
    assert args["reward_funcs"] == ["aworld_score", "aworld_length"]
    assert args["reward_weights"] == [1.0, 0.5]
    assert orms["aworld_length"]()(["12"], ground_truth=["1"]) == [0.5]


def test_the_engine_check_registers_rewards_without_calling_them() -> None:
    calls: list[str] = []

    def reward(
        data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None
    ) -> float:
        calls.append(solution_str)
        return 1.0

    spec = RewardSpec([RewardFunction("rewards.py:reward", reward)])
    swift_reward = reward_to_swift(spec, "grpo")
    assert swift_reward is not None and swift_reward.names == ["aworld_reward"]
    assert calls == []


def test_grpo_without_a_reward_is_one_line() -> None:
    with pytest.raises(RewardError, match="no reward: GRPO scores each completion"):
        reward_to_swift(None, "grpo")
    assert reward_to_swift(None, "sft") is None


def test_a_misspelt_swift_key_fails_with_a_suggestion(job: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"'swift\.tuner_typ'.*did you mean 'tuner_type'"):
        _check(job, swift={"template": "qwen", "tuner_typ": "lora"})


def test_a_swift_value_of_the_wrong_type_fails(job: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=r"'swift\.lora_rank': expected an integer, got 'eight'"):
        _check(job, swift={"template": "qwen", "tuner_type": "lora", "lora_rank": "eight"})


def test_a_number_yaml_read_as_text_is_taken_as_a_number(job: dict[str, Any]) -> None:
    trainer = _check(job, swift={"template": "qwen", "weight_decay": "1e-2"})
    assert trainer.hand_off.config.arguments["weight_decay"] == 0.01


def test_swift_keys_the_job_sets_are_refused(job: dict[str, Any]) -> None:
    with pytest.raises(
        ConfigError,
        match=(
            r"^config key 'swift\.dataset' is \['other\.jsonl'\], "
            r"but aworld-train sets it from the job's train_dataset; "
            r"leave it out or null$"
        ),
    ):
        _check(job, swift={"template": "qwen", "dataset": ["other.jsonl"]})


def test_swift_rejections_of_values_become_config_errors(job: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="ms-swift rejects the config"):
        _check(job, batch_size=3, num_generations=2)


def test_an_ambiguous_template_is_the_one_that_renders_the_models_chat_template(
    job: dict[str, Any],
) -> None:
    # Qwen2 fits several of ms-swift's templates; the tiny model's ChatML is qwen's.
    assert _check(job, swift={}).hand_off.agent.template == "qwen"


def test_an_ambiguous_template_none_renders_asks_for_swift_template(
    job: dict[str, Any], tmp_path: Path
) -> None:
    import shutil

    from transformers import AutoTokenizer

    model = Path(shutil.copytree(job["config"]["model"], tmp_path / "odd-template"))
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"
    tokenizer.save_pretrained(model)
    job["config"]["model"] = str(model)
    with pytest.raises(
        AgentError,
        match=r"several templates .*'qwen'.*none renders the model "
        r"folder's own chat template.*set swift\.template",
    ):
        _check(job, swift={})


def test_vllm_without_vllm_or_a_gpu_is_one_line(job: dict[str, Any]) -> None:
    if vllm_can_run():
        pytest.skip("vLLM and a GPU are both here: use_vllm is a valid job on this machine")
    with pytest.raises(ConfigError, match="swift.use_vllm") as error:
        _check(job, swift={"template": "qwen", "use_vllm": True})
    assert "\n" not in str(error.value)


def test_an_algorithm_swift_does_not_train_here_is_refused(job: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="trains \\['sft', 'grpo', 'dpo'\\], not 'ppo'"):
        _check(job, algorithm="ppo")


def test_more_than_one_process_per_node_launches_through_torchrun(job: dict[str, Any]) -> None:
    config = _check(job, resources={"gpus_per_node": 2, "nnodes": 1}).hand_off.config
    assert (config.nproc_per_node, config.nnodes, config.distributed) == (2, 1, True)


def test_torchrun_runs_one_node_standalone_and_several_at_the_main_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aworld_train_swift.config import SwiftConfig
    from aworld_train_swift.launch import torchrun_args

    def config(nnodes: int) -> SwiftConfig:
        return SwiftConfig(
            algorithm="sft",
            arguments={},
            run_dir="run",
            cache_dir="cache",
            log_file="log",
            nproc_per_node=2,
            nnodes=nnodes,
        )

    assert torchrun_args(config(1)) == ["--nproc_per_node", "2", "--nnodes", "1", "--standalone"]
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("NODE_RANK", "1")
    args = torchrun_args(config(2))
    assert "--standalone" not in args
    assert dict(zip(args[4::2], args[5::2])) == {
        "--node_rank": "1",
        "--master_addr": "10.0.0.1",
        "--master_port": "29500",
        "--rdzv_conf": "timeout=300",
    }
