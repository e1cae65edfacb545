"""A failure inside ms-swift while it trains, which no check can see, ends ``aworld-train train``
as ``check`` ends: one ``error:`` line, exit 1, and a run marked failed."""

from __future__ import annotations

from aworld_train.testing.train_failures import TrainFailureSuite


class TestSwiftTrainFailures(TrainFailureSuite):
    engine_name = "swift"
    # ms-swift's arguments fail to make their output folder.
    raised_from = r"aworld_train_swift/\w+\.py"
    traceback_holds = ("aworld_train_swift/training.py", "/swift/")
