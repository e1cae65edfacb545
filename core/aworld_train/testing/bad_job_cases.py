"""The mistakes any engine must refuse in ``aworld-train check``, as data: each a
:class:`~aworld_train.testing.job_edits.BadJob` (its id, how it breaks the valid job, what the
one error line must match), and the reward file the reward cases name.

:class:`~aworld_train.testing.bad_jobs.BadJobSuite` runs them through the real CLI.
"""

from __future__ import annotations

import json

from aworld_train.testing.job_edits import (
    BadJob,
    JobFolder,
    add_dataset_line,
    edit_model_json,
    new_model_folder,
    override,
    set_agent,
    set_config,
    set_job,
    set_reward,
    set_rows,
    set_text,
)

#: Reward functions (a reward file's text) that score 1 on every row but the one whose ground
#: truth is "5", row 5 of 8 "Repeat: <digit>" rows, where each returns what no reward may: None,
#: NaN, a string. ``check`` scores more rows than row 0, and must name row 5.
LATE_ROW_REWARDS = """
import math


def none_late(data_source, solution_str, ground_truth, extra_info=None):
    return None if ground_truth == "5" else 1.0


def nan_late(data_source, solution_str, ground_truth, extra_info=None):
    return math.nan if ground_truth == "5" else 1.0


def text_late(data_source, solution_str, ground_truth, extra_info=None):
    return "high" if ground_truth == "5" else 1.0
"""

#: The valid job's reward file: ``score`` for the valid job, then one function for each
#: way a reward can fail, named by the cases of :data:`CASES`.
REWARDS = (
    """
import math, os, sys, time


def score(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if ground_truth in solution_str else 0.0


def raises(data_source, solution_str, ground_truth, extra_info=None):
    raise RuntimeError("planted failure")


def text(data_source, solution_str, ground_truth, extra_info=None):
    return "high"


def nan(data_source, solution_str, ground_truth, extra_info=None):
    return math.nan


def no_score(data_source, solution_str, ground_truth, extra_info=None):
    return {"accuracy": 1.0}


def sleeps(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(60)
    return 1.0


def exits(data_source, solution_str, ground_truth, extra_info=None):
    sys.exit(3)


def hard_exit(data_source, solution_str, ground_truth, extra_info=None):
    os._exit(0)


def two_args(solution, truth):
    return 1.0


# Fine on every row but row 5 of 8 (ground truth "5"), as LATE_ROW_REWARDS' functions.
def raises_late(data_source, solution_str, ground_truth, extra_info=None):
    if ground_truth == "5":
        raise RuntimeError("planted failure on a late row")
    return 1.0
"""
    + LATE_ROW_REWARDS
)


def _duplicate_key(job: JobFolder) -> None:
    job.job_text = (
        "engine: {engine}\nreward: rewards.py:score\nreward: exact_match\n"
        "train_dataset: train.jsonl\n"
    )


def _alias_bomb(job: JobFolder) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, 10):
        previous = f"*a{level - 1}"
        lines.append(f"a{level}: &a{level} [{', '.join([previous] * 9)}]")
    job.write("bomb.yaml", "\n".join(lines) + "\n")
    job.job["config"] = "bomb.yaml"


def _deep_config(job: JobFolder) -> None:
    job.write("deep.yaml", "seed: " + "[" * 5000 + "]" * 5000 + "\n")
    job.job["config"] = "deep.yaml"


def _deep_row(job: JobFolder) -> None:
    job.write(
        "train.jsonl",
        '{"prompt": "hi", "ground_truth": "1", "extra_info": {"x": '
        + "[" * 100_000
        + "]" * 100_000
        + "}}\n",
    )


def _reward_loop(job: JobFolder) -> None:
    job.job["reward"] = f"{job.loop('loop.py')}:score"


def _dataset_loop(job: JobFolder) -> None:
    job.job["train_dataset"] = job.loop("loop.jsonl")


def _run_path_file(job: JobFolder) -> None:
    job.write("runs-file", "not a folder\n")
    job.job["run_path"] = "runs-file"


def _import_exit(job: JobFolder) -> None:
    job.write("exiting.py", "import sys\nsys.exit(4)\n")
    job.job["reward"] = "exiting.py:score"


def _import_ends_process(job: JobFolder) -> None:
    job.write("ending.py", "import os\nos._exit(0)\n")
    job.job["reward"] = "ending.py:score"


