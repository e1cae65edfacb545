"""Training with VeRL: ``main_ppo`` on the saved config, its step lines turned into the run's
metrics (VeRL's validation rewards under the common names ``eval_reward`` and
``eval_<reward name>``), and its rollout dumps turned into the run's ``samples.jsonl``.

VeRL's trainer validates through its reward function and logs ``val-core/<data source>/reward/
mean@<n>`` (``val-aux/...`` when the reward reports an ``acc``), and each reward function's score
under ``val-aux/<data source>/rewards/<name>/mean@<n>`` (the combined reward module reports them
so). With ``trainer.rollout_data_dir`` set it writes each step's rollouts to
``<dir>/<step>.jsonl`` (``input``, ``output``, ``gts``, ``score``, ``step``), in a thread of its
own, after the step's metrics are computed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import append_samples
from aworld_train.engine.settings import DEFAULT_LOG_SAMPLES

from aworld_train_verl import launch
from aworld_train_verl.device import check_cpu_training, on_cpu

if TYPE_CHECKING:
    from aworld_train.engine import RunContext

    from aworld_train_verl.config import VerlConfig
    from aworld_train_verl.dataset import VerlData

# A validation mean of VeRL's: section, data source, variable ("reward", "rewards/<name>"), samples.
_VALIDATION_MEAN = re.compile(r"^val-(?:core|aux)/(?P<source>[^/]+)/(?P<var>.+)/mean@(?P<n>\d+)$")


def train(dataset: VerlData, config: VerlConfig, ctx: RunContext) -> dict[str, Any] | None:
    """Run ``main_ppo`` on the saved config; each step's metrics go to ``ctx.metrics`` and its
    rollouts to ``samples.jsonl``.

    The last checkpoint becomes the run's model (:func:`aworld_train_verl.export.export_model`);
    each checkpoint VeRL completes is named in the run's export note first, for a run that stops
    before that (:func:`aworld_train_verl.export.note_last_checkpoint`).

    :raises TrainingError: when this machine cannot start the job, VeRL fails, or its last
        checkpoint does not convert.
    """
    from aworld_train_verl.export import export_model, note_last_checkpoint

    cpu = on_cpu(ctx.config)
    if cpu:
        check_cpu_training(config.config)
    # On the CPU, Ray's logical CPUs are the config's (more than the cores, CPU_OVERRIDES).
    num_cpus = int(config.config.ray_kwargs.ray_init.num_cpus) if cpu else os.cpu_count() or 1
    launch.preflight(config.config, num_cpus, gpus=not cpu)
    # Ray refuses a CPU count when it joins an existing cluster.
    cpus = "null" if launch.joins_cluster(config.config) else str(num_cpus)
    extra = [f"ray_kwargs.ray_init.num_cpus={cpus}"]
    completed = 0
    if ctx.resume_from is not None:
        completed, checkpoint = launch.last_checkpoint(ctx.resume_from)
        extra += launch.resume_overrides(checkpoint)
    ctx.metrics.start(config.total_steps or steps(config, dataset), completed=completed)
    names = Evaluation.of(config, dataset)
    samples = RolloutSamples.of(config, ctx, after=completed)

    def on_step(step: int, metrics: dict[str, float]) -> None:
        ctx.metrics.log(step, {**metrics, **names.translate(metrics)})
        # VeRL writes a step's dump after its metrics: the earlier steps' dumps are whole.
        samples.copy(before=step)
        # VeRL saves a step's checkpoint before it logs the step's metrics.
        note_last_checkpoint(ctx.run_dir)

    try:
        launch.run(
            launch.main_ppo_command(ctx.run_dir, extra),
            ctx.run_dir,
            on_step,
            environment=config.environment,
            variables=config.variables,
        )
    finally:
        samples.copy()
        note_last_checkpoint(ctx.run_dir)
    export_model(ctx.run_dir)
    return ctx.metrics.last()


def steps(resolved: VerlConfig, data: VerlData) -> int | None:
    """The steps VeRL will run: whole batches of the training rows times the epochs."""
    batches = data.rows // int(resolved.config.data.train_batch_size)
    return batches * int(resolved.config.trainer.total_epochs) or None


@dataclass
class Evaluation:
    """How VeRL's validation metrics become ``eval_reward`` and ``eval_<reward name>``.

    :ivar weights: the test rows of each data source (VeRL reports a mean per source; the
        common figure is the mean over all rows).
    :ivar sole_reward: the reward function's name when VeRL calls the job's one function
        directly (its score is the reward), else ``None`` (the combined module reports each
        function as ``rewards/<name>``).
    """

    weights: dict[str, int] = field(default_factory=dict)
    sole_reward: str | None = None

    @classmethod
    def of(cls, config: VerlConfig, dataset: VerlData) -> Evaluation:
        return cls(weights=_source_rows(dataset.test_file), sole_reward=sole_reward(config))

    def translate(self, metrics: Mapping[str, float]) -> dict[str, float]:
        """The common eval metrics among one step's metrics (none on a step without validation)."""
        means: dict[str, dict[str, tuple[int, float]]] = {}
        for key, value in metrics.items():
            match = _VALIDATION_MEAN.match(key)
            if match is None:
                continue
            var, source, n = match["var"], match["source"], int(match["n"])
            if var != "reward" and not var.startswith("rewards/"):
                continue
            best = means.setdefault(var, {}).get(source)
            if best is None or n > best[0]:  # the mean over the most samples per prompt
                means[var][source] = (n, float(value))
        out: dict[str, float] = {}
        for var, by_source in means.items():
            name = "eval_reward" if var == "reward" else f"eval_{var.removeprefix('rewards/')}"
            out[name] = self._pooled({source: mean for source, (_, mean) in by_source.items()})
        if "eval_reward" in out and self.sole_reward is not None:
            out.setdefault(f"eval_{self.sole_reward}", out["eval_reward"])
        return out

    def _pooled(self, by_source: Mapping[str, float]) -> float:
        """The mean over every row, from the mean of each data source."""
        weights = {source: self.weights.get(source, 0) for source in by_source}
        total = sum(weights.values())
        if not total:
            return sum(by_source.values()) / len(by_source)
        return sum(mean * weights[source] for source, mean in by_source.items()) / total


