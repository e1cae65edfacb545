"""The resume half of the conformance suite: a run stopped mid-step and resumed ends where the
same run without the stop ends. :class:`~aworld_train.testing.conformance.EngineConformance`
inherits it, so every engine runs it.

Through the real CLI, a GRPO job of :attr:`ResumeConformance.resume_steps` steps with a
checkpoint halfway trains once without a stop; then runs of the same job are stopped in the
first reward call of the step after the checkpoint, by a signal to the run's whole process
group (SIGKILL, which lets nothing be flushed; SIGINT, as a terminal's Ctrl-C), and once with a
checkpoint cut short while it was being written, and are resumed with ``--resume``. What the engine promises (its ``resume_support`` hook) decides what must hold:

- ``exact``: the metrics of the steps after the checkpoint, and the final weights, equal the
  uninterrupted run's within :attr:`ResumeConformance.resume_tolerance` (0 on a CPU, where the
  engines here are deterministic);
- ``continued``: the resumed run trains the remaining steps to a completed run;
- ``none``: ``--resume`` is refused in one line naming the engine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

# The resume job's reward file. `score` grades a completion by its characters, so that rewards
# differ within a group and every step moves the weights. When `stop.json` exists beside it and
# a run under the run path it names has logged the step it names, it removes the file and sends
# the signal it names to the process group of the run's process (its manifest's pid), in its
# first reward call of the next step: as a terminal sends Ctrl-C, and as a machine that dies
# leaves no process of the run, wherever the engine calls its rewards.
_REWARDS = """
import json, os, signal
from pathlib import Path

HERE = Path(__file__).parent


def score(data_source, solution_str, ground_truth, extra_info=None):
    stop = HERE / "stop.json"
    if stop.exists():
        order = json.loads(stop.read_text())
        for metrics in Path(order["runs"]).glob("*/metrics.jsonl"):
            steps = [json.loads(line).get("step") for line in metrics.read_text().splitlines()]
            if order["after_step"] in steps:
                stop.unlink()
                pid = json.loads((metrics.parent / "manifest.json").read_text())["pid"]
                os.killpg(os.getpgid(pid), getattr(signal, order["signal"]))
    return sum(ord(c) for c in solution_str) % 5 / 4
