"""An agent of the user's own (a Python agent with a tool, two model calls an episode) trains
through the core's agent runtime, its model calls answered by the service's sampler; an episode
that fails scores 0 and is counted."""

from __future__ import annotations

from pathlib import Path

import pytest
from aworld_train.testing.agents import assert_agent_trains, write_agent_job

pytestmark = pytest.mark.slow


def test_a_python_agent_with_a_tool_trains(
    service: str, tmp_path: Path, served_model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_agent_job(tmp_path, served_model, "tinker", {"lora_rank": 8}, max_steps=3)
    run_dir, logged = assert_agent_trains(capsys, job, steps=3)
    assert all(m["trained_completions"] >= 0 for m in logged)
    assert (run_dir / "adapter" / "adapter_config.json").is_file()
