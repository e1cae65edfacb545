"""The engine conformance suite, run against the verl engine.

On a machine without a GPU the suite's job goes to the CPU, where the suite's tiny model (heads
16 wide, which vLLM's CPU build cannot run) stops ``train`` at once with a ``TrainingError``, and
the run must be marked failed; ``test_cpu_training`` trains on the CPU with models it can run.
"""

from __future__ import annotations

from pathlib import Path

from aworld_train.errors import TrainingError
from aworld_train.engine.testing import EngineConformance
from aworld_train_verl.gpus import visible_gpus


class TestVerlConformance(EngineConformance):
    engine_name = "verl"
    # One Ray CPU per reward and agent-loop worker keeps a GPU run light.
    engine_section = {
        "reward": {"num_workers": 1},
        "actor_rollout_ref": {"rollout": {"agent": {"num_workers": 1}}},
    }
    train_error = TrainingError if visible_gpus() == 0 else None

    def cut_short_checkpoint(self, run: Path, step: int) -> Path:
        """VeRL names a checkpoint in ``latest_checkpointed_iteration.txt`` once it is whole:
        a stop while it saves leaves a ``global_step_N`` folder the file does not name."""
        partial = run / "checkpoints" / f"global_step_{step}" / "actor"
        partial.mkdir(parents=True)
        return partial.parent
