"""Bad jobs on the swift engine: the shared cases, then mistakes in what only ms-swift reads.

Each case starts from a valid job in its own folder, changes one thing and runs
``aworld-train check --engine swift`` in this process: exit 2, one ``error:`` line naming the
key or file, nothing else on stderr, no run directory.
"""

from __future__ import annotations

import functools
import socket
from pathlib import Path
from typing import Any

import pytest
from aworld_train.testing.bad_jobs import (
    USE_VLLM_CASE,
    BadJob,
    BadJobSuite,
    JobFolder,
    override,
    set_agent,
    set_config,
    set_section,
    without,
)

_swift = functools.partial(set_section, "swift")  # set keys of the swift: section

_SECTION = {"template": "qwen"}


def _sft(**section: Any) -> Any:
    """An SFT job with the given ``swift:`` keys."""

    def edit(job: JobFolder) -> None:
        job.config.update(algorithm="sft")
        job.config["swift"] = dict(_SECTION, **section)

    return edit


def _dpo(**section: Any) -> Any:
    def edit(job: JobFolder) -> None:
        job.config.update(algorithm="dpo")
        job.config["swift"] = dict(_SECTION, **section)

    return edit


def _column(name: str) -> Any:
    """Every row gets a column swift reads itself."""

    def edit(job: JobFolder) -> None:
        job.rows([{"prompt": f"Repeat: {d}", "ground_truth": str(d), name: None} for d in range(8)])

    return edit


SWIFT_CASES: tuple[BadJob, ...] = (
    # Values of the wrong type for ms-swift's own fields.
    BadJob("lora_rank_text", _swift(tuner_type="lora", lora_rank="eight"), r"swift\.lora_rank"),
    BadJob("lora_rank_float", _swift(tuner_type="lora", lora_rank=8.5), r"swift\.lora_rank"),
    BadJob("lora_rank_bool", _swift(tuner_type="lora", lora_rank=True), r"swift\.lora_rank"),
    BadJob("beta_text", _swift(beta="hello"), r"swift\.beta"),
    BadJob("beta_nan", _swift(beta=float("nan")), r"swift\.beta"),
    BadJob(
        "weight_decay_inf_override", override("swift.weight_decay=.inf"), r"swift\.weight_decay"
    ),
    BadJob("warmup_ratio_list", _swift(warmup_ratio=[0.1]), r"swift\.warmup_ratio"),
    BadJob("use_vllm_text", _swift(use_vllm="yes"), r"swift\.use_vllm"),
    BadJob("target_modules_numbers", _swift(target_modules=[1, 2]), r"swift\.target_modules"),
    BadJob(
        "model_kwargs_nan", _swift(model_kwargs={"scale": float("nan")}), r"swift\.model_kwargs"
    ),
    BadJob(
        "lr_scheduler_kwargs_number", _swift(lr_scheduler_kwargs=5), r"swift\.lr_scheduler_kwargs"
    ),
    BadJob("hub_token_number", _swift(hub_token=12345), r"swift\.hub_token"),
    BadJob("system_number", _swift(system=7), r"swift\.system"),
    # Names ms-swift does not know.
    BadJob("tuner_type_misspelled", _swift(tuner_type="loraa"), r"swift\.tuner_type.*'lora'"),
    BadJob("template_unknown", _swift(template="qwenn"), r"swift\.template.*'qwen'"),
    BadJob("model_type_unknown", _swift(model_type="qwen2x"), r"swift\.model_type"),
    BadJob(
        "lr_scheduler_type_misspelled",
        _swift(lr_scheduler_type="cosin"),
        r"swift\.lr_scheduler_type.*'cosine'",
    ),
    BadJob("torch_dtype_unknown", _swift(torch_dtype="fp32"), r"swift\.torch_dtype"),
    BadJob("optim_unknown", _swift(optim="adamw_fancy"), r"swift\.optim"),
    BadJob("grpo_loss_type_misspelled", _swift(loss_type="dapoo"), r"swift\.loss_type.*'dapo'"),
    BadJob("grpo_loss_type_of_sft", _swift(loss_type="cross_entropy"), r"swift\.loss_type"),
    BadJob("report_to_unknown", _swift(report_to="wandbb"), r"swift\.report_to.*'wandb'"),
    BadJob("callback_unknown", _swift(callbacks=["early_stopp"]), r"swift\.callbacks"),
    BadJob("save_strategy_unknown", _swift(save_strategy="sometimes"), r"swift\.save_strategy"),
    BadJob("optimizer_unknown", _swift(optimizer="adam"), r"swift\.optimizer"),
    # Keys that are not ms-swift's, or that aworld-train sets from the job.
    BadJob("key_misspelled", _swift(tuner_typ="lora"), r"swift\.tuner_typ.*'tuner_type'"),
    BadJob("reserved_dataset", _swift(dataset=["other.jsonl"]), r"swift\.dataset.*train_dataset"),
    BadJob("reserved_model", _swift(model="other"), r"swift\.model\b"),
    BadJob("reserved_output_dir", _swift(output_dir="/tmp/out"), r"swift\.output_dir"),
    BadJob("reserved_reward_funcs", _swift(reward_funcs=["accuracy"]), r"swift\.reward_funcs"),
    BadJob("reserved_rlhf_type", _swift(rlhf_type="ppo"), r"swift\.rlhf_type"),
    BadJob("section_not_mapping", set_config(swift=5), r"swift"),
    BadJob(
        "credential_swift_would_write",
        _swift(swanlab_secret="s3cr3t-value"),
        r"swift\.swanlab_secret.*credential",
    ),
    # What one algorithm takes and another does not.
    BadJob("grpo_key_in_sft", _sft(num_generations=4), r"swift\.num_generations.*SftArguments"),
    BadJob("sft_loss_type_misspelled", _sft(loss_type="cross_entropyy"), r"swift\.loss_type"),
    BadJob("dpo_loss_type_misspelled", _dpo(loss_type="sigmoidd"), r"swift\.loss_type.*'sigmoid'"),
    BadJob("dpo_without_rejected_column", _dpo(), r"rejected"),
    BadJob("algorithm_swift_does_not_train", set_config(algorithm="ppo"), r"algorithm.*ppo"),
    BadJob("grpo_group_does_not_fit_batch", set_config(batch_size=3), r"ms-swift rejects"),
    BadJob(USE_VLLM_CASE, _swift(use_vllm=True), r"swift\.use_vllm"),
    # The model, agent and data as swift sees them.
    BadJob("agent_several_turns", set_agent(max_turns=3), r"max_turns"),
    BadJob("column_swift_reads", _column("images"), r"column 'images'"),
    BadJob("no_train_dataset", without("train_dataset"), r"train_dataset"),
    BadJob("grpo_without_reward", without("reward"), r"reward"),
)


