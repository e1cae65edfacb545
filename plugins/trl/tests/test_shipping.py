"""What each training process gets of an agent the runtime runs: the agent and its tools from a
file in the run directory that holds none of the job's secrets, whole again in another
process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from aworld_train.agent import AgentSpec, load_agent
from aworld_train.engine import TrainingError
from aworld_train.engine.runtime import Secrets, ship_agent, unship_agent
from aworld_train.run.redaction import remember_secrets

SECRET = "sk-planted-mcp-5e1f0a"


def test_the_shipped_agent_holds_no_secret_and_comes_back_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    servers = {
        "mcpServers": {
            "calc": {"command": "python", "args": ["server.py"], "env": {"CALC_API_KEY": SECRET}}
        }
    }
    remember_secrets({"agent": {"mcp_config": servers}})  # as the trainer does with the job
    spec = AgentSpec(name="calc", mcp_config=servers, mcp_servers=["calc"], max_turns=2)
    secrets = Secrets()
    path = ship_agent(spec, None, tmp_path / "agent.pkl", secrets)
    assert SECRET.encode() not in path.read_bytes()
    assert path.stat().st_mode & 0o777 == 0o600
    [name] = secrets.environment
    assert secrets.environment[name] == SECRET

    monkeypatch.delenv(name, raising=False)
    with pytest.raises(TrainingError, match=rf"^{name} is not set: it carries a secret"):
        unship_agent(path)
    monkeypatch.setenv(name, SECRET)
    shipped = unship_agent(path)
    assert shipped.agent.mcp_config == servers and shipped.tools is None


def test_a_python_agent_from_a_file_runs_in_another_process(tmp_path: Path) -> None:
    """The job's own file is imported under a name only this process knows: its function
    travels by value, and the module beside it is found in the other process."""
    (tmp_path / "helper.py").write_text("def twice(text):\n    return text * 2\n")
    (tmp_path / "agent.py").write_text(
        "from helper import twice\n\n\ndef run(row, llm):\n    return twice(row['x'])\n"
    )
    spec = load_agent("agent.py:run", tmp_path)
    path = ship_agent(spec, None, tmp_path / "agent.pkl", Secrets())
    script = (
        "import sys\nfrom pathlib import Path\nfrom aworld_train.engine.runtime import unship_agent\n"
        "print(unship_agent(Path(sys.argv[1])).agent.run({'x': 'ab'}, None))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        cwd="/",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "abab"
