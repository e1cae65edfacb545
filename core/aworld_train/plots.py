"""Reward and loss curves as PNG, drawn at the end of a run from ``metrics.jsonl``."""

from __future__ import annotations

from pathlib import Path

# (metric, file, title, colour)
_CURVES = (
    ("reward", "reward.png", "Mean reward", "#1f77b4"),
    ("loss", "loss.png", "Training loss", "#d62728"),
)


def plot_run(run_dir: Path) -> list[Path]:
    """Draw every curve whose metric was logged; returns the files written."""
    from aworld_train.rundir import read_metrics

    records = read_metrics(run_dir)  # a line cut short by a killed run does not stop the plot
    written = []
    for metric, filename, title, colour in _CURVES:
        points = [(r["step"], r[metric]) for r in records if metric in r]
        if points:
            written.append(_plot(points, run_dir / filename, title, metric, colour))
    return written


def _plot(points: list[tuple[int, float]], path: Path, title: str, label: str, colour: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [s for s, _ in points]
    values = [v for _, v in points]
    window = max(1, len(values) // 10)
    smooth = [
        sum(values[max(0, i - window + 1): i + 1]) / len(values[max(0, i - window + 1): i + 1])
        for i in range(len(values))
    ]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    ax.plot(steps, values, color=colour, alpha=0.25, linewidth=1, label=f"{label} per step")
    ax.plot(steps, smooth, color=colour, linewidth=2.2,
            label=f"moving average of {window} logged points" if window > 1 else label)
    ax.set_title(title, fontsize=13, fontweight="bold", loc="left")
    ax.set_xlabel("step")
    ax.set_ylabel(label)
    ax.grid(True, alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(frameon=False, loc="best")
    tenth = max(1, len(values) // 10)
    first, last = sum(values[:tenth]) / tenth, sum(values[-tenth:]) / tenth
    ax.annotate(f"{smooth[-1]:.3g}", xy=(steps[-1], smooth[-1]), xytext=(6, 0),
                textcoords="offset points", va="center", color=colour, fontweight="bold")
    ax.text(0.01, -0.18, f"{len(values)} logged steps · mean of the first tenth {first:.3g} "
            f"→ last tenth {last:.3g}", transform=ax.transAxes, fontsize=8, color="#555555")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
