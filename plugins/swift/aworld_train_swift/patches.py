"""A fix for one ms-swift 4.6 GRPO failure, applied in the training process.

When the policy's first generated token is the end of turn, ms-swift keeps an empty completion
whose labels are all masked. Its collate step (``collate_to_grpo_micro_batch``) then measures
the completion region of that row from position 0, asks the model for one more logit than the
sequence has, and training stops with ``Size does not match at dimension 1``. Small models stop
at once often enough to hit this within a few steps.

The wrapper lets such a row count as one completion token (its last) while swift sizes the
batch, then clears that row's completion mask, so the empty completion still gets its reward
but adds nothing to the loss (swift divides by the mask sum clamped at 1).
"""

from __future__ import annotations

from typing import Any

_PATCHED = "_aworld_train_empty_completion_fix"


def apply() -> None:
    """Wrap swift's GRPO collate once per process."""
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
