"""What an evaluation found: each completion scored with the job's reward, summed up into an
:class:`EvalResult`, and the result's files: ``eval/<model>-<dataset>.json`` (the summary) and
``.samples.jsonl`` (every prompt with its completions and scores)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.reward import RewardResult

if TYPE_CHECKING:
    from aworld_train.reward import RewardSpec


#: A sampled completion passes (for pass@K) when every reward function gives it at least this:
#: the full score of a reward that scores from 0 to 1.
PASS_SCORE = 1.0


@dataclass
class EvalResult:
    """One model scored on one dataset.

    :ivar model: what was evaluated: ``final``, ``base``, or a folder's name (see
        :func:`~aworld_train.evaluation._target.resolve_model`).
    :ivar dataset: ``test``, ``train``, or a dataset file's name, ``-firstN`` added for a limit
        (see :func:`~aworld_train.evaluation._target.load_rows`).
    :ivar rows: the dataset rows scored.
    :ivar mean_reward: the weighted reward, averaged over every completion.
    :ivar rewards: each reward function's own score, averaged, by its name.
    :ivar pass_at_k: with ``samples`` K > 1, the share of rows where at least one of the K
        completions passes (every reward function scores at least :data:`PASS_SCORE`).
    :ivar samples: completions per row.
    :ivar seconds: the time generation and scoring took (loading the model excluded).
    :ivar backend: what generated: ``vllm`` or ``transformers``.
    :ivar records: per row: ``prompt``, ``ground_truth``, and ``completion``, ``score``,
        ``rewards`` (one completion) or ``completions``, ``scores``, ``rewards``, ``passed``
        (K of them).
    """

    model: str
    dataset: str
    rows: int
    mean_reward: float
    rewards: dict[str, float]
    pass_at_k: float | None
    samples: int
    seconds: float
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)
    backend: str = "transformers"

    def summary(self) -> dict[str, Any]:
        """Everything but the records, as plain data (``eval/<model>-<dataset>.json``)."""
        return {
            "model": self.model,
            "dataset": self.dataset,
            "rows": self.rows,
            "mean_reward": self.mean_reward,
            "rewards": dict(self.rewards),
            "pass_at_k": self.pass_at_k,
            "samples": self.samples,
            "seconds": self.seconds,
            "backend": self.backend,
        }


def score_completions(
    rows: list[dict[str, Any]],
    completions: list[list[str]],
    reward: RewardSpec,
    failed: list[list[bool]] | None = None,
) -> EvalResult:
    """Score each row's completions with the job's reward (weights included) and summarise.

    :param completions: per row, its completions' text (one, or K).
    :param failed: per row, which completions are failed agent episodes: they score 0.
    """
    names = [function.name for function in reward.functions]
    records: list[dict[str, Any]] = []
    scores: list[float] = []
    per_reward: dict[str, list[float]] = {name: [] for name in names}
    passed = 0
    for index, (row, texts) in enumerate(zip(rows, completions, strict=True)):
        lost = failed[index] if failed is not None else [False] * len(texts)
        results = [
            RewardResult(0.0, {f"rewards/{name}": 0.0 for name in names})
            if failure
            else reward.score(
                row.get("data_source") or "",
                text,
                row["ground_truth"],
                row.get("extra_info"),
                row=index,
            )
            for text, failure in zip(texts, lost, strict=True)
        ]
        each = [{name: result.metrics[f"rewards/{name}"] for name in names} for result in results]
        scores.extend(result.score for result in results)
        for values in each:
            for name in names:
                per_reward[name].append(values[name])
        row_passed = any(all(value >= PASS_SCORE for value in values.values()) for values in each)
        passed += row_passed
        record: dict[str, Any] = {"prompt": row["prompt"], "ground_truth": row["ground_truth"]}
        if len(texts) == 1:
            record.update(completion=texts[0], score=results[0].score, rewards=each[0])
        else:
            record.update(
                completions=texts,
                scores=[r.score for r in results],
                rewards=each,
                passed=row_passed,
            )
        records.append(record)
    samples = len(completions[0]) if completions else 1
    return EvalResult(
        model="",
        dataset="",
        rows=len(rows),
        mean_reward=_mean(scores),
        rewards={name: _mean(values) for name, values in per_reward.items()},
        pass_at_k=passed / len(rows) if samples > 1 and rows else None,
        samples=samples,
        seconds=0.0,
        records=records,
    )


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def result_stem(result: EvalResult) -> str:
    """The name of a result's files without their suffix: ``<model>-<dataset>``, and
    ``-k<K>`` for K completions per prompt (the names :func:`~aworld_train.evaluation._target.resolve_model` and
    :func:`~aworld_train.evaluation._target.load_rows` give already tell a folder, a file and ``--limit`` apart)."""
    samples = f"-k{result.samples}" if result.samples > 1 else ""
    return f"{result.model}-{result.dataset}{samples}"


def write_result(result: EvalResult, out_dir: Path) -> Path:
    """Write ``<stem>.json`` and ``<stem>.samples.jsonl`` (:func:`result_stem`) into
    ``out_dir``; returns the former."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = result_stem(result)
    summary = out_dir / f"{stem}.json"
    summary.write_text(json.dumps(result.summary(), indent=2) + "\n", encoding="utf-8")
    (out_dir / f"{stem}.samples.jsonl").write_text(
        "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in result.records),
        encoding="utf-8",
    )
    return summary


def difference(base: EvalResult, final: EvalResult) -> dict[str, Any]:
    """Final minus base, for each figure both have."""
    return {
        "mean_reward": final.mean_reward - base.mean_reward,
        "rewards": {
            name: final.rewards[name] - base.rewards[name]
            for name in final.rewards
            if name in base.rewards
        },
        "pass_at_k": (
            final.pass_at_k - base.pass_at_k
            if final.pass_at_k is not None and base.pass_at_k is not None
            else None
        ),
    }
