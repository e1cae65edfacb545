"""Two changes to ms-swift 4.6's GRPO trainer, applied in the training process.

Evaluation decodes greedily. swift generates the test set's completions as it generates the
training rollouts, sampled at the training temperature, so its evaluation reward would vary from
one evaluation of the same model to the next; the evaluation this engine promises scores one
greedy completion per test row (``num_generations_eval`` 1), as ``aworld-train eval`` does.

An empty completion no longer stops training. When the policy's first generated token is the
end of turn, ms-swift keeps an empty completion whose labels are all masked. Its collate step
(``collate_to_grpo_micro_batch``) then measures the completion region of that row from position
0, asks the model for one more logit than the sequence has, and training stops with ``Size does
not match at dimension 1``. Small models stop at once often enough to hit this within a few
steps. The wrapper lets such a row count as one completion token (its last) while swift sizes the
batch, then clears that row's completion mask, so the empty completion still gets its reward
but adds nothing to the loss (swift divides by the mask sum clamped at 1).
"""

from __future__ import annotations

from typing import Any

_PATCHED = "_aworld_train_empty_completion_fix"


def apply() -> None:
    """Make both changes, once per process."""
    greedy_evaluation()
    keep_empty_completions()


def greedy_evaluation() -> None:
    """Wrap swift's rollout settings so that evaluation rollouts decode greedily (temperature
    0, which swift's generation turns into ``do_sample=False``)."""
    from swift.rlhf_trainers.rollout_mixin import RolloutTrainerMixin

    original = RolloutTrainerMixin._get_request_config
    if getattr(original, _PATCHED, False):
        return

    def request_config(self: Any) -> Any:
        config = original(self)
        if not self.model.training:
            config.temperature = 0
        return config

    setattr(request_config, _PATCHED, True)
    RolloutTrainerMixin._get_request_config = request_config


def keep_empty_completions() -> None:
    """Wrap swift's GRPO collate."""
    from swift.rlhf_trainers import grpo_trainer

    original = grpo_trainer.collate_to_grpo_micro_batch
    if getattr(original, _PATCHED, False):
        return

    def collate(samples: list[Any], template: Any, **kwargs: Any) -> Any:
        empty = []
        for index, sample in enumerate(samples):
            labels = sample.encoded.get("labels")
            if labels is not None and all(label == -100 for label in labels):
                empty.append(index)
                labels[-1] = sample.encoded["input_ids"][-1]
        try:
            model_inputs, batch = original(samples, template, **kwargs)
        finally:
            for index in empty:
                samples[index].encoded["labels"][-1] = -100
        for index in empty:
            batch.completion_mask[index] = 0
        return model_inputs, batch

    setattr(collate, _PATCHED, True)
    grpo_trainer.collate_to_grpo_micro_batch = collate
