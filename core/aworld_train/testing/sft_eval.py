"""SFT's evaluation, as every engine that trains SFT keeps it: a test set with ``eval_steps`` is
scored with the job's reward, as GRPO's is, beside the engine's ``eval_loss``; a job without a
reward keeps the loss only; two CPU processes score the test set on rank 0 alone.

In an engine's own tests (its ``conftest.py`` gives the ``job`` fixture of
:func:`aworld_train.testing.fixtures.repeat_digit_job`)::

    from aworld_train.testing.sft_eval import SftEvalSuite

    class TestMyEngineSftEval(SftEvalSuite):
        engine_name = "mine"
        engine_section = {}                                     # the SFT job's section
        two_processes = {"mine": {"use_cpu": True}}             # config for two CPU processes

        def assert_ran_in_two_processes(self, final, run_dir):
            assert final["num_processes"] == 2
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from aworld_train.trainer import AgentTrainer
from aworld_train.testing.fixtures import manifest, read_jsonl

# The test rows: digits the reward's calls can be told apart by; eval_limit keeps the first 3.
TEST_DIGITS = [0, 7, 8, 2, 4]
EVAL_LIMIT = 3


def eval_entries(run_dir: Path) -> list[dict[str, Any]]:
    """The run's evaluations (the metrics entries with ``eval_loss``), asserting one at step 1."""
    evals = [m for m in read_jsonl(run_dir / "metrics.jsonl") if "eval_loss" in m]
    assert [m["step"] for m in evals] == [1]
    return evals


def scored_ground_truths(folder: Path) -> list[dict[str, Any]]:
    """The calls the job's reward file (``rewards.py:score``) recorded, in order, asserting
    their ground truths are the first :data:`EVAL_LIMIT` test rows', once each."""
    calls = read_jsonl(folder / "calls.jsonl")
    assert [call["ground_truth"] for call in calls] == [str(d) for d in TEST_DIGITS[:EVAL_LIMIT]]
    return calls


class SftEvalSuite:
    """SFT's evaluation on one engine. Subclass it and set :attr:`engine_name`."""

    #: The engine's name, as the job's ``train_engine_name``.
    engine_name: ClassVar[str] = ""
    #: The engine's config section for the SFT job.
    engine_section: ClassVar[dict[str, Any]] = {}
    #: Config keys (the engine's section included) that make the job train in two CPU processes.
    two_processes: ClassVar[dict[str, Any]] = {}

    def assert_ran_in_two_processes(self, final: dict[str, Any], run_dir: Path) -> None:
        """What the engine's run shows of its two processes: ``final`` is ``train()``'s result."""
        raise NotImplementedError

    def one_step_sft_with_test_set(self, job: dict[str, Any]) -> None:
        """One SFT step, evaluated after it, on a test set of :data:`TEST_DIGITS`."""
        rows = [json.dumps({"prompt": f"Repeat: {d}", "ground_truth": str(d)}) for d in TEST_DIGITS]
        (job["base_dir"] / "test.jsonl").write_text("\n".join(rows) + "\n")
        job["test_dataset"] = "test.jsonl"
        job["config"] = dict(
            job["config"],
            algorithm="sft",
            max_steps=1,
            eval_steps=1,
            save_steps=1,
            eval_limit=EVAL_LIMIT,
            **{self.engine_name: dict(self.engine_section)},
        )
        job["config"].pop("num_generations")

    @pytest.mark.slow
    def test_one_sft_step_with_eval_steps_logs_the_reward_beside_the_loss(
        self, job: dict[str, Any], tmp_path: Path
    ) -> None:
        self.one_step_sft_with_test_set(job)
        job["reward_func"] = ["rewards.py:score", "rewards.py:length"]
        trainer = AgentTrainer(**job)
        (tmp_path / "calls.jsonl").unlink(missing_ok=True)  # the checks' calls
        final = trainer.train()
        run_dir = trainer.run_dir.path

        entry = eval_entries(run_dir)[0]
        assert {"eval_reward", "eval_score", "eval_length"} <= entry.keys()
        assert entry["eval_reward"] == pytest.approx(entry["eval_score"] + entry["eval_length"])
        assert {"eval_reward", "eval_score", "eval_loss"} <= final.keys()
        assert {"eval_reward", "eval_score"} <= manifest(run_dir)["final_metrics"].keys()
        # The reward scored the first eval_limit test rows, once each.
        calls = scored_ground_truths(tmp_path)
        assert entry["eval_score"] == pytest.approx(
            sum(call["solution"].strip() == call["ground_truth"] for call in calls) / EVAL_LIMIT
        )

    @pytest.mark.slow
    def test_sft_without_a_reward_logs_the_loss_only(self, job: dict[str, Any]) -> None:
        self.one_step_sft_with_test_set(job)
        del job["reward_func"]
        trainer = AgentTrainer(**job)
        trainer.train()

        entry = eval_entries(trainer.run_dir.path)[0]
        assert not [key for key in entry if key.startswith("eval_") and "reward" in key]
        assert "eval_score" not in entry

    @pytest.mark.slow
    def test_two_cpu_processes_score_the_test_set_on_rank_0(
        self, job: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        # CPU processes on any machine (see the engine's own two-process training test).
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
        self.one_step_sft_with_test_set(job)
        job["config"] = dict(job["config"], resources={"gpus_per_node": 2}, **self.two_processes)
        trainer = AgentTrainer(**job)
        (tmp_path / "calls.jsonl").unlink(missing_ok=True)  # the checks' calls
        final = trainer.train()
        run_dir = trainer.run_dir.path

        self.assert_ran_in_two_processes(final, run_dir)
        assert {"eval_reward", "eval_score"} <= eval_entries(run_dir)[0].keys()
        # Rank 0 alone scored the rows: each once.
        scored_ground_truths(tmp_path)
