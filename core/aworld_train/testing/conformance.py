"""The engine conformance suite: pytest test classes every engine subclasses.

In an engine's own tests::

    from aworld_train.testing.conformance import EngineConformance

    class TestMyEngine(EngineConformance):
        engine_name = "mine"
        engine_section = {"some_setting": 1}   # the engine's config section for the tiny job

The suite proves that the engine is discovered, that its hooks validate against the specs,
that ``check`` passes on a valid job and fails clearly on bad input, that the settings it
reports (``effective_settings``, where it implements the hook) name the device and the precision
it will use under their common names, and that ``train`` runs a tiny job to completion and
reports metrics (or raises ``train_error`` where the machine cannot train, such as an engine
that needs a GPU), and that a run killed, stopped with Ctrl-C, or with a checkpoint cut short
resumes as the engine's ``resume_support`` promises
(:mod:`~aworld_train.testing.resume_conformance`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from aworld_train.errors import ConfigError, DatasetError, RewardError
from aworld_train.testing.resume_conformance import ResumeConformance

_REWARD_FILE = """
def score(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if ground_truth in solution_str else 0.0


def broken(data_source, solution_str, ground_truth, extra_info=None):
    raise RuntimeError("planted failure")
"""


class EngineConformance(ResumeConformance):
    """The contract every engine keeps. Subclass it and set :attr:`engine_name`. The resume
    tests come from :class:`~aworld_train.testing.resume_conformance.ResumeConformance`."""

    #: The engine's name, as its entry point (or ``register_processor``) gives it.
    engine_name: ClassVar[str] = ""
    #: The engine's own config section for the tiny job.
    engine_section: ClassVar[dict[str, Any]] = {}
    #: Common config keys for the tiny job; small enough to train in seconds on a CPU.
    common_config: ClassVar[dict[str, Any]] = {
        "algorithm": "grpo",
        "max_steps": 2,
        "batch_size": 4,
        "num_generations": 2,
        "learning_rate": 1e-3,
        "max_prompt_length": 64,
        "max_completion_length": 4,
        "logging_steps": 1,
        "save_steps": 2,
    }
    #: The engine's config section for an SFT job, or ``None`` when the engine trains no SFT.
    #: The suite then checks and trains an SFT job that names no reward.
    sft_section: ClassVar[dict[str, Any] | None] = None
    #: The error ``train`` must raise on this machine, or ``None`` when it must train.
    train_error: ClassVar[type[BaseException] | None] = None

    @pytest.fixture(scope="class")
    @classmethod
    def tiny_model(cls, tmp_path_factory: pytest.TempPathFactory) -> Path:
        from aworld_train.testing.tiny_model import build_tiny_model

        return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))

    @pytest.fixture
    def job(self, tmp_path: Path, tiny_model: Path) -> dict[str, Any]:
        """``AgentTrainer`` keyword arguments for a valid tiny job."""
        rows = [
            {"prompt": [{"role": "user", "content": f"Repeat: {d}"}], "ground_truth": str(d)}
            for d in range(8)
        ]
        data = tmp_path / "train.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in rows))
        (tmp_path / "rewards.py").write_text(_REWARD_FILE)
        config = dict(self.common_config, model=str(tiny_model))
        if self.engine_section:
            config[self.engine_name] = dict(self.engine_section)
        return {
            "agent": {"name": "conformance", "system_prompt": "Answer with the digit."},
            "config": config,
            "reward_func": "rewards.py:score",
            "train_dataset": "train.jsonl",
            "run_path": tmp_path / "runs",
            "train_engine_name": self.engine_name,
            "base_dir": tmp_path,
        }

    def test_engine_is_discovered_without_importing_it(self) -> None:
        code = (
            "import json, sys\n"
            "from aworld_train.plugins import list_engines\n"
            f"info = [i for i in list_engines() if i.name == {self.engine_name!r}]\n"
            "module = info[0].entry_point.module if info and info[0].entry_point else ''\n"
            "print(json.dumps({'found': [i.as_dict() for i in info],\n"
            "                  'imported': module.split('.')[0] in sys.modules}))\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        result = json.loads(out.stdout)
        assert [row["status"] for row in result["found"]] == ["ok"]
        assert not result["imported"], "listing engines imported the engine"

    def test_hooks_validate_against_the_specs(self) -> None:
        from aworld_train.plugins import check_engine, find_engine

        assert check_engine(find_engine(self.engine_name)).status == "ok"

    def test_check_passes_on_a_valid_job(self, job: dict[str, Any]) -> None:
        from aworld_train.trainer import AgentTrainer

        trainer = AgentTrainer(**job, check_only=True)
        assert trainer.initialized
        checked_by_engine = {c.module for c in trainer.checks if c.by == self.engine_name}
        reports = {"settings"} if trainer.settings is not None else set()
        assert checked_by_engine == {"agent", "dataset", "reward", "config", *reports}
        assert not (job["run_path"]).exists(), "check wrote a run directory"

    def test_effective_settings_name_the_device_and_the_precision(
        self, job: dict[str, Any]
    ) -> None:
        from aworld_train.trainer import AgentTrainer
        from aworld_train.job.config import COMMON_KEYS
        from aworld_train.job.settings import PRECISIONS, Setting

        job["config"] = dict(job["config"], precision="fp32")
        settings = AgentTrainer(**job, check_only=True).settings
        if settings is None:
            pytest.skip(f"engine {self.engine_name} does not implement effective_settings")
        assert isinstance(settings, list) and all(isinstance(s, Setting) for s in settings)
        names = [setting.name for setting in settings]
        assert len(names) == len(set(names)), f"a setting reported twice: {names}"
        assert set(names) <= {"device", *COMMON_KEYS}, "settings go by their common names"
        values = {setting.name: setting for setting in settings}
        assert isinstance(values["device"].value, str) and values["device"].value
        assert values["precision"].value == "fp32" and values["precision"].source == "job"
        assert all(s.source in ("job", "section", "default") for s in settings)
        job["config"]["precision"] = "auto"
        resolved = AgentTrainer(**job, check_only=True).settings
        assert resolved is not None
        assert {s.name: s.value for s in resolved}["precision"] in PRECISIONS[1:], "auto resolved"

    def test_check_rejects_an_unknown_engine_key(self, job: dict[str, Any]) -> None:
        from aworld_train.trainer import AgentTrainer

        section = dict(self.engine_section, no_such_setting=1)
        job["config"] = dict(job["config"], **{self.engine_name: section})
        with pytest.raises(ConfigError, match="no_such_setting"):
            AgentTrainer(**job, check_only=True)

    def test_check_rejects_a_reward_that_raises(self, job: dict[str, Any]) -> None:
        from aworld_train.trainer import AgentTrainer

        job["reward_func"] = "rewards.py:broken"
        with pytest.raises(RewardError, match="row 0.*planted failure"):
            AgentTrainer(**job, check_only=True)

    def test_check_rejects_a_row_without_ground_truth(self, job: dict[str, Any]) -> None:
        from aworld_train.trainer import AgentTrainer

        data = job["base_dir"] / "train.jsonl"
        data.write_text(data.read_text() + json.dumps({"prompt": "Repeat: 1"}) + "\n")
        with pytest.raises(DatasetError, match=r"train\.jsonl:9: missing column 'ground_truth'"):
            AgentTrainer(**job, check_only=True)

    @pytest.mark.slow
    def test_sft_without_a_reward_checks_and_trains(self, job: dict[str, Any]) -> None:
        """SFT learns from the ground truth alone: a job with no reward checks and trains."""
        from aworld_train.trainer import AgentTrainer

        if self.sft_section is None:
            pytest.skip(f"engine {self.engine_name} trains no SFT")
        config = {
            key: value
            for key, value in job["config"].items()
            if key not in ("num_generations", self.engine_name)
        }
        config.update(algorithm="sft", max_steps=1, save_steps=1)
        if self.sft_section:
            config[self.engine_name] = dict(self.sft_section)
        job.update(config=config, reward_func=None)
        trainer = AgentTrainer(**job)
        assert trainer.initialized
        if self.train_error is not None:
            return
        trainer.train()
        assert json.loads((trainer.run_dir.path / "manifest.json").read_text())["status"] == (
            "completed"
        )

    @pytest.mark.slow
    def test_train_runs_a_tiny_job(self, job: dict[str, Any]) -> None:
        from aworld_train.trainer import AgentTrainer

        trainer = AgentTrainer(**job)
        run_dir = trainer.run_dir.path
        if self.train_error is not None:
            with pytest.raises(self.train_error):
                trainer.train()
            assert json.loads((run_dir / "manifest.json").read_text())["status"] == "failed"
            return
        trainer.train()
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "completed"
        if trainer.settings is not None:
            reported = {setting.name: setting.value for setting in trainer.settings}
            assert manifest["settings"] == reported
            assert (manifest["device"], manifest["precision"]) == (
                reported["device"],
                reported["precision"],
            )
        records = [
            json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
        ]
        assert records and all("step" in r for r in records)
        assert any(key not in ("step", "time") for r in records for key in r)