"""

# Metrics that measure the machine, not the training: never compared.
_TIMINGS = ("time", "runtime", "seconds", "per_second", "flos")
# Summaries of the whole run, which a resumed run adds up from the same values in another
# order: compared within this much more than the per-step metrics.
_SUMMED = {"train_loss": 1e-6}


class ResumeConformance:
    """Resume tests every engine inherits through ``EngineConformance``."""

    engine_name: ClassVar[str] = ""
    engine_section: ClassVar[dict[str, Any]] = {}
    train_error: ClassVar[type[BaseException] | None] = None
    #: Steps of the resume job; its checkpoint is at half of them (and an epoch ends there).
    resume_steps: ClassVar[int] = 4
    #: How far a resumed run's metrics and weights may be from the uninterrupted run's, for an
    #: engine whose ``resume_support`` is ``exact`` (absolute, per value).
    resume_tolerance: ClassVar[float] = 0.0

    @pytest.fixture(scope="class")
    @classmethod
    def resume_job(
        cls, resume_support: str, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
    ) -> Path:
        """``job.yaml`` of the resume job on the suite's tiny model: 2 prompts a step and 4
        rows, so that an epoch ends at every second step, the checkpoint's among them."""
        import yaml

        folder = tmp_path_factory.mktemp("resume")
        rows = [{"prompt": f"Repeat: {d}", "ground_truth": str(d)} for d in (3, 1, 4, 5)]
        (folder / "train.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        (folder / "rewards.py").write_text(_REWARDS)
        config: dict[str, Any] = {
            "algorithm": "grpo",
            "model": str(tiny_model),
            "max_steps": cls.resume_steps,
            "save_steps": cls.resume_steps // 2,
            "batch_size": 4,
            "num_generations": 2,
            "learning_rate": 1e-2,
            "max_completion_length": 4,
            "logging_steps": 1,
            "precision": "fp32",
        }
        if cls.engine_section:
            config[cls.engine_name] = dict(cls.engine_section)
        job = {
            "engine": cls.engine_name,
            "agent": {"name": "resume", "system_prompt": "Answer with the digit."},
            "train_dataset": "train.jsonl",
            "reward": "rewards.py:score",
            "config": config,
        }
        (folder / "job.yaml").write_text(yaml.safe_dump(job))
        return folder / "job.yaml"

    @pytest.fixture(scope="class")
    @classmethod
    def resume_support(cls) -> str:
        """What the engine promises of a resumed run; skips where this machine cannot train."""
        from aworld_train import plugins

        if cls.train_error is not None:
            pytest.skip(f"engine {cls.engine_name} cannot train on this machine")
        algorithm = getattr(cls, "common_config", {}).get("algorithm", "grpo")
        if algorithm != "grpo":  # the runs are stopped from their reward calls
            pytest.skip(f"engine {cls.engine_name}'s tiny job trains {algorithm}, not grpo")
        answer = plugins.create_manager(cls.engine_name, None).hook.resume_support()
        return str(answer or "exact")

    @pytest.fixture(scope="class")
    @classmethod
    def uninterrupted(cls, resume_job: Path, resume_support: str) -> Path:
        """The run directory of the resume job trained without a stop."""
        return cls._completed(cls._train(resume_job, "uninterrupted"))

    @pytest.fixture(scope="class")
    @classmethod
    def killed(cls, resume_job: Path, resume_support: str) -> Path:
        """A run of the resume job killed with SIGKILL in the step after its checkpoint, and
        an untouched copy of it under ``killed-copy`` for a second resume."""
        run = cls._stopped(resume_job, "killed", "SIGKILL")
        shutil.copytree(run.parent, run.parent.with_name("killed-copy"))
        return run

    @pytest.mark.slow
    def test_a_killed_run_resumes_where_the_run_without_the_kill_ends(
        self, resume_job: Path, resume_support: str, uninterrupted: Path, killed: Path
    ) -> None:
        self._resume_and_compare(resume_job, resume_support, killed, uninterrupted)

    @pytest.mark.slow
    def test_a_run_stopped_with_ctrl_c_resumes_where_the_run_without_it_ends(
        self, resume_job: Path, resume_support: str, uninterrupted: Path
    ) -> None:
        stopped = self._stopped(resume_job, "ctrl-c", "SIGINT")
        assert json.loads((stopped / "manifest.json").read_text())["status"] == "interrupted"
        self._resume_and_compare(resume_job, resume_support, stopped, uninterrupted)

    @pytest.mark.slow
    def test_a_checkpoint_cut_short_is_passed_over_for_the_last_whole_one(
        self, resume_job: Path, resume_support: str, uninterrupted: Path, killed: Path
    ) -> None:
        run = killed.parent.with_name("killed-copy") / killed.name
        partial = self.cut_short_checkpoint(run, self.resume_steps // 2 + 1)
        output = self._resume_and_compare(resume_job, resume_support, run, uninterrupted)
        if resume_support != "none":
            assert f"{partial} was cut short while being saved" in output, output

    def cut_short_checkpoint(self, run: Path, step: int) -> Path:
        """Leave in ``run`` what a stop while the checkpoint of ``step`` was being written
        leaves: a Hugging Face trainer's ``checkpoint-N`` folder with part of the last whole
        checkpoint's files, cut in half, and without ``trainer_state.json`` (written last). An
        engine that saves checkpoints otherwise overrides it.

        :returns: the folder.
        """
        checkpoints = run / "checkpoints"
        whole = checkpoints / f"checkpoint-{self.resume_steps // 2}"
        partial = checkpoints / f"checkpoint-{step}"
        shutil.copytree(whole, partial, ignore=shutil.ignore_patterns("trainer_state.json"))
        for path in partial.rglob("*.safetensors"):
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
        return partial

    def _resume_and_compare(
        self, job: Path, support: str, stopped: Path, uninterrupted: Path
    ) -> str:
        """Resume ``stopped`` and hold the resumed run to what the engine promises.

        :returns: what the resume wrote to stdout and stderr.
        """
        done = self._cli(job, stopped.parent, "--resume", str(stopped))
        output = done.stdout + done.stderr
        if support == "none":
            lines = done.stderr.strip().splitlines()
            assert done.returncode == 2 and len(lines) == 1, output
            assert f"engine {self.engine_name} cannot resume a run" in lines[0], output
            return output
        assert done.returncode == 0, output[-4000:]
        resumed = next(
            path.parent
            for path in stopped.parent.glob("*/manifest.json")
            if json.loads(path.read_text()).get("resumed_from") == str(stopped)
        )
        self._completed(resumed)
        after = range(self.resume_steps // 2 + 1, self.resume_steps + 1)
        theirs, ours = _steps(uninterrupted, after), _steps(resumed, after)
        assert sorted(ours) == list(after), f"the resumed run logged steps {sorted(ours)}"
        if support == "exact":
            for step in after:
                _assert_close(ours[step], theirs[step], self.resume_tolerance, f"step {step}")
            _assert_same_weights(resumed / "model", uninterrupted / "model", self.resume_tolerance)
        return output

    @classmethod
    def _stopped(cls, job: Path, name: str, signal: str) -> Path:
        """A run of ``job`` under the run path ``name``, stopped with ``signal`` in the first
        reward call of the step after its checkpoint."""
        runs = job.parent / name / "runs"
        order = {"runs": str(runs), "after_step": cls.resume_steps // 2, "signal": signal}
        (job.parent / "stop.json").write_text(json.dumps(order))
        done = cls._cli(job, runs)
        assert not (job.parent / "stop.json").exists(), "the run was not stopped"
        assert done.returncode != 0, done.stdout + done.stderr
        (run,) = [path.parent for path in runs.glob("*/manifest.json")]
        return run

    @classmethod
    def _train(cls, job: Path, name: str) -> Path:
        runs = job.parent / name / "runs"
        done = cls._cli(job, runs)
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        (run,) = [path.parent for path in runs.glob("*/manifest.json")]
        return run

    @classmethod
    def _cli(cls, job: Path, runs: Path, *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "aworld_train.cli", "train", str(job)]
        return subprocess.run(
            [*command, "--run-path", str(runs), *args],
            capture_output=True,
            text=True,
            cwd=job.parent,
            timeout=900,
            start_new_session=True,  # a group of its own, which a stop signals whole
        )

    @staticmethod
    def _completed(run: Path) -> Path:
        status = json.loads((run / "manifest.json").read_text())["status"]
        assert status == "completed", f"{run} ended {status}"
        return run


def _steps(run: Path, steps: range) -> dict[int, dict[str, Any]]:
    """The metrics ``run`` logged at each of ``steps``, merged per step, without timings."""
    merged: dict[int, dict[str, Any]] = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("step") in steps:
            kept = {k: v for k, v in record.items() if not any(t in k for t in _TIMINGS)}
            merged.setdefault(record["step"], {}).update(kept)
    return merged


def _assert_close(
    ours: dict[str, Any], theirs: dict[str, Any], tolerance: float, where: str
) -> None:
    assert ours.keys() == theirs.keys(), f"{where}: metrics {sorted(ours)} vs {sorted(theirs)}"
    apart = {
        key: (ours[key], theirs[key])
        for key in ours
        if ours[key] != theirs[key]
        and not (
            isinstance(ours[key], float)
            and isinstance(theirs[key], float)
            and abs(ours[key] - theirs[key]) <= tolerance + _SUMMED.get(key, 0.0)
        )
    }
    assert not apart, f"{where}: resumed vs uninterrupted {apart}"


def _assert_same_weights(ours: Path, theirs: Path, tolerance: float) -> None:
    """The final models' weights are equal within ``tolerance``; a model saved in a format of
    the engine's own (no safetensors file) is compared file by file, exactly."""
    if not any(theirs.glob("*.safetensors")):
        my_files, their_files = _files(ours), _files(theirs)
        assert my_files, f"no model in {theirs}"
        differ = sorted(
            name
            for name in my_files.keys() | their_files.keys()
            if my_files.get(name) != their_files.get(name)
        )
        assert not differ, f"final model files differ: {differ}"
        return
    from safetensors.torch import load_file

    def weights(folder: Path) -> dict[str, Any]:
        tensors: dict[str, Any] = {}
        for path in sorted(folder.glob("*.safetensors")):
            tensors.update(load_file(path))
        assert tensors, f"no weights in {folder}"
        return tensors

    mine, other = weights(ours), weights(theirs)
    assert mine.keys() == other.keys()
    apart = {
        name: float((mine[name].float() - other[name].float()).abs().max())
        for name in mine
        if not bool(((mine[name].float() - other[name].float()).abs() <= tolerance).all())
    }
    assert not apart, f"final weights apart (max difference per tensor): {apart}"


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in folder.rglob("*")
        if path.is_file()
    }
