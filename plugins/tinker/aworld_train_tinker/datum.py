"""A training example as the service takes it."""

from __future__ import annotations

from typing import Any


def datum(tokens: list[int], **per_token: list[float]) -> Any:
    """A ``Datum`` predicting ``tokens[1:]`` from ``tokens[:-1]``, each per-token input shifted
    alike (``weights`` for ``cross_entropy``; ``logprobs`` and ``advantages`` for the RL
    losses)."""
    from tinker import types

    return types.Datum(
        model_input=types.ModelInput.from_ints(tokens[:-1]),
        loss_fn_inputs={"target_tokens": tokens[1:], **{k: v[1:] for k, v in per_token.items()}},
    )
