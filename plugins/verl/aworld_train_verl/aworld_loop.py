"""The agent loop VeRL's rollout runs for an AWorld agent: the user's ``Agent``, unmodified,
through AWorld's ``Runners``, with the policy being trained as its model.

VeRL's ``AgentLoopWorker`` builds one :class:`AWorldAgentLoop` per rollout from the run
directory's ``agent_loop.yaml``. The agent is unpickled from ``agent.pkl`` (its MCP sandbox
rebuilt, its secrets from the environment) and each episode runs through the core's agent
runtime (:class:`~aworld_train_verl.agent_loop.RuntimeAgentLoop`), which runs a fresh copy of it
on the row's last user message against the episode's loopback endpoint, answered by VeRL's
server manager. An agent that raises, reports a failed task, rewrites the conversation it
already sent, or does not finish within
:data:`~aworld_train_verl.agent_loop.EPISODE_TIMEOUT` seconds ends its episode as a failure,
which the run's reward module scores 0 and counts in ``agent_failed``; the step carries on.

This module imports VeRL at the top: only VeRL's workers import it. AWorld is imported when the
agent is unpickled.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from aworld_train.engine import AgentSpec

from aworld_train_verl.agent_loop import RuntimeAgentLoop
from aworld_train_verl.vault import loads


@functools.cache
def load_agent_file(path: str) -> AgentSpec:
    """The pickled AWorld agent at ``path`` as the runtime runs it, loaded once per worker
    process: the runtime runs a fresh copy of it in every episode."""
    from aworld_train.engine.runtime import load_agent

    return load_agent(loads(Path(path).read_bytes()))


class AWorldAgentLoop(RuntimeAgentLoop):
    """An AWorld agent as a VeRL agent loop.

    :param agent_file: the pickled AWorld ``Agent``.
    :param max_turns: the most model turns of one episode.
    """

    def __init__(self, *args: Any, agent_file: str, max_turns: int, **kwargs: Any) -> None:
        super().__init__(*args, max_turns=max_turns, **kwargs)
        # AWorld writes log files under $AWORLD_LOG_PATH (default ./logs): keep them in the run.
        os.environ.setdefault("AWORLD_LOG_PATH", str(Path(agent_file).parent / "aworld_logs"))
        self.spec = load_agent_file(agent_file)
