"""The README's job and Python example, as written, on the engine this environment has: a
newcomer's first commands (build the model, check, train) run in a clean copy of
``examples/quickstart``, and the README shows those files as they are.

Runs in each engine's venv (the Makefile's EXTRA_TESTS): trl and swift train the job, verl
checks it (training needs a GPU).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart"


def _engine() -> str:
    from aworld_train.plugins import list_engines

    shipped = [info.name for info in list_engines() if info.name in ("trl", "swift", "verl")]
    if len(shipped) != 1:
        pytest.skip(f"needs exactly one of the shipped engines installed, found {shipped}")
    return shipped[0]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean copy of the quickstart with its model built by the README's command."""
    pytest.importorskip("torch", reason="building the model needs torch")
    copy = tmp_path_factory.mktemp("quickstart") / "quickstart"
    shutil.copytree(QUICKSTART, copy, ignore=shutil.ignore_patterns("my-model", "runs"))
    _run([sys.executable, "-m", "aworld_train.testing.tiny_model", "my-model"], copy)
    return copy


def test_the_readme_model_command_prints_its_one_line(tmp_path: Path) -> None:
    """No progress bar of transformers' under it; a bar the caller enabled stays enabled."""
    pytest.importorskip("torch", reason="building the model needs torch")
    from aworld_train.testing import build_tiny_model
    from transformers.utils import logging as transformers_logging

    result = _run([sys.executable, "-m", "aworld_train.testing.tiny_model", "my-model"], tmp_path)
    assert (result.stdout, result.stderr) == ("model: my-model\n", "")
    assert transformers_logging.is_progress_bar_enabled()
    build_tiny_model(tmp_path / "in-process")
    assert transformers_logging.is_progress_bar_enabled()


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def _cli() -> str:
    return str(Path(sys.executable).parent / "aworld-train")


def test_the_readme_shows_the_quickstart_files_as_they_are() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for name in ("job.yaml", "train.py"):
        assert (QUICKSTART / name).read_text(encoding="utf-8").strip() in readme, name


def test_the_readme_job_runs_as_written(folder: Path) -> None:
    engine = _engine()
    if engine == "verl":
        _run([_cli(), "check", "job.yaml", "--engine", "verl"], folder)
        return
    _run([_cli(), "train", "job.yaml", "--engine", engine], folder)
    [run] = [path for path in (folder / "runs").iterdir() if engine in path.name]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert (run / "model" / "config.json").is_file()


def test_the_readme_python_example_runs_as_written(folder: Path) -> None:
    engine = _engine()
    if engine == "verl":
        pytest.skip("VeRL trains on GPUs only: its check runs in the job test")
    source = (folder / "train.py").read_text(encoding="utf-8")
    script = folder / f"train_{engine}.py"
    # The README's one edit for another engine: its name.
    script.write_text(source.replace('train_engine_name="trl"', f'train_engine_name="{engine}"'))
    before = set((folder / "runs").iterdir()) if (folder / "runs").exists() else set()
    _run([sys.executable, script.name], folder)
    [run] = set((folder / "runs").iterdir()) - before
    assert json.loads((run / "manifest.json").read_text())["status"] == "completed"
