"""One training process under torchrun: ``python -m aworld_train_swift.worker JOB``.

It rebuilds the checked job that :mod:`aworld_train_swift.launch` wrote, registers the rewards
in this process's ``orms``, and trains; the main process prints each metrics event on one
marked line for the parent to forward.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from aworld_train.engine.launch import emit, finish_distributed, load_rewards

from aworld_train_swift.config import SwiftConfig
from aworld_train_swift.reward import SwiftReward
from aworld_train_swift.training import train_in_process


def main(job_file: str) -> None:
    job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    config = SwiftConfig(**job["config"])
    reward = None
    if job["rewards"]:
        spec = load_rewards(job["rewards"])
        reward = SwiftReward(
            spec,
            [r["orm"] for r in job["rewards"]],
            list(config.arguments.get("reward_weights") or [1.0] * len(spec.functions)),
        )
    rollouts = None
    if job.get("agent_file"):
        # This process runs the episodes of its own prompts, with its own tool sessions.
        from aworld_train.engine.runtime import unship_agent

        from aworld_train_swift.rollout import TEMPLATE_PREFIX, AgentRollouts, agent_template

        # The template that encodes episodes, registered in this process as the checks did.
        agent_template(str(config.arguments["template"]).removeprefix(TEMPLATE_PREFIX))
        shipped = unship_agent(Path(job["agent_file"]))
        rollouts = AgentRollouts(shipped.agent, shipped.tools, str(config.arguments["model"]))
    final = train_in_process(
        config=config,
        reward=reward,
        rollouts=rollouts,
        on_start=lambda total, done: emit("start", total=total, done=done),
        on_log=lambda step, metrics: emit("log", step=step, metrics=metrics),
        checkpoint=Path(job["checkpoint"]) if job["checkpoint"] else None,
    )
    if int(os.environ.get("RANK", "0")) == 0:
        emit("done", metrics={k: v for k, v in final.items() if isinstance(v, (int, float))})
    finish_distributed()


if __name__ == "__main__":
    main(sys.argv[1])
