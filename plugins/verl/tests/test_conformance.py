"""The engine conformance suite, run against the verl engine.

VeRL trains only on GPUs: on a machine without one, ``train`` must fail at once with a
``TrainingError`` (the GPU preflight), and the run must be marked failed.
"""

from __future__ import annotations

from aworld_train.errors import TrainingError
from aworld_train.testing.conformance import EngineConformance

from aworld_train_verl.gpus import visible_gpus


class TestVerlConformance(EngineConformance):
    engine_name = "verl"
    # One Ray CPU per reward and agent-loop worker keeps a GPU run light.
    engine_section = {
        "reward": {"num_workers": 1},
        "actor_rollout_ref": {"rollout": {"agent": {"num_workers": 1}}},
    }
    train_error = TrainingError if visible_gpus() == 0 else None
