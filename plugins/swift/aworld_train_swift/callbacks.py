"""The callback this engine adds to swift's trainer: metrics under the common names, rollout
samples and, for a job without ``eval_steps``, one evaluation at the end.

swift builds every callback named in its ``callbacks`` argument as ``cls(args, trainer)``, so
this one reads the GRPO trainer's own record of its last rollout (``trainer._logs``: the
completions, each reward function's scores), which swift keeps for its ``log_completions``
table, and the last user message of each prompt, which it records beside it.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from aworld_train.engine import append_samples, trainer_callback

if TYPE_CHECKING:
    from pathlib import Path

    from aworld_train.engine import LogFn, StartFn

# The name of this engine's callback in swift's ``callbacks_map``.
CALLBACK = "aworld_train_run"
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
    metrics = trainer_callback(base, on_start,
                               lambda step, logged: on_log(step, common_metrics(logged)))

    class RunCallback(metrics):  # type: ignore[misc, valid-type]
        """Metrics, rollout samples and the end-only evaluation of one run."""

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            super().on_train_begin(args, state, control, **kwargs)
            if log_samples:
                record_user_prompts(self.trainer)
            if end_only_eval:
                # The trainer evaluates every eval_steps and after the last step.
                state.eval_steps = state.max_steps

        def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None,
                   **kwargs: Any) -> None:
            super().on_log(args, state, control, logs=logs, **kwargs)
            training = logs is not None and "loss" in logs
            if log_samples and training and state.is_world_process_zero:
                rows = rollout_samples(self.trainer, log_samples)
                if rows:
                    append_samples(run_dir, state.global_step, rows)

    return RunCallback


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
                return "".join(part.get("text") or "" for part in content
                               if isinstance(part, dict))
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
    prompts = list(users) if users is not None and len(users) == len(logs["prompt"]) \
        else list(logs["prompt"])
    names = list(trainer.reward_func_names)
    weights = trainer.reward_weights.tolist()
    rows = []
    for index in range(min(count, len(logs["prompt"]))):
        rewards = {name: float(logs["rewards"][name][index]) for name in names}
        # swift's total: the weighted sum, a function's missing score counting 0.
        total = sum(weight * score for weight, score in zip(weights, rewards.values())
                    if not math.isnan(score))
        rows.append({"prompt": prompts[index], "completion": logs["completion"][index],
                     "reward": total, "rewards": rewards})
    return rows