def sole_reward(config: VerlConfig) -> str | None:
    """The name of the job's one reward function when VeRL calls it directly, else ``None``:
    the combined module (:mod:`aworld_train_verl.reward`) reports each function itself."""
    from aworld_train_verl.reward import MODULE_NAME

    wired = config.config.reward.custom_reward_function
    return str(wired.name) if Path(str(wired.path)).name != MODULE_NAME else None


def _source_rows(test_file: Path | None) -> dict[str, int]:
    """The rows of each ``data_source`` in VeRL's validation file."""
    if test_file is None:
        return {}
    import pyarrow.parquet as pq

    counts: dict[str, int] = {}
    for source in (
        pq.read_table(test_file, columns=["data_source"]).column("data_source").to_pylist()
    ):
        counts[str(source)] = counts.get(str(source), 0) + 1
    return counts


@dataclass
class RolloutSamples:
    """Copies the first ``limit`` rollouts of each step VeRL dumped into ``samples.jsonl``.

    :ivar folder: VeRL's ``trainer.rollout_data_dir``, or ``None`` (no dump, no samples).
    :ivar done: the last step copied (a resumed run starts after its checkpoint).
    :ivar sole_reward: the one reward function's name, whose score is the reward; VeRL's dump
        holds the total only, so with several functions ``rewards`` stays empty.
    """

    folder: Path | None
    run_dir: Path
    limit: int
    done: int = 0
    sole_reward: str | None = None

    @classmethod
    def of(cls, config: VerlConfig, ctx: RunContext, after: int = 0) -> RolloutSamples:
        dump = config.config.trainer.rollout_data_dir
        limit = DEFAULT_LOG_SAMPLES if ctx.config.log_samples is None else ctx.config.log_samples
        return cls(
            folder=Path(str(dump)) if dump else None,
            run_dir=ctx.run_dir,
            limit=limit,
            done=after,
            sole_reward=sole_reward(config),
        )

    def copy(self, before: int | None = None) -> None:
        """Append the dumped steps after :attr:`done` (and before ``before``), in order."""
        if self.folder is None or not self.limit or not self.folder.is_dir():
            return
        dumped = sorted(
            int(path.stem) for path in self.folder.glob("*.jsonl") if path.stem.isdigit()
        )
        for step in dumped:
            if step <= self.done or (before is not None and step >= before):
                continue
            append_samples(self.run_dir, step, self.rows(self.folder / f"{step}.jsonl"))
            self.done = step

    def rows(self, path: Path) -> list[dict[str, Any]]:
        """The first :attr:`limit` rollouts of one dump file as sample rows."""
        rows: list[dict[str, Any]] = []
        with path.open(encoding="utf-8") as lines:
            for line in lines:
                if len(rows) == self.limit:
                    break
                if not line.strip():
                    continue
                dumped = json.loads(line)
                score = dumped.get("score")
                rows.append(
                    {
                        "prompt": dumped.get("input", ""),
                        "completion": dumped.get("output", ""),
                        "reward": score,
                        "rewards": {self.sole_reward: score}
                        if self.sole_reward is not None
                        else {},
                    }
                )
        return rows
