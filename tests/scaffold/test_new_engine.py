"""`aworld-train new-engine` writes a distribution that installs, is discovered and passes the
conformance suite as generated. Needs torch and transformers: run in an engine's venv."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers", reason="the generated engine trains with torch + transformers")


def test_generated_engine_installs_and_passes_conformance(tmp_path: Path) -> None:
    source = tmp_path / "aworld-train-scaffolded"
    cli = [sys.executable, "-m", "aworld_train.cli"]
    subprocess.run([*cli, "new-engine", "scaffolded", str(source)], check=True)
    site = tmp_path / "site"
    # Offline: no index, and the build backend (setuptools) taken from this environment.
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            "--no-build-isolation",
            "--target",
            str(site),
            str(source),
        ],
        check=True,
    )
    # The installed engine first, then whatever this run's own path holds (a checkout's core).
    path = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}

    listed = subprocess.run([*cli, "engines"], env=env, capture_output=True, text=True, check=True)
    assert "scaffolded" in listed.stdout and "aworld-train-scaffolded" in listed.stdout

    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(source / "tests")],
        env=env,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    assert "8 passed" in result.stdout


def test_new_engine_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    result = subprocess.run(
        [sys.executable, "-m", "aworld_train.cli", "new-engine", "x", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "already exists and is not empty" in result.stderr
    assert (tmp_path / "keep.txt").read_text() == "mine"
