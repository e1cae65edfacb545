"""The calculator example's VeRL jobs pass ``aworld-train check``: the plain tool agent
(``job_verl.yaml``) and the same agent as an AWorld ``Agent`` (``job_aworld.yaml``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from rollouts import EXAMPLE

EXECUTABLE = Path(sys.executable).with_name("aworld-train")


@pytest.mark.slow
@pytest.mark.parametrize("job", ["job_verl.yaml", "job_aworld.yaml"])
def test_the_calculator_examples_jobs_pass_check(
    job: str, tool_model: Path, tmp_path: Path
) -> None:
    # The tiny model prepare.py builds, from the fixture, instead of the example's build/ folder.
    result = subprocess.run(
        [str(EXECUTABLE), "check", str(EXAMPLE / job), "-o", f"model={tool_model}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "all checks passed" in result.stdout
    assert "(add, multiply, divide)" in result.stdout, "the MCP server's tools were listed"
