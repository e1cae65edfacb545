"""Bad jobs ``aworld-train check`` must refuse on the trl engine, each in one ``error:`` line.

The shared cases of :mod:`aworld_train.testing.bad_jobs` run through :class:`BadJobSuite`; the
cases here are the trl engine's own: ``trl:`` values of the wrong type, choice or range, keys
the engine reserves, and what TRL cannot train.
"""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from aworld_train.testing.bad_jobs import (
    USE_VLLM_CASE,
    BadJob,
    BadJobSuite,
    Edit,
    JobFolder,
    override,
    set_agent,
    set_config,
    set_section,
)

_trl = functools.partial(set_section, "trl")  # set keys of the trl: section


def _sft(**section: Any) -> Edit:
    """Train with SFT, with exactly ``section`` as the ``trl:`` section."""

    def edit(job: JobFolder) -> None:
        job.config.update(algorithm="sft", trl=section)

    return edit


def _both(*edits: Edit) -> Edit:
    def edit(job: JobFolder) -> None:
        for one in edits:
            one(job)

    return edit


def _column(name: str) -> Edit:
    """Give every training row an extra column ``name``."""

    def edit(job: JobFolder) -> None:
        path = job.root / "train.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        job.rows([dict(row, **{name: "x"}) for row in rows])

    return edit


def _model_copy(job: JobFolder, drop: Callable[[Path], None]) -> None:
    """Point the job at a copy of its tiny model that ``drop`` then breaks."""
    folder = job.root / "model-copy"
    shutil.copytree(job.config["model"], folder)
    drop(folder)
    job.config["model"] = str(folder)


def _no_chat_template(folder: Path) -> None:
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config.pop("chat_template", None)
    config_file.write_text(json.dumps(config))


def _no_tokenizer(folder: Path) -> None:
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "chat_template.jinja",
    ):
        (folder / name).unlink(missing_ok=True)


_TOOLS = {"tools": ["os.path:join"], "max_turns": 2}

