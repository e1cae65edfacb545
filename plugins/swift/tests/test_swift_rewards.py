"""ms-swift's own rewards from a job: ``reward: swift:<name>`` (a built-in such as ``format`` or
``accuracy``, or a name an ``external_plugins`` file registers), alone or beside the job's own
functions, weights allowed; each through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aworld_train.testing.fixtures import hide_packages, read_jsonl, run_cli

PLUGIN = """from swift.rewards import ORM, orms


class Shortness(ORM):
    def __call__(self, completions, **kwargs):
        return [1.0 / (1 + len(str(c))) for c in completions]


orms["external_short"] = Shortness
"""


def write_job(
    folder: Path, model: Path, reward: Any, section: dict[str, Any] | None = None, **config: Any
) -> Path:
    """A 1-step GRPO job on the tiny model with ``reward``; its files beside it."""
    rows = [{"prompt": f"Repeat: {i}", "ground_truth": str(i)} for i in range(4)]
    (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "rewards.py").write_text(
        "def score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return float(solution_str.strip() == ground_truth)\n"
    )
    (folder / "plugin.py").write_text(PLUGIN)
    job = {
        "engine": "swift",
        "agent": {"name": "solver"},
        "train_dataset": "train.jsonl",
        "reward": reward,
        "run_path": str(folder / "runs"),
        "config": {
            "algorithm": "grpo",
            "model": str(model),
            "max_steps": 1,
            "batch_size": 2,
            "num_generations": 2,
            "max_completion_length": 4,
            "logging_steps": 1,
            **config,
            "swift": {"template": "qwen", **(section or {})},
        },
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.mark.slow
def test_swifts_format_beside_the_jobs_own_reward_trains_and_logs_both(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, tiny_model, ["swift:format", "rewards.py:score"])
    code, out, err = run_cli(capsys, "check", job)
    assert code == 0, err
    assert "swift:format x1 (scored by swift)" in out, out
    code, out, err = run_cli(capsys, "train", job)
    assert code == 0, err
    run = next((tmp_path / "runs").iterdir())
    args = json.loads(next(run.glob("checkpoints/**/args.json")).read_text())
    assert args["reward_funcs"] == ["format", "aworld_score"], args["reward_funcs"]
    logged = {key for record in read_jsonl(run / "metrics.jsonl") for key in record}
    assert any("Format" in key for key in logged), sorted(logged)
    assert any("score" in key and "Format" not in key for key in logged), sorted(logged)


def test_weights_and_a_plugin_reward_reach_swifts_arguments(
    tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(
        tmp_path,
        tiny_model,
        [{"name": "swift:external_short", "weight": 0.5}, "rewards.py:score"],
        {"external_plugins": [str(tmp_path / "plugin.py")]},
    )
    code, out, err = run_cli(capsys, "check", job)
    assert code == 0, err
    assert "swift:external_short x0.5" in out, out


@pytest.mark.parametrize(
    ("reward", "section", "words"),
    [
        # ms-swift's accuracy reward needs math_verify, which it checks when it creates the reward.
        ("swift:accuracy", {}, "pip install math_verify"),
        ("swift:formatt", {}, "did you mean 'format'"),
        ("swift:no_such_reward_anywhere", {}, "swift.external_plugins"),
        (
            "rewards.py:score",
            {"reward_funcs": ["accuracy", "format"]},
            "reward: [swift:accuracy, swift:format]",
        ),
    ],
)
def test_a_swift_reward_that_cannot_be_used_is_one_line(
    reward: str,
    section: dict[str, Any],
    words: str,
    tiny_model: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hide_packages(monkeypatch, "math_verify")
    code, _, err = run_cli(capsys, "check", write_job(tmp_path, tiny_model, reward, section))
    assert code == 2, err
    assert words in error_line(err), err
