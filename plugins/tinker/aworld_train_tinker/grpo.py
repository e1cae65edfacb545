"""One GRPO step's data: each group of completions scored with the job's reward, its
advantages (minus the group's mean, over its deviation), scaled so that the service's sum over
tokens is the job's ``loss_aggregation``, and every trained segment as a ``Datum`` for the
``importance_sampling`` or ``ppo`` loss."""

from __future__ import annotations

import statistics
from typing import Any

from aworld_train.engine import RewardSpec

from aworld_train_tinker.config import TinkerJob
from aworld_train_tinker.datum import datum
from aworld_train_tinker.sampling import Completion, Segment


def grpo_data(
    groups: list[list[Completion]], batch: list[dict[str, Any]], reward: RewardSpec,
    job: TinkerJob, episodes: bool,
) -> tuple[list[Any], dict[str, float], list[dict[str, Any]]]:  # fmt: skip
    """The datums, the step's metrics and its samples.

    :param episodes: whether the groups are the agent runtime's episodes, whose failures are
        counted in ``agent_failed``.
    """
    scores: list[float] = []
    extra: dict[str, list[float]] = {}
    samples, scored = [], []
    for row, group in zip(batch, groups):
        group_scores = []
        for completion in group:
            score, metrics = _score(reward, row, completion)
            group_scores.append(score)
            for name, value in metrics.items():
                extra.setdefault(name, []).append(value)
            rewards = {k.removeprefix("rewards/"): v for k, v in metrics.items()
                       if k.startswith("rewards/")}  # fmt: skip
            samples.append({"prompt": row["prompt"], "completion": completion.text,
                            "reward": score, "rewards": rewards})  # fmt: skip
        scores += group_scores
        scored.append((group, advantages(group_scores, job.scale_rewards)))
    lengths = [completion.tokens for group in groups for completion in group]
    data = [
        _datum(segment, advantage * aggregation_scale(job, completion.tokens, lengths))
        for group, group_advantages in scored
        for completion, advantage in zip(group, group_advantages)
        if advantage != 0.0  # no signal: the whole group scored alike
        for segment in completion.segments
    ]
    metrics = {
        "reward": statistics.fmean(scores),
        "reward_std": statistics.pstdev(scores),
        "completion_length": statistics.fmean(lengths),
        "trained_completions": float(sum(1 for _, a in scored for x in a if x != 0.0)),
        **{name: statistics.fmean(values) for name, values in extra.items()},
    }
    if episodes:
        failed = sum(1 for group in groups for c in group if c.failure is not None)
        metrics["agent_failed"] = failed / len(lengths)
    return data, metrics, samples


def _score(
    reward: RewardSpec, row: dict[str, Any], completion: Completion
) -> tuple[float, dict[str, float]]:
    if completion.failure is not None:
        return 0.0, {}  # a failed episode scores 0 (and is counted in agent_failed)
    result = reward.score(
        row.get("data_source") or "", completion.text, str(row["ground_truth"]),
        row.get("extra_info"),
    )  # fmt: skip
    return result.score, result.metrics


def _datum(segment: Segment, advantage: float) -> Any:
    zeros = [0.0] * len(segment.prompt)
    return datum(
        segment.prompt + segment.response,
        logprobs=zeros + [float(x) for x in segment.logprobs],
        advantages=zeros + [advantage * m for m in segment.mask],
    )


def advantages(scores: list[float], scale: bool) -> list[float]:
    """Each score minus its group's mean, divided by the group's deviation when ``scale``."""
    mean = statistics.fmean(scores)
    deviation = statistics.pstdev(scores)
    if deviation == 0.0:
        return [0.0] * len(scores)
    return [(score - mean) / (deviation if scale else 1.0) for score in scores]


def aggregation_scale(job: TinkerJob, tokens: int, lengths: list[int]) -> float:
    """The factor on a completion's advantage that makes the service's per-token sum the
    job's ``loss_aggregation`` over the batch (``lengths``: every completion's tokens)."""
    if job.loss_aggregation == "token-mean":
        return 1.0 / max(sum(lengths), 1)
    if job.loss_aggregation == "seq-mean-token-mean":
        return 1.0 / (max(tokens, 1) * len(lengths))
    if job.loss_aggregation == "seq-mean-token-sum-norm":
        return 1.0 / (job.max_completion_length * len(lengths))
    return 1.0 / len(lengths)  # seq-mean-token-sum
