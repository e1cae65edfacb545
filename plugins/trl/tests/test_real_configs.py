"""TRL's own configs (``real_configs/``: its docs and scripts as ``trl grpo/sft --config`` files,
the model swapped for a local one): ``aworld-train check`` accepts each config TRL's own code
accepts, and refuses the rest with TRL's reason.

TRL's verdict is what its code says of the same file before and as training starts: TrlParser
reading it as ``trl grpo|sft --config`` does (script, trainer and model arguments, the
launcher's ``num_processes`` and ``accelerate_config`` taken off first as TRL's CLI does), the
trainer config built for the job's world size, and the packages its settings make the trainer
or the launcher import (vLLM, Liger, flash-attn, DeepSpeed, PEFT, each tracker).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from aworld_train.testing.real_configs import (
    assert_a_dozen_configs,
    assert_same_verdict,
    verdict_of_check,
)

HERE = Path(__file__).parent / "real_configs"
CONFIGS = sorted(path.name for path in HERE.iterdir() if path.suffix == ".yaml")

# Each refusal, with the words both verdicts give (TRL's and check's). Every other config is
# accepted by both.
EXPECTED: dict[str, str] = {
    # One process of per_device_train_batch_size 1 generates 1 completion a step, not a group of 8.
    "grpo_dr_grpo.yaml": "num_generations",
    # Packages this machine does not have, which the setting needs.
    "grpo_truncated_is.yaml": "vllm",
    "grpo_trackio.yaml": "trackio",
    "sft_cli_zero2.yaml": "deepspeed",
    "sft_liger.yaml": "liger",
    "sft_flash_attention.yaml": "flash",
}

# What TRL's CLI takes off a config file for ``accelerate launch`` before TrlParser reads it.
LAUNCHER_KEYS = ("num_processes", "accelerate_config")
# The packages a setting makes TRL's trainer (or accelerate) import, by setting and value.
NEEDS: dict[str, dict[Any, str]] = {
    "use_vllm": {True: "vllm"},
    "use_liger_kernel": {True: "liger_kernel"},
    "use_peft": {True: "peft"},
    "attn_implementation": {"flash_attention_2": "flash_attn", "flash_attention_3": "flash_attn"},
    "accelerate_config": {"zero1": "deepspeed", "zero2": "deepspeed", "zero3": "deepspeed"},
}


def algorithm(name: str) -> str:
    return name.split("_", 1)[0]


def read_config(name: str, model: Path) -> dict[str, Any]:
    """The config file as a mapping, ``MODEL`` replaced by ``model``."""
    import yaml

    return yaml.safe_load((HERE / name).read_text().replace("MODEL", str(model)))


def trls_verdict(name: str, model: Path, tmp_path: Path) -> str | None:
    """TRL's own verdict on the file: ``None`` when its code accepts it, else its reason."""
    import yaml
    from trl import GRPOConfig, ModelConfig, ScriptArguments, SFTConfig, TrlParser

    config = read_config(name, model)
    launcher = {key: config.pop(key) for key in LAUNCHER_KEYS if key in config}
    config.setdefault("output_dir", str(tmp_path / "trl-output"))
    config = {key: value for key, value in config.items() if value is not None}
    path = tmp_path / f"trl-{name}"
    path.write_text(yaml.safe_dump(config))
    trainer_config = GRPOConfig if algorithm(name) == "grpo" else SFTConfig
    try:
        for key, value in {**config, **launcher}.items():
            package = NEEDS.get(key, {}).get(value)
            if package and importlib.util.find_spec(package) is None:
                raise ImportError(f"{key}={value} needs {package}, which is not installed")
        for tracker in [config["report_to"]] if isinstance(config.get("report_to"), str) else []:
            if importlib.util.find_spec(tracker) is None:
                raise RuntimeError(f"report_to {tracker}: {tracker} is not installed")
        parser = TrlParser((ScriptArguments, trainer_config, ModelConfig))
        _, args, _ = parser.parse_args_and_config(["--config", str(path), "--use_cpu", "true"])
        if algorithm(name) == "grpo":
            processes = int(launcher.get("num_processes", 1))
            steps = args.steps_per_generation or args.gradient_accumulation_steps
            batch = args.per_device_train_batch_size * processes * steps
            if batch % args.num_generations:
                raise ValueError(
                    f"generation batch {batch} is not divisible by num_generations "
                    f"{args.num_generations}"
                )
    except (Exception, SystemExit) as error:  # noqa: BLE001 - argparse exits, TRL raises
        return f"{type(error).__name__}: {' '.join(str(error).split())}"
    return None


def write_job(folder: Path, model: Path, name: str) -> Path:
    """A job beside the config: the tiny model, a few rows, an exact-match reward for GRPO, a
    test set (the SFT scripts evaluate), the config file as the job's ``config:``."""
    import yaml

    rows = [{"prompt": f"Repeat: {i % 10}", "ground_truth": str(i % 10)} for i in range(8)]
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "rewards.py").write_text(
        "def exact(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return float(solution_str.strip() == ground_truth)\n"
    )
    (folder / name).write_text((HERE / name).read_text().replace("MODEL", str(model)))
    job: dict[str, Any] = {
        "engine": "trl",
        "agent": {"name": "solver"},
        "train_dataset": "train.jsonl",
        "test_dataset": "train.jsonl",
        "config": name,
    }
    if algorithm(name) == "grpo":
        job["reward"] = "rewards.py:exact"
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def checks_verdict(
    capsys: pytest.CaptureFixture[str], folder: Path, model: Path, name: str, *options: str
) -> str | None:
    """``aworld-train check`` on the config: ``None`` when it passes, else its one error line."""
    extra = [] if algorithm(name) == "grpo" else ["-o", "algorithm=sft"]
    return verdict_of_check(capsys, write_job(folder, model, name), *extra, *options)


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.mark.parametrize("name", CONFIGS)
def test_check_gives_trls_own_verdict(
    name: str, long_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trl = trls_verdict(name, long_model, tmp_path)
    check = checks_verdict(capsys, tmp_path, long_model, name)
    assert_same_verdict("TRL", trl, check, EXPECTED.get(name), any_case=True)


def test_the_suite_holds_a_dozen_of_trls_configs() -> None:
    assert_a_dozen_configs(CONFIGS, EXPECTED)


def test_the_trl_sections_completion_length_is_checked_against_the_models_positions(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``trl.max_completion_length: 32768`` on a model of 1,024 positions is one line naming
    the TRL key, though the common max_completion_length is unset; 512 fits."""
    check = checks_verdict(
        capsys, tmp_path, tiny_model, "grpo_gspo.yaml", "-o", "trl.max_completion_length=32768"
    )
    assert check is not None and "trl.max_completion_length" in check and "32768" in check, check
    assert "1024 positions" in check, check
    assert (
        checks_verdict(
            capsys, tmp_path, tiny_model, "grpo_gspo.yaml", "-o", "trl.max_completion_length=512"
        )
        is None
    )


def test_a_tracker_trl_takes_is_one_line_naming_its_package(
    long_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    check = checks_verdict(capsys, tmp_path, long_model, "grpo_trackio.yaml")
    assert check is not None and "pip install trackio" in check, check
