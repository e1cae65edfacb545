"""Check-time failures and the conversions of each check hook, without training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.errors import AgentError, ConfigError, DatasetError, RewardError
from aworld_train.testing.bad_jobs import vllm_can_run


def _with_config(job: dict[str, Any], **changes: Any) -> dict[str, Any]:
    job["config"] = dict(job["config"], **changes)
    return job


def test_valid_job_passes_every_check(job: dict[str, Any]) -> None:
    import torch

    trainer = AgentTrainer(**job, check_only=True)
    assert {c.module for c in trainer.checks if c.by == "trl"} == {
        "agent",
        "dataset",
        "reward",
        "config",
        "settings",
    }
    assert trainer.settings == trainer.hand_off.config.settings
    config = trainer.hand_off.config
    assert config.use_gpu is torch.cuda.is_available()
    if config.use_gpu:
        assert "use_cpu" not in config.arguments
    else:
        assert config.arguments["use_cpu"] is True
    assert config.arguments["report_to"] == "none"
    assert config.arguments["trust_remote_code"] is False
    assert config.arguments["output_dir"].startswith(str(trainer.context.run_dir))


def test_misspelled_trl_key_is_rejected_with_a_suggestion(job: dict[str, Any]) -> None:
    _with_config(job, trl={"num_generation": 4})
    with pytest.raises(ConfigError, match=r"trl\.num_generation.*did you mean 'num_generations'"):
        AgentTrainer(**job, check_only=True)


def test_bad_trl_choice_lists_the_choices(job: dict[str, Any]) -> None:
    _with_config(job, trl={"loss_type": "dapoo"})
    with pytest.raises(
        ConfigError,
        match=(
            r"^config trl\.loss_type: 'dapoo' is not one of grpo, dr_grpo, dapo, .*vespo "
            r"\(did you mean 'dapo'\?\)$"
        ),
    ):
        AgentTrainer(**job, check_only=True)


def test_bad_trl_value_type_names_what_the_field_takes(job: dict[str, Any]) -> None:
    _with_config(job, trl={"beta": "hello"})
    with pytest.raises(ConfigError, match=r"^config trl\.beta: expected a number, got 'hello'$"):
        AgentTrainer(**job, check_only=True)


def test_combination_trl_rejects_reports_trls_message(job: dict[str, Any]) -> None:
    _with_config(job, trl={"log_completions_hub_repo": "me/completions"})
    with pytest.raises(ConfigError, match=r"GRPOConfig rejects it: .*log_completions"):
        AgentTrainer(**job, check_only=True)


def test_trl_values_that_trl_accepts_pass(job: dict[str, Any]) -> None:
    accepted = {
        "loss_type": "grpo",
        "scale_rewards": False,
        "lr_scheduler_type": "cosine",
        "optim": "adamw_torch",
        "lr_scheduler_kwargs": {"num_cycles": 0.5},
        "beta": 0,
        "debug": ["underflow_overflow"],
        "max_completion_length": 6,
        "save_strategy": "steps",
        "hub_model_id": None,
        "include_num_input_tokens_seen": True,
    }
    _with_config(job, trl=accepted)
    args = AgentTrainer(**job, check_only=True).hand_off.config.arguments
    assert {key: args[key] for key in accepted} == accepted


def test_output_dir_belongs_to_the_run(job: dict[str, Any]) -> None:
    _with_config(job, trl={"output_dir": "/tmp/elsewhere"})
    with pytest.raises(ConfigError, match=r"trl\.output_dir"):
        AgentTrainer(**job, check_only=True)


def test_batch_not_divisible_by_num_generations(job: dict[str, Any]) -> None:
    _with_config(job, batch_size=3, num_generations=2)
    with pytest.raises(ConfigError, match="divisible by num_generations 2"):
        AgentTrainer(**job, check_only=True)


def test_batch_checked_for_the_number_of_processes(job: dict[str, Any]) -> None:
    _with_config(job, batch_size=3, num_generations=6, resources={"gpus_per_node": 1})
    with pytest.raises(ConfigError, match="divisible by num_generations 6"):
        AgentTrainer(**job, check_only=True)
    _with_config(job, resources={"gpus_per_node": 2})
    AgentTrainer(**job, check_only=True)


def test_single_generation_is_rejected(job: dict[str, Any]) -> None:
    _with_config(job, num_generations=1)
    with pytest.raises(ConfigError, match="at least 2"):
        AgentTrainer(**job, check_only=True)


def test_unknown_algorithm(job: dict[str, Any]) -> None:
    _with_config(job, algorithm="sfft")
    with pytest.raises(ConfigError, match="did you mean 'sft'"):
        AgentTrainer(**job, check_only=True)


def test_vllm_without_vllm_or_gpu(job: dict[str, Any]) -> None:
    if vllm_can_run():
        pytest.skip("vLLM and a GPU are both here: use_vllm is a valid job on this machine")
    _with_config(job, trl={"use_vllm": True})
    with pytest.raises(ConfigError, match=r"trl\.use_vllm: vLLM"):
        AgentTrainer(**job, check_only=True)


def test_agent_with_tools_is_not_silently_dropped(job: dict[str, Any]) -> None:
    job["agent"] = {"name": "searcher", "tools": ["os.path:join"]}
    with pytest.raises(AgentError, match="searcher.*tools"):
        AgentTrainer(**job, check_only=True)


def test_missing_model_folder(job: dict[str, Any], tmp_path: Path) -> None:
    _with_config(job, model=str(tmp_path / "no-such-model"))
    with pytest.raises(AgentError, match="no-such-model"):
        AgentTrainer(**job, check_only=True)


def test_hub_id_is_checked_for_form_only(job: dict[str, Any]) -> None:
    _with_config(job, model="Qwen/Qwen2.5-0.5B-Instruct")
    trainer = AgentTrainer(**job, check_only=True)
    assert trainer.hand_off.agent.model == "Qwen/Qwen2.5-0.5B-Instruct"


def test_sampling_settings_become_generation_settings(job: dict[str, Any]) -> None:
    job["agent"] = dict(job["agent"], llm_temperature=0.7, llm_top_p=0.9, llm_max_tokens=5)
    job["config"].pop("max_completion_length")
    args = AgentTrainer(**job, check_only=True).hand_off.config.arguments
    assert (args["temperature"], args["top_p"], args["max_completion_length"]) == (0.7, 0.9, 5)


def test_hub_token_is_kept_out_of_trls_arguments(job: dict[str, Any]) -> None:
    _with_config(job, trl={"beta": 0.0, "hub_token": "hf_planted_secret"})
    config = AgentTrainer(**job, check_only=True).hand_off.config
    assert "hub_token" not in config.arguments
    assert config.secret_env == {"HF_TOKEN": "hf_planted_secret"}
    assert "hf_planted_secret" not in repr(config)


def test_remote_code_is_allowed_only_by_the_jobs_own_key(job: dict[str, Any]) -> None:
    _with_config(job, trust_remote_code=True)
    trainer = AgentTrainer(**job, check_only=True)
    assert trainer.hand_off.config.arguments["trust_remote_code"] is True
    assert trainer.hand_off.agent.trust_remote_code is True
    _with_config(job, trust_remote_code=False, trl={"trust_remote_code": True})
    with pytest.raises(ConfigError, match=r"trl\.trust_remote_code.*top-level"):
        AgentTrainer(**job, check_only=True)


def test_check_contacts_no_network(job: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"check opened a connection: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    _with_config(
        job,
        trl={
            "beta": 0.0,
            "hub_token": "hf_planted",
            "push_to_hub": True,
            "hub_model_id": "me/tiny",
        },
    )
    AgentTrainer(**job, check_only=True)
    _with_config(job, model="Qwen/Qwen2.5-0.5B-Instruct")
    AgentTrainer(**job, check_only=True)


def test_check_scores_each_row_once(job: dict[str, Any], tmp_path: Path) -> None:
    """The core scores every training row once; the engine's checks do not call it again."""
    AgentTrainer(**job, check_only=True)
    calls = (tmp_path / "calls.jsonl").read_text().splitlines()
    rows = (tmp_path / "train.jsonl").read_text().splitlines()
    assert len(calls) == len(rows)


