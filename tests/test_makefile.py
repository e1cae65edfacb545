"""The Makefile keeps the virtual environments it built: when a venv's inputs change (a
`git pull` brings a newer pyproject.toml than its `.ready` marker) it installs into the venv
again instead of deleting it, and it creates a venv only when it is missing. The venvs here are
stand-ins under a temporary folder, so nothing real is built or installed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VENVS = ("core", "aworld", "vllm", "trl", "swift", "verl")
OLD = 946684800  # 2000-01-01: older than every input of the Makefile's venv rules

# A pip that records what it was asked to do instead of installing.
STUB_PIP = '#!/bin/sh\necho "pip $*" >> "$(dirname "$0")/../calls.log"\n'
# A python that records `-m venv DIR` and makes DIR a stand-in venv with the stub pip.
STUB_PYTHON = f"""#!/bin/sh
[ "$1 $2" = "-m venv" ] || exit 1
mkdir -p "$3/bin" && echo "venv $3" >> "$3/calls.log"
cat > "$3/bin/pip" <<'EOF'
{STUB_PIP}EOF
chmod +x "$3/bin/pip"
"""


def make(*args: str) -> str:
    """Run make in the repository (no parent make's jobserver) and return what it printed."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def stale_venv(root: Path, name: str) -> Path:
    """A stand-in venv with the stub pip and a `.ready` marker older than its inputs."""
    venv = root / name
    (venv / "bin").mkdir(parents=True)
    pip = venv / "bin" / "pip"
    pip.write_text(STUB_PIP)
    pip.chmod(0o755)
    (venv / "kept").write_text("installed before")
    (venv / ".ready").touch()
    os.utime(venv / ".ready", (OLD, OLD))
    return venv


def test_a_dry_run_after_a_newer_pyproject_deletes_no_venv(tmp_path: Path) -> None:
    for name in VENVS:
        stale_venv(tmp_path, name)
    planned = make("-n", f"VENVS={tmp_path}", "venvs")
    assert "rm -rf" not in planned
    for name in VENVS:  # every stale venv is installed into again
        assert f"{tmp_path}/{name}/bin/pip install" in planned, planned
        assert f"touch {tmp_path}/{name}/.ready" in planned


def test_make_demo_sets_no_thread_policy_and_deletes_nothing(tmp_path: Path) -> None:
    stale_venv(tmp_path, "trl")
    planned = make("-n", f"VENVS={tmp_path}", "demo")
    assert "rm -rf" not in planned
    # aworld-train sets the CPU thread policy itself (tests/test_threads.py).
    assert "OMP_WAIT_POLICY" not in planned
    assert f"{tmp_path}/trl/bin/aworld-train train examples/repeat_digit/job.yaml" in planned


@pytest.fixture
def stub_python(tmp_path: Path) -> Path:
    python = tmp_path / "python"
    python.write_text(STUB_PYTHON)
    python.chmod(0o755)
    return python


def test_a_stale_venv_is_installed_into_not_recreated(tmp_path: Path, stub_python: Path) -> None:
    venvs = tmp_path / "venvs"
    venv = stale_venv(venvs, "aworld")
    make(f"VENVS={venvs}", f"PYTHON={stub_python}", f"{venvs}/aworld/.ready")
    assert (venv / "kept").read_text() == "installed before"
    assert (venv / "calls.log").read_text().splitlines() == [
        "pip install -q -e .[aworld] pytest pytest-timeout"
    ]
    assert (venv / ".ready").stat().st_mtime > OLD


def test_a_missing_venv_is_created_then_installed(tmp_path: Path, stub_python: Path) -> None:
    venvs = tmp_path / "venvs"
    make(f"VENVS={venvs}", f"PYTHON={stub_python}", f"{venvs}/aworld/.ready")
    assert (venvs / "aworld" / "calls.log").read_text().splitlines() == [
        f"venv {venvs}/aworld",
        "pip install -q -e .[aworld] pytest pytest-timeout",
    ]
    assert (venvs / "aworld" / ".ready").is_file()


def test_a_ready_venv_is_left_alone(tmp_path: Path, stub_python: Path) -> None:
    venvs = tmp_path / "venvs"
    venv = stale_venv(venvs, "aworld")
    os.utime(venv / ".ready")  # newer than its inputs
    assert "up to date" in make(f"VENVS={venvs}", f"PYTHON={stub_python}", f"{venvs}/aworld/.ready")
    assert not (venv / "calls.log").exists()


def test_make_test_runs_every_tier_and_test_fast_leaves_out_the_slow_tests(tmp_path: Path) -> None:
    venvs = tmp_path / "venvs"
    for name in VENVS:
        (venvs / name / "bin").mkdir(parents=True)
        (venvs / name / ".ready").touch()
    everything = make("-n", f"VENVS={venvs}", "test")
    # The suites run two at a time, each one's output printed whole.
    assert "-j2 --output-sync=target test-trl test-swift" in everything
    core = next(line for line in everything.splitlines() if "pytest tests " in line)
    assert "--ignore=tests/test_dist.py" in core, "the wheels are built by a target of their own"
    assert f"{venvs}/core/bin/python -m pytest tests/test_dist.py" in everything
    assert "ruff format --check ." in everything and "mypy" in everything
    fast = make("-n", f"VENVS={venvs}", "test-fast")
    assert fast.count('-m "not slow and not gpu and not network and not browser"') == 2, fast
    assert "apt-get install -y chromium" in everything, "the browser tests' Chromium"
    # Playwright keeps an event loop running in the session that drives a browser: the browser
    # tests get sessions of their own, apart from the tests that call asyncio.run.
    sessions = [line for line in everything.splitlines() if " -m pytest " in line]
    assert any('-m "not browser"' in line and "test_runtime_protocol" in line for line in sessions)
    assert any(line.endswith("-m browser") for line in sessions), "the core's browser tests"
    assert any(line.endswith("-m pytest plugins/trl/tests/test_view_live.py") for line in sessions)
    assert "test_dist" in fast and "pytest tests/test_dist.py" not in fast