def _json_duplicate_key(job: JobFolder) -> None:
    job.write("config.json", json.dumps(job.config)[:-1] + ', "max_steps": 9}')
    job.job["config"] = "config.json"


def _syntax_error(job: JobFolder) -> None:
    job.write("broken.py", "def score(:\n")
    job.job["reward"] = "broken.py:score"


def _model_typo(job: JobFolder) -> None:
    (job.root / "build" / "model").mkdir(parents=True)
    job.config["model"] = "build/modle"


def _bare_model_typo(job: JobFolder) -> None:
    (job.root / "tiny-model").mkdir()
    job.config["model"] = "tiny-modle"


def _short_model_typo(job: JobFolder) -> None:
    # A short name one edit (a swap) from a folder: too short for a likeness ratio to catch.
    (job.root / "Qwen").mkdir()
    job.config["model"] = "Qwne"


def _model_is_file(job: JobFolder) -> None:
    job.config["model"] = str(job.write("model.bin", "weights"))


def _two_models(job: JobFolder) -> None:
    job.config["model"] = "org/model-a"
    job.job["agent"] = dict(job.job["agent"], model="org/model-b")


_AUTO_MAP = {
    "model_type": "evil",
    "architectures": ["EvilForCausalLM"],
    "auto_map": {"AutoConfig": "configuration_evil.EvilConfig"},
}
_EVIL_CODE = (
    "from pathlib import Path\n"
    "Path(__file__).with_name('EXECUTED').write_text('code from the model folder ran')\n"
)