def test_reward_failure_names_the_row(job: dict[str, Any], tmp_path: Path) -> None:
    (tmp_path / "rewards.py").write_text(
        "def score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    raise KeyError('answer')\n"
    )
    with pytest.raises(RewardError, match="row 0"):
        AgentTrainer(**job, check_only=True)


# The conversions, on the engine's own types.


def _agent(**fields: Any) -> Any:
    from aworld_train_trl.agent import TrlAgent

    return TrlAgent(model="tiny", **fields)


def _canonical() -> Any:
    import datasets

    return datasets.Dataset.from_list(
        [
            {
                "prompt": "Repeat: 4",
                "ground_truth": "4",
                "data_source": "d",
                "extra_info": {"index": 0},
            },
            {
                "prompt": [{"role": "user", "content": "Repeat: 2"}],
                "ground_truth": "2",
                "data_source": "d",
                "extra_info": {"index": 1},
            },
        ][:1]
    )


def test_grpo_prompts_become_conversations_with_the_system_prompt() -> None:
    from aworld_train_trl.dataset import datasets_to_trl

    converted = datasets_to_trl(_canonical(), None, _agent(system_prompt="Be brief."), "grpo")
    row = converted.train[0]
    assert row["prompt"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Repeat: 4"},
    ]
    assert (row["ground_truth"], row["data_source"], row["extra_info"]) == ("4", "d", {"index": 0})


