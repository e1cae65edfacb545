"""While a rollout runs, what lived before it is out of the garbage collector's full
collections; afterwards everything is collectable again, as before."""

from __future__ import annotations

import gc

from aworld_train.runtime._rollout import heap_frozen


def test_the_heap_is_frozen_only_while_a_rollout_runs() -> None:
    assert gc.get_freeze_count() == 0
    with heap_frozen():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_a_process_that_froze_its_own_objects_keeps_them_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        with heap_frozen():
            pass
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
