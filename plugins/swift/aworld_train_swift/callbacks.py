"""The callbacks this engine adds to swift's trainer: metrics under the common names, rollout
samples and, for a job without ``eval_steps``, one evaluation at the end; for SFT and DPO with
a test set and a reward, each evaluation also scores the test set with the reward.

swift builds every callback named in its ``callbacks`` argument as ``cls(args, trainer)``, so
this one reads the GRPO trainer's own record of its last rollout (``trainer._logs``: the
completions, each reward function's scores), which swift keeps for its ``log_completions``
table, and the last user message of each prompt, which it records beside it.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import append_samples
from aworld_train.engine.hf import replay_shuffles, score_evaluations, trainer_callback

from aworld_train_swift.reward import ORM_PREFIX

if TYPE_CHECKING:
    from aworld_train.engine.hf import LogFn, StartFn

    from aworld_train_swift.config import SwiftConfig
    from aworld_train_swift.reward import SwiftReward

# The name of this engine's callback in swift's ``callbacks_map``.
CALLBACK = "aworld_train_run"
# The name of the callback that scores SFT's and DPO's test set with the job's reward.
REWARD_EVAL_CALLBACK = "aworld_train_reward_eval"
# swift's mean of one reward function over the evaluation: eval_rewards/<name>/mean.
_EVAL_REWARD = re.compile(r"^eval_rewards/(?P<name>.+)/mean$")


def common_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` with swift's evaluation reward means under the common names:
    ``eval_rewards/<name>/mean`` becomes ``eval_<name>`` (``eval_reward`` keeps its name)."""
    renamed = {}
    for key, value in metrics.items():
        match = _EVAL_REWARD.match(key)
        renamed[f"eval_{match['name']}" if match else key] = value
    return renamed


def run_callback(
    base: type,
    on_start: StartFn,
    on_log: LogFn,
    *,
    run_dir: Path,
    log_samples: int,
    end_only_eval: bool,
) -> type:
    """A subclass of swift's ``TrainerCallback`` that reports each logged step, keeps rollout
    samples and moves evaluation to the end.

    :param on_start: called with the total number of steps and the steps already done.
    :param on_log: called with the step and its metrics, under the common names.
    :param run_dir: where ``samples.jsonl`` goes.
    :param log_samples: rollout samples kept per logged training step (0: none).
    :param end_only_eval: evaluate once, after the last step (the job sets no ``eval_steps``).
    """
    metrics = trainer_callback(
        base, on_start, lambda step, logged: on_log(step, common_metrics(logged))
    )

    class RunCallback(metrics):  # type: ignore[misc, valid-type]
        """Metrics, rollout samples and the end-only evaluation of one run."""

        def __init__(self, args: Any, trainer: Any) -> None:
            super().__init__(args, trainer)
            # swift builds its callbacks before training: the sampler is made afterwards.
            replay_shuffles(trainer)  # a resumed run shuffles each epoch as the run it continues

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            super().on_train_begin(args, state, control, **kwargs)
            if log_samples:
                record_user_prompts(self.trainer)
            if end_only_eval:
                # The trainer evaluates every eval_steps and after the last step.
                state.eval_steps = state.max_steps

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any
        ) -> None:
            super().on_log(args, state, control, logs=logs, **kwargs)
            training = logs is not None and "loss" in logs
            if log_samples and training and state.is_world_process_zero:
                rows = rollout_samples(self.trainer, log_samples)
                if rows:
                    append_samples(run_dir, state.global_step, rows)

    return RunCallback


def scores_test_set(config: SwiftConfig, reward: SwiftReward | None) -> bool:
    """Whether each evaluation of this run scores the test set with the job's reward through
    :func:`reward_eval_callback`: SFT and DPO with a test set and a reward (GRPO's own
    evaluation already scores it; without a reward, ``eval_loss`` is all there is)."""
    return (
        reward is not None
        and config.algorithm != "grpo"
        and bool(config.arguments.get("val_dataset"))
    )


