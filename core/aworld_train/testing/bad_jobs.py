"""Bad jobs every engine must refuse in ``aworld-train check``: one ``error:`` line, exit 2.

The README promises that every mistake in a job is found by ``check`` in seconds, before any
model load. :mod:`aworld_train.testing.bad_job_cases` holds the mistakes a user can make
whatever the engine (a value out of range, a reward that hangs or exits, a bad row, a model
folder that is not one, a hostile file) as data; this module holds the pytest class that runs
each through the real CLI. In an engine's own tests::

    from aworld_train.testing.bad_jobs import BadJob, BadJobSuite, set_section

    MY_CASES = (BadJob("setting_negative", set_section("mine", some_setting=-1), "some_setting"),)

    class TestMyEngineBadJobs(BadJobSuite):
        engine_name = "mine"
        engine_section = {"some_setting": 1}      # the engine's section for the valid job
        model_required = True                       # the valid job names the tiny model

        @pytest.mark.parametrize("case", MY_CASES, ids=[case.id for case in MY_CASES])
        def test_my_bad_job(self, case, job_folder, capsys):
            self.assert_refused(case, job_folder, capsys)

Each case starts from a valid job in its own folder, changes one thing, and asserts that
``aworld-train check`` exits 2 with exactly one line on stderr starting with ``error:`` that
matches the case's pattern (the key, file, row or reward it names), no traceback, and no run
directory.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from aworld_train.cli import main
from aworld_train.testing.bad_job_cases import CASES, MODEL_CASES, REWARDS
from aworld_train.testing.conformance import EngineConformance
from aworld_train.testing.job_edits import (
    BadJob,
    Edit,
    JobFolder,
    override,
    set_agent,
    set_config,
    set_job,
    set_section,
    without,
)
from aworld_train.testing.tiny_model import build_tiny_model

# What an engine's own bad-job tests import from here, with the suite.
__all__ = [
    "BadJob",
    "BadJobSuite",
    "CASES",
    "Edit",
    "JobFolder",
    "MODEL_CASES",
    "override",
    "set_agent",
    "set_config",
    "set_job",
    "set_section",
    "without",
]

#: The id of an engine's case that asks for vLLM where it is not installed.
USE_VLLM_CASE = "use_vllm_without_vllm"


def vllm_can_run() -> bool:
    """Whether vLLM is installed and this process sees a GPU: there a job that asks for vLLM
    generation is valid, and a test that expects ``check`` to refuse one has nothing to test."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return False
    import torch

    return torch.cuda.is_available()


class BadJobSuite:
    """Runs every case of :data:`CASES` through ``aworld-train check`` on one engine."""

    #: The engine's name.
    engine_name: ClassVar[str] = ""
    #: The engine's own config section for the valid job.
    engine_section: ClassVar[dict[str, Any]] = {}
    #: Whether the valid job names the tiny model (engines that train a model need one).
    model_required: ClassVar[bool] = True
    #: Common config keys of the valid job: the conformance suite's tiny job.
    common_config: ClassVar[dict[str, Any]] = EngineConformance.common_config
    #: The engine's own cases, refused as :data:`CASES` are. A case named
    #: :data:`USE_VLLM_CASE` is skipped where vLLM and a GPU are both here: its job is valid there.
    engine_cases: ClassVar[tuple[BadJob, ...]] = ()

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Each of the subclass's :attr:`engine_cases` is one ``engine_case``."""
        if "engine_case" in metafunc.fixturenames:
            cases = getattr(metafunc.cls, "engine_cases", ())
            metafunc.parametrize("engine_case", cases, ids=[case.id for case in cases])

    @pytest.fixture(scope="class")
    @classmethod
    def valid_model(cls, tmp_path_factory: pytest.TempPathFactory) -> Path | None:
        if not cls.model_required:
            return None
        return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))

    @pytest.fixture
    def job_folder(self, tmp_path: Path, valid_model: Path | None) -> JobFolder:
        config = dict(self.common_config)
        if valid_model is not None:
            config["model"] = str(valid_model)
        if self.engine_section:
            config[self.engine_name] = json.loads(json.dumps(self.engine_section))
        job = JobFolder(
            tmp_path,
            {
                "engine": self.engine_name,
                "agent": {"name": "bad-jobs", "system_prompt": "Answer with the digit."},
                "train_dataset": "train.jsonl",
                "reward": "rewards.py:score",
                "config": config,
                "run_path": "runs",
            },
        )
        job.rows(
            [
                {"prompt": [{"role": "user", "content": f"Repeat: {d}"}], "ground_truth": str(d)}
                for d in range(8)
            ]
        )
        job.write("rewards.py", REWARDS)
        return job

    def run_check(self, job: JobFolder, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
        """Write the job, run ``aworld-train check`` in this process; exit code and stderr."""
        text = job.job_text if job.job_text is not None else yaml.safe_dump(job.job)
        (job.root / "job.yaml").write_text(text.replace("{engine}", self.engine_name))
        capsys.readouterr()
        try:
            main(["check", str(job.root / "job.yaml"), "--engine", self.engine_name, *job.args])
            code = 0
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        return code, capsys.readouterr().err

    def test_valid_job_passes(
        self, job_folder: JobFolder, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code, err = self.run_check(job_folder, capsys)
        assert code == 0, err

    def assert_refused(
        self, case: BadJob, job: JobFolder, capsys: pytest.CaptureFixture[str]
    ) -> None:
        """Break ``job`` as ``case`` says and assert ``check`` refuses it as the README promises:
        exit 2, stderr exactly one ``error:`` line matching the case, no run directory, no code
        from the model folder run. An engine's own cases call this too."""
        case.edit(job)
        code, err = self.run_check(job, capsys)
        assert code == 2, f"exit {code}; stderr:\n{err}"
        assert len(err.splitlines()) == 1 and err.startswith("error: "), err
        assert re.search(case.expect, err, re.IGNORECASE), err
        assert not (job.root / "runs").exists(), "check wrote a run directory"
        assert not (job.root / "model" / "EXECUTED").exists(), "check ran model code"

    @pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
    def test_bad_job_fails_check_in_one_line(
        self, case: BadJob, job_folder: JobFolder, capsys: pytest.CaptureFixture[str]
    ) -> None:
        self.assert_refused(case, job_folder, capsys)

    def test_engine_bad_job_fails_check_in_one_line(
        self, engine_case: BadJob, job_folder: JobFolder, capsys: pytest.CaptureFixture[str]
    ) -> None:
        if engine_case.id == USE_VLLM_CASE and vllm_can_run():
            pytest.skip("vLLM and a GPU are both here: use_vllm is a valid job on this machine")
        self.assert_refused(engine_case, job_folder, capsys)

    @pytest.mark.parametrize("case", MODEL_CASES, ids=[case.id for case in MODEL_CASES])
    def test_inconsistent_model_fails_check_in_one_line(
        self, case: BadJob, job_folder: JobFolder, capsys: pytest.CaptureFixture[str]
    ) -> None:
        if not self.model_required:
            pytest.skip("the valid job names no model")
        self.assert_refused(case, job_folder, capsys)
