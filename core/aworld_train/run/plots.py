"""Reward and loss curves as PNG, drawn at the end of a run from ``metrics.jsonl``.

``reward.png`` also draws ``eval_reward`` (the test set scored during training, at the steps
it was scored) as a second curve, "eval reward".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from aworld_train.run.metrics import read_metrics

if TYPE_CHECKING:
    from matplotlib.axes import Axes


@dataclass(frozen=True)
class Curve:
    """One figure: a training metric and, optionally, an evaluation metric on the same axes."""

    metric: str
    filename: str
    title: str
    colour: str
    eval_metric: str | None = None
    eval_colour: str = "#ff7f0e"


CURVES = (
    Curve("reward", "reward.png", "Mean reward", "#1f77b4", eval_metric="eval_reward"),
    Curve("loss", "loss.png", "Training loss", "#d62728"),
)


def plot_run(run_dir: Path) -> list[Path]:
    """Draw every curve whose metric (or evaluation metric) was logged; returns the files
    written."""
    records = read_metrics(run_dir)  # a line cut short by a killed run does not stop the plot
    written = []
    for curve in CURVES:
        points = [(r["step"], r[curve.metric]) for r in records if curve.metric in r]
        scored = [
            (r["step"], r[curve.eval_metric])
            for r in records
            if curve.eval_metric is not None and curve.eval_metric in r
        ]
        if points or scored:
            written.append(_plot(curve, points, scored, run_dir / curve.filename))
    return written


def _plot(
    curve: Curve, points: list[tuple[int, float]], scored: list[tuple[int, float]], path: Path
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    notes = []
    if points:
        notes.append(_draw_training(ax, points, curve.metric, curve.colour))
    if scored and curve.eval_metric is not None:
        # Scored every eval_steps and at the end: few points, each one marked.
        ax.plot(
            [s for s, _ in scored],
            [v for _, v in scored],
            color=curve.eval_colour,
            linewidth=2,
            marker="o",
            markersize=4,
            label=curve.eval_metric.replace("_", " "),
        )
        ax.annotate(
            f"{scored[-1][1]:.3g}",
            xy=scored[-1],
            xytext=(6, 0),
            textcoords="offset points",
            va="center",
            color=curve.eval_colour,
            fontweight="bold",
        )
        notes.append(
            f"{curve.eval_metric.replace('_', ' ')} at the last of {len(scored)} "
            f"evaluations {scored[-1][1]:.3g}"
        )
    ax.set_title(curve.title, fontsize=13, fontweight="bold", loc="left")
    ax.set_xlabel("step")
    ax.set_ylabel(curve.metric)
    ax.grid(True, alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(frameon=False, loc="best")
    ax.text(0.01, -0.18, " · ".join(notes), transform=ax.transAxes, fontsize=8, color="#555555")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _draw_training(ax: Axes, points: list[tuple[int, float]], label: str, colour: str) -> str:
    """The metric per step and its moving average; returns the figure's note on it."""
    steps = [s for s, _ in points]
    values = [v for _, v in points]
    window = max(1, len(values) // 10)
    smooth = [
        sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
        for i in range(len(values))
    ]
    ax.plot(steps, values, color=colour, alpha=0.25, linewidth=1, label=f"{label} per step")
    ax.plot(
        steps,
        smooth,
        color=colour,
        linewidth=2.2,
        label=f"moving average of {window} logged points" if window > 1 else label,
    )
    ax.annotate(
        f"{smooth[-1]:.3g}",
        xy=(steps[-1], smooth[-1]),
        xytext=(6, 0),
        textcoords="offset points",
        va="center",
        color=colour,
        fontweight="bold",
    )
    tenth = max(1, len(values) // 10)
    first, last = sum(values[:tenth]) / tenth, sum(values[-tenth:]) / tenth
    return (
        f"{len(values)} logged steps · mean of the first tenth {first:.3g} → last tenth {last:.3g}"
    )
