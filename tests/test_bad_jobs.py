"""The shared bad-job cases, run against the toy engine: the core's own checks refuse each."""

from __future__ import annotations

from aworld_train.testing.bad_jobs import BadJobSuite


class TestToyBadJobs(BadJobSuite):
    engine_name = "toy"
    model_required = False  # the toy engine trains a table, not a model
