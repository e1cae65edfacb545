"""check_reward: the canonical per-sample reward becomes one batched TRL reward function."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aworld_train.engine.hf import completion_text

if TYPE_CHECKING:
    from aworld_train.engine import RewardSpec


# The column of TRL's completion log holding each function's score per completion:
# rewards/<name>.
REWARD_COLUMN = "rewards/"


class TrlReward:
    """A TRL reward function that scores each completion with the job's :class:`RewardSpec`.

    TRL calls it with the batch's prompts and completions plus every other dataset column as a
    keyword list (one item per completion). It returns the weighted total per completion, logs
    each function's score and the extra keys of dict results through TRL's ``log_metric``, and
    adds each function's score per completion to TRL's completion log (``log_extra``), where
    the rollout samples read it.
    """

    def __init__(self, spec: RewardSpec) -> None:
        self.spec = spec
        names = [function.name for function in spec.functions]
        # TRL names the reward's metrics after the function's __name__ (rewards/<name>/mean),
        # so with one function its own rewards/<name> metric would only repeat that.
        self.__name__ = _metric_name(names[0]) if len(names) == 1 else "total"
        self._repeated = {f"rewards/{names[0]}"} if len(names) == 1 else set()

    def __call__(
        self,
        prompts: list[Any],
        completions: list[Any],
        ground_truth: list[Any],
        data_source: list[str] | None = None,
        extra_info: list[dict[str, Any] | None] | None = None,
        log_metric: Callable[[str, float], None] | None = None,
        log_extra: Callable[[str, list[Any]], None] | None = None,
        agent_answer: list[str] | None = None,
        agent_extra: list[dict[str, Any]] | None = None,
        agent_failure: list[str | None] | None = None,
        agent_tool_calls: list[int] | None = None,
        agent_segments: list[int] | None = None,
        **_: Any,
    ) -> list[float]:
        """Score each completion; with an agent run by the runtime (``agent_answer``), the
        agent's answer is scored instead of the completion's text, a failed episode scores 0,
        the share of failed episodes is logged as ``agent_failed`` and the mean number of tool
        results per episode as ``tools/call_frequency`` and the mean segments per episode (one
        more per rewrite of its conversation) as ``agent_segments``."""
        if log_metric is not None:
            _log_episode_metrics(
                log_metric, len(completions), agent_failure, agent_tool_calls, agent_segments
            )
        scores: list[float] = []
        per_function: dict[str, list[float]] = defaultdict(list)
        totals: dict[str, float] = defaultdict(float)
        counts: dict[str, int] = defaultdict(int)
        for i, completion in enumerate(completions):
            if agent_failure is not None and agent_failure[i] is not None:
                scores.append(0.0)
                for function in self.spec.functions:
                    per_function[f"{REWARD_COLUMN}{function.name}"].append(0.0)
                continue
            result = self._score(
                i,
                completion_text(completion) if agent_answer is None else agent_answer[i],
                str(ground_truth[i]),
                data_source,
                extra_info,
                agent_extra,
            )
            scores.append(float(result.score))
            for function in self.spec.functions:
                key = f"{REWARD_COLUMN}{function.name}"
                per_function[key].append(float(result.metrics[key]))
            for key, value in result.metrics.items():
                if key not in self._repeated:
                    totals[key] += float(value)
                    counts[key] += 1
        if log_metric is not None:
            for key, total in totals.items():
                log_metric(key, total / counts[key])
        if log_extra is not None:
            for key, values in per_function.items():
                log_extra(key, values)
        return scores

    def _score(
        self,
        i: int,
        answer: str,
        ground_truth: str,
        data_source: list[str] | None,
        extra_info: list[dict[str, Any] | None] | None,
        agent_extra: list[dict[str, Any]] | None,
    ) -> Any:
        """Score row ``i``'s answer; its ``extra_info`` with what the agent added to it, and its
        ``index`` there (when a whole number) as the row the reward is told."""
        info = dict(extra_info[i] or {}) if extra_info is not None else {}
        row = info.get("index", i)
        if agent_extra is not None:
            info.update(agent_extra[i] or {})
        return self.spec.score(
            data_source[i] if data_source is not None else "",
            answer,
            ground_truth,
            info,
            row=row if isinstance(row, int) else i,
        )


def _log_episode_metrics(
    log_metric: Callable[[str, float], None],
    episodes: int,
    failures: list[str | None] | None,
    tool_calls: list[int] | None,
    segments: list[int] | None,
) -> None:
    """Log, for the agent's episodes, the share that failed and the mean tool results and
    segments per episode (each only when the rollout reported it)."""
    if failures is not None:
        log_metric("agent_failed", sum(f is not None for f in failures) / episodes)
    if tool_calls is not None:
        log_metric("tools/call_frequency", sum(tool_calls) / episodes)
    if segments is not None:
        log_metric("agent_segments", sum(segments) / episodes)


def reward_to_trl(spec: RewardSpec | None) -> TrlReward | None:
    """Wrap ``spec`` for TRL; a job without a reward (SFT, DPO) has nothing to wrap.

    The user's functions do not run here: the core has scored the training rows with each of
    them, in a child process with a time limit. While training, a function that returns
    ``None`` is refused as in the checks (TRL would skip it as "not applicable"; the job means
    the same on every engine).
    """
    return None if spec is None else TrlReward(spec)


def _metric_name(name: str) -> str:
    """A reward name fit for a metric key: ``rewards.py:score`` -> ``score``."""
    return name.rsplit(":", 1)[-1].rsplit("/", 1)[-1] or "reward"
