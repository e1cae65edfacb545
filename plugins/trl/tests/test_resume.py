"""A resumed run shuffles each epoch as the run it continues (``replay_shuffles``), with TRL's
own sampler: GRPO's ``RepeatSampler`` draws each epoch's order from a generator of its own,
which no checkpoint holds."""

from __future__ import annotations

import types
from typing import Any

from aworld_train.engine.hf import replay_shuffles


def _trainer() -> Any:
    """An object with the trainer's sampler factory, as GRPO's makes its sampler."""
    from trl.trainer.utils import RepeatSampler

    trainer = types.SimpleNamespace()
    trainer._get_train_sampler = lambda *_: RepeatSampler(
        list(range(6)), mini_repeat_count=2, batch_size=3, seed=42
    )
    replay_shuffles(trainer)
    return trainer


def _epochs(sampler: Any, first: int, last: int) -> list[list[int]]:
    """The order of each epoch from ``first`` to ``last``, the epoch set as the trainer sets it."""
    orders = []
    for epoch in range(first, last + 1):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def test_a_sampler_made_anew_at_epoch_2_shuffles_as_the_one_that_ran_on() -> None:
    ran_on = _epochs(_trainer()._get_train_sampler(), 0, 3)
    resumed = _epochs(_trainer()._get_train_sampler(), 2, 3)
    assert resumed == ran_on[2:]
    assert ran_on[0] != ran_on[2], "the epochs are shuffled apart"


def test_the_order_of_a_run_that_never_stopped_is_trls_own() -> None:
    from trl.trainer.utils import RepeatSampler

    plain = RepeatSampler(list(range(6)), mini_repeat_count=2, batch_size=3, seed=42)
    assert _epochs(_trainer()._get_train_sampler(), 0, 3) == [list(plain) for _ in range(4)]
