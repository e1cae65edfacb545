"""One training process under ``accelerate launch``: ``python -m aworld_train_trl.worker JOB``.

It rebuilds the checked job that :mod:`aworld_train_trl.launch` wrote and trains; the main
process prints each metrics event on one marked line for the parent to forward.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aworld_train.engine.launch import emit, finish_distributed, load_rewards

from aworld_train_trl.agent import TrlAgent
from aworld_train_trl.config import TrlConfig
from aworld_train_trl.dataset import TrlDatasets
from aworld_train_trl.reward import TrlReward
from aworld_train_trl.training import train_in_process


def main(job_file: str) -> None:
    from datasets import load_from_disk

    job = json.loads(Path(job_file).read_text(encoding="utf-8"))
    # SFT may have no reward; its test rows are there when it has one to score them with.
    rows = job.get("test_rows")
    agent, tools = TrlAgent(**job["agent"]), None
    if job.get("agent_file"):
        # This process runs the episodes of its own prompts, with its own tool sessions.
        from aworld_train.engine.runtime import unship_agent

        shipped = unship_agent(Path(job["agent_file"]))
        agent.episodes, tools = shipped.agent, shipped.tools
    final = train_in_process(
        agent=agent,
        data=TrlDatasets(
            train=load_from_disk(job["train"]),
            test=load_from_disk(job["test"]) if job["test"] else None,
            test_rows=load_from_disk(rows) if rows else None,
        ),
        reward=TrlReward(load_rewards(job["rewards"])) if job["rewards"] else None,
        config=TrlConfig(**job["config"]),
        run_dir=Path(job["run_dir"]),
        on_start=lambda total, done: emit("start", total=total, done=done),
        on_log=lambda step, metrics: emit("log", step=step, metrics=metrics),
        checkpoint=Path(job["checkpoint"]) if job["checkpoint"] else None,
        tools=tools,
    )
    from accelerate import PartialState

    if PartialState().is_main_process:
        emit("done", metrics=final)
    finish_distributed()


if __name__ == "__main__":
    main(sys.argv[1])