def test_plain_prompts_without_a_chat_template() -> None:
    from aworld_train_trl.dataset import datasets_to_trl

    agent = _agent(system_prompt="Be brief.", conversational=False)
    converted = datasets_to_trl(_canonical(), None, agent, "grpo")
    assert converted.train[0]["prompt"] == "Be brief.\n\nRepeat: 4"


def test_chat_prompt_without_a_chat_template_names_the_row() -> None:
    import datasets
    from aworld_train_trl.dataset import datasets_to_trl

    rows = datasets.Dataset.from_list(
        [{"prompt": [{"role": "user", "content": "Repeat: 2"}], "ground_truth": "2"}]
    )
    with pytest.raises(DatasetError, match="train_dataset row 0"):
        datasets_to_trl(rows, None, _agent(conversational=False), "grpo")


def test_conversion_draws_no_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    from aworld_train_trl.dataset import datasets_to_trl
    from datasets.utils import are_progress_bars_disabled, enable_progress_bars

    enable_progress_bars()  # the user's setting, whatever an earlier test left
    datasets_to_trl(_canonical(), _canonical(), _agent(), "grpo")
    assert capsys.readouterr().err == ""
    assert not are_progress_bars_disabled()  # the user's own setting is left as it was


def test_no_train_dataset_is_one_error() -> None:
    from aworld_train_trl.dataset import datasets_to_trl

    with pytest.raises(DatasetError, match="^no train_dataset: "):
        datasets_to_trl(None, None, _agent(), "grpo")


def test_sft_rows_become_prompt_and_completion() -> None:
    from aworld_train_trl.dataset import datasets_to_trl

    converted = datasets_to_trl(_canonical(), None, _agent(), "sft")
    assert converted.train.column_names == ["prompt", "completion"]
    assert converted.train[0]["completion"] == [{"role": "assistant", "content": "4"}]