class TestSwiftBadJobs(BadJobSuite):
    engine_name = "swift"
    # The tiny model's Qwen2 type fits several ChatML templates; the job picks one.
    engine_section = _SECTION
    engine_cases = SWIFT_CASES

    def test_the_valid_job_checks_quietly(
        self, job_folder: JobFolder, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, err = self.run_check(job_folder, capsys)
        assert (code, err) == (0, "")

    def test_a_hub_token_is_checked_without_any_network_call(
        self,
        job_folder: JobFolder,
        capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """With a token in the job and in the environment, swift would log in to ModelScope
        while it builds its arguments; the check never connects anywhere."""
        token = "ms-planted-token-7f3a9c"
        connects: list[Any] = []

        def connect(sock: socket.socket, address: Any) -> None:
            connects.append(address)
            raise OSError("the check must not use the network")

        monkeypatch.setattr(socket.socket, "connect", connect)
        monkeypatch.setenv("MODELSCOPE_API_TOKEN", token)
        _swift(hub_token=token)(job_folder)
        code, err = self.run_check(job_folder, capsys)
        assert (code, err) == (0, "")
        assert connects == []


def test_swift_never_runs_code_from_an_untrusted_model_folder(
    tmp_path: Path, tiny_model: Path
) -> None:
    """Past the core's refusal of an ``auto_map``, swift's own loading still runs none of the
    folder's code: swift passes trust_remote_code=True to transformers itself."""
    import json
    import shutil

    from aworld_train.errors import ModelError
    from aworld_train_swift.config import SwiftConfig, check_arguments

    folder = tmp_path / "evil"
    shutil.copytree(tiny_model, folder)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoConfig": "configuration_evil.EvilConfig"}
    (folder / "config.json").write_text(json.dumps(config))
    marker = tmp_path / "EXECUTED"
    (folder / "configuration_evil.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\n"
        "from transformers import Qwen2Config as EvilConfig\n"
    )
    (tmp_path / "train.jsonl").write_text(
        json.dumps({"messages": [{"role": "user", "content": "Repeat: 1"}], "solution": "1"}) + "\n"
    )
    swift_config = SwiftConfig(
        algorithm="grpo",
        arguments={
            "model": str(folder),
            "model_type": "qwen2",
            "template": "qwen",
            "tuner_type": "full",
            "dataset": [str(tmp_path / "train.jsonl")],
            "output_dir": str(tmp_path / "out"),
            "report_to": ["none"],
            "torch_dtype": "float32",
            "use_cpu": True,
            "num_generations": 2,
            "per_device_train_batch_size": 2,
        },
        run_dir=str(tmp_path),
        cache_dir=str(tmp_path / "cache"),
        log_file=str(tmp_path / "swift.log"),
        trust_remote_code=False,
    )
    with pytest.raises(
        ModelError, match=f"model {folder} needs code from its own folder.*trust_remote_code: true"
    ):
        check_arguments(swift_config)
    assert not marker.exists()
