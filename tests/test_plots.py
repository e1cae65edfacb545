"""The curves: reward.png carries the evaluation reward as a second curve."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from aworld_train.run.plots import CURVES, plot_run

EVAL_COLOUR = np.array([0xFF, 0x7F, 0x0E]) / 255  # the eval curve's colour


def write_metrics(folder: Path, records: list[dict]) -> None:
    (folder / "metrics.jsonl").write_text(
        "".join(json.dumps({"time": 0.0, **record}) + "\n" for record in records)
    )


def eval_pixels(png: Path) -> int:
    """How many pixels of ``png`` are drawn in the eval curve's colour."""
    import matplotlib.image

    pixels = matplotlib.image.imread(png)[..., :3]
    return int((np.abs(pixels - EVAL_COLOUR).max(axis=-1) < 0.05).sum())


def test_the_eval_reward_is_a_second_curve_on_reward_png(tmp_path: Path) -> None:
    assert {curve.eval_metric for curve in CURVES if curve.filename == "reward.png"} == {
        "eval_reward"
    }
    training = [{"step": step, "reward": step / 40, "loss": 1 - step / 40} for step in range(1, 41)]
    scored = [
        {"step": step, "eval_reward": 0.2 + step / 100, "eval_score": 0.2}
        for step in (10, 20, 30, 40)
    ]
    without, with_eval = tmp_path / "without", tmp_path / "with"
    without.mkdir()
    with_eval.mkdir()
    write_metrics(without, training)
    write_metrics(with_eval, training + scored)
    assert [p.name for p in plot_run(without)] == ["reward.png", "loss.png"]
    assert [p.name for p in plot_run(with_eval)] == ["reward.png", "loss.png"]
    assert eval_pixels(without / "reward.png") == 0
    assert eval_pixels(with_eval / "reward.png") > 200, "the eval curve is drawn"
    assert eval_pixels(with_eval / "loss.png") == 0, "only the reward figure has one"


def test_an_eval_reward_alone_still_draws_reward_png(tmp_path: Path) -> None:
    write_metrics(
        tmp_path,
        [
            {"step": 5, "eval_reward": 0.5},
            {"step": 9, "loss": 0.3},
            {"step": 10, "eval_reward": 0.75},
        ],
    )
    assert [p.name for p in plot_run(tmp_path)] == ["reward.png", "loss.png"]
    assert eval_pixels(tmp_path / "reward.png") > 50