#: Mistakes only the trl engine can find, each with a pattern its error line matches.
TRL_CASES: tuple[BadJob, ...] = (
    # Values of the wrong type, checked against GRPOConfig's own field types.
    BadJob("beta_text", _trl(beta="hello"), r"trl\.beta: expected a number, got 'hello'"),
    BadJob("use_vllm_text", _trl(use_vllm="yes"), r"trl\.use_vllm: expected true or false"),
    BadJob("num_iterations_float", _trl(num_iterations=1.5), r"trl\.num_iterations.*integer"),
    BadJob("num_iterations_bool", _trl(num_iterations=True), r"trl\.num_iterations.*integer"),
    BadJob("hub_token_number", _trl(hub_token=123), r"trl\.hub_token: expected a string"),
    BadJob("report_to_number", _trl(report_to=5), r"trl\.report_to"),
    BadJob(
        "lr_scheduler_kwargs_list",
        _trl(lr_scheduler_kwargs=[1]),
        r"trl\.lr_scheduler_kwargs.*mapping",
    ),
    BadJob(
        "parallelism_config_mapping",
        _trl(parallelism_config={"cp_size": 2}),
        r"trl\.parallelism_config.*ParallelismConfig",
    ),
    BadJob("debug_unknown_option", _trl(debug=["everything"]), r"trl\.debug"),
    # Choices TRL accepts: metadata, enums, and what GRPOTrainer compares at run time.
    BadJob(
        "loss_type_typo",
        _trl(loss_type="dapoo"),
        r"trl\.loss_type: 'dapoo' is not one of grpo, dr_grpo, dapo.*did you mean 'dapo'",
    ),
    BadJob("loss_type_typo_override", override("trl.loss_type=dapoo"), r"trl\.loss_type.*dapo"),
    BadJob(
        "sft_loss_type_of_grpo",
        _sft(loss_type="dapo"),
        r"trl\.loss_type: 'dapo' is not one of nll, dft",
    ),
    BadJob(
        "lr_scheduler_typo",
        _trl(lr_scheduler_type="cosin"),
        r"trl\.lr_scheduler_type.*did you mean 'cosine'",
    ),
    BadJob("optim_unknown", _trl(optim="adam"), r"trl\.optim: 'adam' is not one of"),
    BadJob(
        "scale_rewards_typo",
        _trl(scale_rewards="groups"),
        r"trl\.scale_rewards.*did you mean 'group'",
    ),
    BadJob(
        "importance_sampling_level_typo",
        _trl(importance_sampling_level="tokens"),
        r"trl\.importance_sampling_level",
    ),
    BadJob(
        "multi_objective_aggregation_unknown",
        _trl(multi_objective_aggregation="mean"),
        r"trl\.multi_objective_aggregation",
    ),
    BadJob("vllm_mode_unknown", _trl(vllm_mode="remote"), r"trl\.vllm_mode"),
    BadJob("save_strategy_typo", _trl(save_strategy="epochs"), r"trl\.save_strategy.*'epoch'"),
    BadJob("log_level_unknown", _trl(log_level="verbose"), r"trl\.log_level"),
    # Not finite, in the file, nested, and through -o.
    BadJob("beta_nan", _trl(beta=float("nan")), r"trl\.beta: \.nan is not a finite number"),
    BadJob("epsilon_inf", _trl(epsilon=float("inf")), r"trl\.epsilon.*finite"),
    BadJob(
        "lr_scheduler_kwargs_nan",
        _trl(lr_scheduler_kwargs={"min_lr": float("nan")}),
        r"trl\.lr_scheduler_kwargs.*finite",
    ),
    BadJob("beta_nan_override", override("trl.beta=.nan"), r"trl\.beta.*finite"),
    # Out of range: counts, probabilities, seeds.
    BadJob("num_iterations_negative", _trl(num_iterations=-1), r"trl\.num_iterations: -1"),
    BadJob(
        "gradient_accumulation_zero",
        _trl(gradient_accumulation_steps=0),
        r"trl\.gradient_accumulation_steps",
    ),
    BadJob(
        "per_device_batch_zero",
        _trl(per_device_train_batch_size=0),
        r"trl\.per_device_train_batch_size",
    ),
    BadJob("max_steps_negative", _trl(max_steps=-5), r"trl\.max_steps"),
    BadJob("top_k_negative", _trl(top_k=-1), r"trl\.top_k"),
    BadJob("top_p_above_one", _trl(top_p=1.5), r"trl\.top_p: 1\.5 is out of range"),
    BadJob("temperature_zero", _trl(temperature=0), r"trl\.temperature"),
    BadJob("beta_negative", _trl(beta=-0.1), r"trl\.beta"),
    BadJob("seed_too_big", _trl(seed=2**40), r"trl\.seed"),
    BadJob(
        "dataloader_workers_negative",
        _trl(dataloader_num_workers=-2),
        r"trl\.dataloader_num_workers",
    ),
    # Keys the engine owns or refuses, and keys that are not fields.
    BadJob(
        "output_dir",
        _trl(output_dir="/tmp/elsewhere"),
        r"trl\.output_dir: '/tmp/elsewhere' cannot be set: .*run directory; leave it out",
    ),
    BadJob(
        "trust_remote_code_in_section",
        _trl(trust_remote_code=True),
        r"trl\.trust_remote_code: true cannot be set.*top-level",
    ),
    BadJob(
        "trust_remote_code_in_model_kwargs",
        _trl(model_init_kwargs={"trust_remote_code": True}),
        r"trl\.model_init_kwargs\.trust_remote_code",
    ),
    BadJob(
        "key_misspelled",
        _trl(num_generation=4),
        r"trl\.num_generation.*did you mean 'num_generations'",
    ),
    BadJob("sft_key_of_grpo", _sft(beta=0.1), r"trl\.beta: not a field of TRL's SFTConfig"),
    # Combinations TRL rejects at start-up.
    BadJob(USE_VLLM_CASE, _trl(use_vllm=True), r"trl\.use_vllm"),
    BadJob(
        "generation_batch_not_divisible",
        _trl(generation_batch_size=6),
        r"trl\.generation_batch_size: 6 is not divisible",
    ),
    BadJob(
        "generation_batch_and_steps",
        _trl(generation_batch_size=8, steps_per_generation=2),
        r"config trl: TRL's GRPOConfig rejects it",
    ),
    BadJob(
        "hub_repo_without_log_completions",
        _trl(log_completions_hub_repo="me/log"),
        r"GRPOConfig rejects it.*log_completions",
    ),
    BadJob(
        "auto_find_batch_size",
        _trl(auto_find_batch_size=True),
        r"GRPOConfig rejects it.*auto_find_batch_size",
    ),
    BadJob("num_generations_one_in_section", _trl(num_generations=1), r"num_generations"),
    BadJob(
        "batch_not_divisible_by_generations",
        set_config(batch_size=3),
        r"divisible by num_generations 2",
    ),
    BadJob("algorithm_not_trained_here", set_config(algorithm="dpo"), r"algorithm"),
    # What the engine cannot train.
    BadJob(
        "tools_with_sft",
        _both(_sft(), set_agent(**_TOOLS)),
        r"agent 'bad-jobs' is an agent with tools, which the trl engine trains with GRPO only",
    ),
    BadJob("tools_with_one_turn", set_agent(tools=["os.path:join"], max_turns=1), r"max_turns"),
    BadJob("turns_without_tools", set_agent(max_turns=3), r"max_turns 3 but no tools"),
    BadJob("tools_template_cannot_call", set_agent(**_TOOLS), r"chat template .*tool call"),
    BadJob("reward_argument_column", _column("completions"), r"train_dataset column 'completions'"),
    # Model folders.
    BadJob(
        "chat_prompts_without_chat_template",
        lambda job: _model_copy(job, _no_chat_template),
        r"train_dataset row 0.*chat template",
    ),
    BadJob(
        "model_without_tokenizer",
        lambda job: _model_copy(job, _no_tokenizer),
        r"model-copy.*tokenizer|tokenizer.*model-copy",
    ),
)


class TestTrlBadJobs(BadJobSuite):
    """The shared cases and :data:`TRL_CASES`, through ``aworld-train check`` on trl."""

    engine_name = "trl"
    engine_section: ClassVar[dict[str, Any]] = {"beta": 0.0}
    engine_cases = TRL_CASES