def reward_eval_callback(base: type, config: SwiftConfig, reward: SwiftReward) -> type:
    """A subclass of swift's ``TrainerCallback`` that makes every evaluation of its trainer
    also score the test set with ``reward``: ``eval_reward`` and ``eval_<name>`` per function
    (the names GRPO's evaluation logs) beside swift's ``eval_loss``, from rank 0
    (:func:`~aworld_train.engine.score_evaluations`)."""
    rows = canonical_test_rows(Path(config.arguments["val_dataset"][0]))
    # swift's GRPO logs each function under its ORM's class name: the same names here.
    names = {
        function.name: name[len(ORM_PREFIX) :]
        for function, name in zip(reward.spec.functions, reward.names, strict=True)
    }

    class RewardEvalCallback(base):  # type: ignore[misc, valid-type]
        """Scores the test set with the job's reward at each evaluation."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            # swift builds callbacks before its trainer is whole: wrap it once it is.
            if not getattr(self, "wrapped", False):
                score_evaluations(
                    self.trainer,
                    rows,
                    system_prompt=config.arguments.get("system") or None,
                    reward=reward.spec,
                    max_new_tokens=config.eval_max_tokens,
                    names=names,
                )
                self.wrapped = True

    return RewardEvalCallback


def canonical_test_rows(path: Path) -> list[dict[str, Any]]:
    """The canonical rows of a test file :func:`~aworld_train_swift.dataset.convert_dataset`
    wrote for SFT or DPO: the prompt without the ground truth appended as the reply (one user
    message as its text), ``ground_truth``, ``data_source`` and ``extra_info`` decoded."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        messages = record["messages"][:-1]
        single = len(messages) == 1 and messages[0]["role"] == "user"
        extra_info = record.get("extra_info")
        rows.append(
            {
                "prompt": messages[0]["content"] if single else messages,
                "ground_truth": record.get("ground_truth", record.get("solution")),
                "data_source": record.get("data_source") or "",
                "extra_info": json.loads(extra_info) if isinstance(extra_info, str) else extra_info,
            }
        )
    return rows


# The trainer attribute holding the last user message of each prompt in ``_logs["prompt"]``.
_USER_PROMPTS = "_aworld_train_user_prompts"


def record_user_prompts(trainer: Any) -> None:
    """Keep, beside swift's ``_logs["prompt"]`` (each prompt as the chat template renders it,
    system prompt included), the text of each prompt's last user message: what
    ``samples.jsonl`` stores as ``prompt`` on every engine.

    swift fills ``_logs["prompt"]`` from ``_apply_chat_template_to_messages_list``, once per
    rollout; the wrapper on this trainer records the messages' user text in a deque of the same
    length, so the two stay aligned.
    """
    from collections import deque

    original = getattr(trainer, "_apply_chat_template_to_messages_list", None)
    logs = getattr(trainer, "_logs", None)
    if original is None or not logs or hasattr(trainer, _USER_PROMPTS):
        return
    prompts: deque[str] = deque(maxlen=logs["prompt"].maxlen)
    setattr(trainer, _USER_PROMPTS, prompts)

    def rendered(messages_list: Any) -> Any:
        prompts.extend(user_text(messages) for messages in messages_list)
        return original(messages_list)

    trainer._apply_chat_template_to_messages_list = rendered


def user_text(messages: list[dict[str, Any]]) -> str:
    """The text of the last user message of a chat (a multimodal message's text parts)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return "".join(part.get("text") or "" for part in content if isinstance(part, dict))
            return str(content or "")
    return ""


def rollout_samples(trainer: Any, count: int) -> list[dict[str, Any]]:
    """The first ``count`` samples of the trainer's last rollout: prompt (the last user
    message's text, as the trl engine keeps it), completion, the weighted reward and each
    reward function's score (NaN where a function gave none)."""
    logs = getattr(trainer, "_logs", None)
    if not logs or not logs["prompt"]:
        return []
    users = getattr(trainer, _USER_PROMPTS, None)
    prompts = (
        list(users)
        if users is not None and len(users) == len(logs["prompt"])
        else list(logs["prompt"])
    )
    names = list(trainer.reward_func_names)
    weights = trainer.reward_weights.tolist()
    rows = []
    for index in range(min(count, len(logs["prompt"]))):
        rewards = {name: float(logs["rewards"][name][index]) for name in names}
        # swift's total: the weighted sum, a function's missing score counting 0.
        total = sum(
            weight * score
            for weight, score in zip(weights, rewards.values())
            if not math.isnan(score)
        )
        rows.append(
            {
                "prompt": prompts[index],
                "completion": logs["completion"][index],
                "reward": total,
                "rewards": rewards,
            }
        )
    return rows