#: Mistakes any engine must refuse in ``check``, each with a pattern its error line matches.
CASES: tuple[BadJob, ...] = (
    # Common config values out of range, in the file and through -o.
    BadJob("batch_size_zero", set_config(batch_size=0), "batch_size"),
    BadJob("batch_size_text", set_config(batch_size="many"), "batch_size"),
    BadJob("batch_size_float", set_config(batch_size=2.5), "batch_size"),
    BadJob("learning_rate_negative", set_config(learning_rate=-1), "learning_rate"),
    BadJob("learning_rate_nan", set_config(learning_rate=float("nan")), "learning_rate"),
    BadJob("learning_rate_inf", set_config(learning_rate=float("inf")), "learning_rate"),
    BadJob("learning_rate_nan_override", override("learning_rate=.nan"), "learning_rate"),
    BadJob("learning_rate_text", set_config(learning_rate="fast"), "learning_rate"),
    BadJob("max_steps_negative", set_config(max_steps=-5), "max_steps"),
    BadJob("max_steps_zero_override", override("max_steps=0"), "max_steps"),
    BadJob(
        "max_completion_length_zero", set_config(max_completion_length=0), "max_completion_length"
    ),
    BadJob("max_prompt_length_negative", set_config(max_prompt_length=-8), "max_prompt_length"),
    BadJob("num_generations_zero", set_config(num_generations=0), "num_generations"),
    BadJob("num_epochs_negative", set_config(num_epochs=-1), "num_epochs"),
    BadJob("seed_too_big", set_config(seed=1e20), "seed"),
    BadJob("seed_negative", set_config(seed=-1), "seed"),
    BadJob("save_steps_negative", set_config(save_steps=-3), "save_steps"),
    BadJob("logging_steps_zero", set_config(logging_steps=0), "logging_steps"),
    BadJob("gpus_per_node_negative", set_config(resources__gpus_per_node=-2), "gpus_per_node"),
    BadJob("nnodes_zero", set_config(resources__nnodes=0), "nnodes"),
    BadJob("resources_not_mapping", set_config(resources=5), "resources"),
    BadJob("resources_unknown_key", set_config(resources__gpus=1), "resources.gpus"),
    BadJob("unknown_key_misspelled", set_config(learning_rat=0.1), "learning_rat.*learning_rate"),
    BadJob("algorithm_misspelled", set_config(algorithm="grpoo"), "algorithm|grpoo"),
    BadJob("trust_remote_code_text", set_config(trust_remote_code="yes"), "trust_remote_code"),
    BadJob("reward_timeout_zero", set_config(reward_timeout=0), "reward_timeout"),
    BadJob("override_without_value", override("max_steps"), "max_steps"),
    BadJob("config_not_mapping", set_job(config=7), "config"),
    # The job file itself.
    BadJob("engine_not_text", set_job(engine=7), "engine"),
    BadJob("run_path_list", set_job(run_path=["a", "b"]), "run_path"),
    BadJob("run_path_is_file", _run_path_file, "runs-file"),
    BadJob(
        "run_path_cannot_be_created",
        set_job(run_path="/proc/aworld-runs"),
        "cannot create run path /proc/aworld-runs",
    ),
    BadJob("job_field_misspelled", set_job(trian_dataset="train.jsonl"), "trian_dataset"),
    BadJob(
        "job_duplicate_key", _duplicate_key, "reward.*(twice|duplicate)|(twice|duplicate).*reward"
    ),
    BadJob("job_not_mapping", set_text("- engine\n- {engine}\n"), "job.yaml"),
    BadJob("job_invalid_yaml", set_text("engine: [{engine}\n"), "job.yaml"),
    BadJob("config_alias_bomb", _alias_bomb, "bomb.yaml"),
    BadJob("config_deeply_nested", _deep_config, "deep.yaml"),
    BadJob("config_json_duplicate_key", _json_duplicate_key, "max_steps.*twice"),
    BadJob("columns_not_mapping", set_job(columns=["prompt"]), "columns"),
    BadJob("columns_unknown_canonical", set_job(columns={"promt": "question"}), "promt"),
    BadJob("columns_missing_column", set_job(columns={"prompt": "question"}), "question"),
    # Rewards: wrong, hostile, missing.
    BadJob("reward_raises", set_reward("rewards.py:raises"), "rewards.py:raises.*planted failure"),
    BadJob("reward_returns_text", set_reward("rewards.py:text"), "rewards.py:text"),
    BadJob("reward_returns_nan", set_reward("rewards.py:nan"), "rewards.py:nan"),
    BadJob("reward_dict_without_score", set_reward("rewards.py:no_score"), "rewards.py:no_score"),
    BadJob("reward_hangs", set_reward("rewards.py:sleeps", reward_timeout=1), "rewards.py:sleeps"),
    BadJob(
        "reward_none_on_a_late_row",
        set_reward("rewards.py:none_late"),
        r"rewards.py:none_late' on row 5 returned None; a reward scores every completion",
    ),
    BadJob(
        "reward_nan_on_a_late_row",
        set_reward("rewards.py:nan_late"),
        r"rewards.py:nan_late' on row 5 returned float nan",
    ),
    BadJob(
        "reward_text_on_a_late_row",
        set_reward("rewards.py:text_late"),
        r"rewards.py:text_late' on row 5 returned str 'high'",
    ),
    BadJob(
        "reward_raises_on_a_late_row",
        set_reward("rewards.py:raises_late"),
        r"rewards.py:raises_late' on row 5 raised RuntimeError: planted failure on a late row",
    ),
    BadJob("reward_calls_sys_exit", set_reward("rewards.py:exits"), "rewards.py:exits"),
    BadJob("reward_calls_os_exit", set_reward("rewards.py:hard_exit"), "rewards.py:hard_exit"),
    BadJob("reward_wrong_signature", set_reward("rewards.py:two_args"), "two_args"),
    BadJob("reward_function_missing", set_reward("rewards.py:nope"), "nope"),
    BadJob("reward_file_missing", set_reward("missing.py:score"), "missing.py"),
    BadJob("reward_file_syntax_error", _syntax_error, "broken.py"),
    BadJob("reward_file_exits_on_import", _import_exit, "exiting.py"),
    BadJob("reward_file_ends_the_process_on_import", _import_ends_process, "ending.py"),
    BadJob("reward_file_symlink_loop", _reward_loop, "loop.py"),
    BadJob("reward_builtin_misspelled", set_reward("exact_mach"), "exact_mach.*exact_match"),
    BadJob(
        "reward_weight_nan",
        set_job(reward={"name": "exact_match", "weight": float("nan")}),
        "weight",
    ),
    BadJob(
        "reward_weight_text", set_job(reward={"name": "exact_match", "weight": "heavy"}), "weight"
    ),
    # Datasets.
    BadJob("dataset_missing", set_job(train_dataset="nowhere.jsonl"), "nowhere.jsonl"),
    BadJob("dataset_symlink_loop", _dataset_loop, "loop.jsonl"),
    BadJob("dataset_unsupported_format", set_job(train_dataset="rewards.py"), "rewards.py"),
    BadJob("dataset_empty", set_rows(), "train.jsonl"),
    BadJob(
        "dataset_row_without_truth",
        add_dataset_line('{"prompt": "Repeat: 1"}'),
        "train.jsonl:9.*ground_truth",
    ),
    BadJob("dataset_invalid_json_line", add_dataset_line('{"prompt": '), "train.jsonl:9"),
    BadJob("dataset_row_not_object", add_dataset_line("[1, 2]"), "train.jsonl:9"),
    BadJob(
        "dataset_empty_prompt",
        add_dataset_line('{"prompt": " ", "ground_truth": "1"}'),
        "train.jsonl:9.*prompt",
    ),
    BadJob(
        "dataset_bad_role",
        add_dataset_line('{"prompt": [{"role": "wizard", "content": "hi"}], "ground_truth": "1"}'),
        "train.jsonl:9.*prompt",
    ),
    BadJob(
        "dataset_truth_is_list",
        add_dataset_line('{"prompt": "hi", "ground_truth": [1]}'),
        "train.jsonl:9.*ground_truth",
    ),
    BadJob("dataset_deeply_nested_row", _deep_row, "train.jsonl"),
    BadJob("test_dataset_missing", set_job(test_dataset="absent.jsonl"), "absent.jsonl"),
    # The agent.
    BadJob("agent_top_p_out_of_range", set_agent(llm_top_p=7.5), "llm_top_p"),
    BadJob("agent_temperature_negative", set_agent(llm_temperature=-1), "llm_temperature"),
    BadJob("agent_max_turns_zero", set_agent(max_turns=0), "max_turns"),
    BadJob("agent_key_misspelled", set_agent(system_promt="hi"), "system_promt"),
    BadJob("agent_file_missing", set_job(agent="absent-agent.yaml"), "absent-agent.yaml"),
    # Model folders: checked without running their code.
    BadJob("model_folder_typo", _model_typo, "build/modle"),
    BadJob(
        "model_bare_name_typo",
        _bare_model_typo,
        r"model folder tiny-modle not found .*\(did you mean tiny-model\?\)",
    ),
    BadJob(
        "model_short_name_one_edit",
        _short_model_typo,
        r"model folder Qwne not found .*\(did you mean Qwen\?\)",
    ),
    BadJob("model_is_a_file", _model_is_file, "model.bin"),
    BadJob("model_config_broken", new_model_folder(config="{not json"), "config.json"),
    BadJob("model_config_missing", new_model_folder(config=None), "config.json"),
    BadJob(
        "model_without_weights",
        new_model_folder(config={"model_type": "qwen2"}, weights=False),
        "weights",
    ),
    BadJob(
        "model_without_tokenizer",
        new_model_folder(config={"model_type": "qwen2"}, extra={"tokenizer.json": None}),
        "tokenizer",
    ),
    BadJob(
        "model_named_twice_differently",
        _two_models,
        r"config key 'model' names org/model-a but agent 'bad-jobs' model names org/model-b: "
        r"name the model once",
    ),
    BadJob(
        "model_needs_remote_code",
        new_model_folder(config=_AUTO_MAP, extra={"configuration_evil.py": _EVIL_CODE}),
        "trust_remote_code",
    ),
)

#: Model folders whose parts disagree, each a copy of the valid job's model with one file
#: changed, as training would find them only after loading the model; for engines whose valid
#: job names a model (``model_required``).
MODEL_CASES: tuple[BadJob, ...] = (
    BadJob(
        "model_weights_of_another_shape",
        edit_model_json("config.json", intermediate_size=lambda size: size + 64),
        r"model .*/model: its weights do not match .*config\.json.*"
        r"model\.layers\.0\.mlp\.down_proj\.weight is \[\d+, \d+\] in model\.safetensors",
    ),
    BadJob(
        "model_vocab_size_below_the_tokenizer",
        edit_model_json("config.json", vocab_size=200),
        r"model .*/model: config\.json vocab_size 200 leaves no row .*pad_token_id 256",
    ),
    BadJob(
        "model_tokenizer_without_eos_or_pad",
        edit_model_json("tokenizer_config.json", eos_token=None, pad_token=None),
        r"model .*/model: its tokenizer has no eos token \(nor a pad token\)",
    ),
)
