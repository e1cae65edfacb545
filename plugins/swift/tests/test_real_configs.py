"""ms-swift's own GRPO settings as its example scripts write them: ``check`` builds swift's
arguments for the job's world size, and a setting whose package is missing is one line naming
the package (ms-swift itself ends in ``PackageNotFoundError`` / ``ImportError``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml


def check(tmp_path: Path, model: Path, swift: dict[str, Any], processes: int,
          capsys: pytest.CaptureFixture[str]) -> str | None:
    """``aworld-train check`` on a GRPO job with ``swift`` as its section: ``None`` when it
    passes, else its one error line."""
    from aworld_train.cli import main

    rows = [{"prompt": f"Repeat: {i}", "ground_truth": str(i)} for i in range(8)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "rewards.py").write_text(
        "def exact(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return float(solution_str.strip() == ground_truth)\n")
    job = {"engine": "swift", "agent": {"name": "solver", "model": str(model)},
           "train_dataset": "train.jsonl", "reward": "rewards.py:exact",
           "config": {"algorithm": "grpo", "max_steps": 1,
                      "resources": {"gpus_per_node": processes},
                      "swift": {"template": "qwen", **swift}}}
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    capsys.readouterr()
    try:
        main(["check", str(tmp_path / "job.yaml")])
        return None
    except SystemExit as exc:
        if not exc.code:
            return None
    err = capsys.readouterr().err
    return next((line for line in err.splitlines() if line.startswith("error:")), err[-600:])


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


# examples/train/grpo/internal/rloo.sh and reinforce_plus_plus.sh: NPROC_PER_NODE=8,
# per_device_train_batch_size 2, gradient_accumulation_steps 4, num_generations 16.
RLOO_BATCH = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 4,
              "num_generations": 16}


def test_the_generation_batch_is_checked_for_the_jobs_world_size(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """8 processes generate 2 x 8 x 4 = 64 completions a step, 4 groups of 16: swift accepts
    it; one process generates 8, which swift refuses, naming num_generations."""
    assert check(tmp_path, tiny_model, RLOO_BATCH, 8, capsys) is None
    refused = check(tmp_path, tiny_model, RLOO_BATCH, 1, capsys)
    assert refused is not None and "num_generations (16)" in refused, refused


@pytest.mark.parametrize(("setting", "package"), [
    ({"deepspeed": "zero2"}, "deepspeed"),
    ({"attn_impl": "flash_attention_2"}, "flash-attn"),
    ({"use_liger_kernel": True}, "liger-kernel"),
])
def test_a_setting_whose_package_is_missing_is_one_line_naming_it(
    setting: dict[str, Any], package: str, tiny_model: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    module = package.replace("-", "_")
    if importlib.util.find_spec(module) is not None:
        pytest.skip(f"{package} is installed here")
    refused = check(tmp_path, tiny_model, {**setting, "num_generations": 4,
                                           "per_device_train_batch_size": 4}, 1, capsys)
    assert refused is not None and f"pip install {package}" in refused, refused
    assert "PackageNotFoundError" not in refused