def test_reward_wrapper_scores_each_completion_and_logs_extra_metrics() -> None:
    from aworld_train.reward import resolve_reward
    from aworld_train_trl.reward import TrlReward

    def graded(data_source, solution_str, ground_truth, extra_info=None):
        return {"score": float(solution_str == ground_truth), "length": len(solution_str)}

    logged: dict[str, float] = {}
    reward = TrlReward(resolve_reward([{"name": graded, "weight": 2.0}]))
    scores = reward(
        prompts=[[], []],
        completions=[
            [{"role": "assistant", "content": "7"}],
            [{"role": "assistant", "content": "17"}],
        ],
        ground_truth=["7", "7"],
        data_source=["d", "d"],
        extra_info=[{"index": 0}, {"index": 0}],
        log_metric=logged.__setitem__,
        trainer_state=None,
    )
    assert scores == [2.0, 0.0]
    assert logged["length"] == 1.5


def test_reward_wrapper_error_names_the_row() -> None:
    from aworld_train.reward import resolve_reward
    from aworld_train_trl.reward import TrlReward

    def broken(data_source, solution_str, ground_truth, extra_info=None):
        raise ZeroDivisionError("boom")

    reward = TrlReward(resolve_reward(broken))
    with pytest.raises(RewardError, match="row 5.*boom"):
        reward(
            prompts=["p"],
            completions=["x"],
            ground_truth=["1"],
            data_source=["d"],
            extra_info=[{"index": 5}],
        )


def test_resuming_a_run_without_checkpoints_fails_at_check_time(
    job: dict[str, Any], tmp_path: Path
) -> None:
    from aworld_train.errors import RunDirectoryError

    run = tmp_path / "runs" / "old-run"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text('{"status": "interrupted"}')
    with pytest.raises(RunDirectoryError, match="no checkpoint"):
        AgentTrainer(**job, resume=run, check_only=True)


def test_several_weighted_rewards_become_one_trl_reward(job: dict[str, Any]) -> None:
    job["reward_func"] = ["rewards.py:score", {"name": "exact_match", "weight": 0.5}]
    reward = AgentTrainer(**job, check_only=True).hand_off.reward
    assert reward.__name__ == "total"
    logged: dict[str, float] = {}
    scores = reward(
        prompts=[[], []],
        completions=["3", "4"],
        ground_truth=["3", "3"],
        data_source=["d", "d"],
        extra_info=[{"index": 0}, {"index": 0}],
        log_metric=logged.__setitem__,
    )
    assert scores == [1.5, 0.0]
    assert logged == {"rewards/score": 0.5, "rewards/exact_match": 0.5}


def test_trainer_choices_are_the_ones_trls_help_lists() -> None:
    """The choices TRL checks only in its trainer are kept by hand: each must still be named in
    the installed TRL's own help for the field, so an upgrade that renames one fails here."""
    from aworld_train_trl.schema import GRPO_CHOICES, field_metadata
    from trl import GRPOConfig

    for key, choices in GRPO_CHOICES.items():
        help_text = field_metadata(GRPOConfig)[key]["help"]
        missing = [c for c in choices if isinstance(c, str) and c not in help_text]
        assert missing == [], f"{key}: {missing}"


def test_several_nodes_meet_at_the_main_node_through_accelerate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from aworld_train_trl.config import TrlConfig
    from aworld_train_trl.launch import _launcher_args

    monkeypatch.setenv("MASTER_ADDR", "10.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.setenv("NODE_RANK", "1")
    args = _launcher_args(TrlConfig(algorithm="grpo", arguments={}, nproc_per_node=2, nnodes=2))
    flags = dict(zip(args[1::2], args[2::2]))  # after --multi_gpu, flags and values
    assert flags["--num_processes"] == "4" and flags["--num_machines"] == "2"
    assert (flags["--machine_rank"], flags["--main_process_ip"], flags["--main_process_port"]) == (
        "1",
        "10.0.0.1",
        "29500",
    )
