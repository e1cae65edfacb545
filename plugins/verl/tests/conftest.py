"""Shared fixtures: a tiny offline model, a repeat-a-digit dataset, a reward file, a run context
wired the way the core wires it, and the engine's hooks called the way the core calls them."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from aworld_train.job.config import TrainConfig
from aworld_train.plugins.context import RunContext
from aworld_train.run.metrics import MetricsReporter
from aworld_train.testing.fixtures import tiny_model  # noqa: F401 - the shared tiny offline model
from aworld_train.testing.real_configs import long_model  # noqa: F401 - the tiny model with room for long configs

REWARD_FILE = """
def exact(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if solution_str.strip() == ground_truth else 0.0


def with_metrics(data_source, solution_str, ground_truth, extra_info=None):
    return {"score": 0.5, "length": float(len(solution_str))}


def broken(data_source, solution_str, ground_truth, extra_info=None):
    raise ZeroDivisionError("planted failure")


def wordy(data_source, solution_str, ground_truth, extra_info=None):
    return "great"


def exits(data_source, solution_str, ground_truth, extra_info=None):
    import sys

    sys.exit(3)


def hard_exit(data_source, solution_str, ground_truth, extra_info=None):
    import os

    os._exit(0)
"""


def pytest_configure(config: pytest.Config) -> None:
    """Keep the Hugging Face datasets cache VeRL's RLHFDataset fills, the cached VeRL schema
    (under $XDG_CACHE_HOME), and the log files AWorld writes as soon as it is imported (default:
    ./logs), out of the home and working folders."""
    config._verl_scratch = tempfile.mkdtemp(prefix="verl-tests-")  # type: ignore[attr-defined]
    os.environ["XDG_CACHE_HOME"] = os.path.join(config._verl_scratch, "cache")  # type: ignore[attr-defined]
    os.environ["HF_DATASETS_CACHE"] = os.path.join(config._verl_scratch, "datasets")  # type: ignore[attr-defined]
    os.environ.setdefault("AWORLD_LOG_PATH", os.path.join(config._verl_scratch, "aworld-logs"))  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(getattr(config, "_verl_scratch", ""), ignore_errors=True)


@pytest.fixture
def reward_file(tmp_path: Path) -> Path:
    path = tmp_path / "rewards.py"
    path.write_text(REWARD_FILE)
    return path


def repeat_rows(count: int = 8, prompt_as_text: bool = True) -> list[dict[str, Any]]:
    """Rows of the canonical layout: "Repeat: d" → "d"."""
    rows = []
    for index in range(count):
        digit = str(index % 10)
        prompt: Any = f"Repeat: {digit}"
        if not prompt_as_text:
            prompt = [{"role": "user", "content": prompt}]
        rows.append(
            {
                "prompt": prompt,
                "ground_truth": digit,
                "data_source": "repeat",
                "extra_info": {"index": index},
            }
        )
    return rows


def dataset(rows: list[dict[str, Any]]) -> Any:
    import datasets

    return datasets.Dataset.from_list(rows)


def make_ctx(run_dir: Path, model: Path | None, **config: Any) -> RunContext:
    defaults: dict[str, Any] = {
        "batch_size": 4,
        "num_generations": 2,
        "max_steps": 2,
        "max_prompt_length": 64,
        "max_completion_length": 8,
    }
    sections = {"verl": config.pop("verl")} if "verl" in config else {}
    train_config = TrainConfig(
        model=str(model) if model else None,
        sections=sections,
        engine="verl",
        **{**defaults, **config},
    )
    return RunContext(
        engine="verl",
        run_dir=run_dir,
        config=train_config,
        metrics=MetricsReporter(run_dir / "metrics.jsonl", show_progress=False),
    )


@cache
def _engine_hooks() -> Any:
    """The verl engine in a plugin manager of its own, so each hook gets only the named
    arguments its implementation takes, and a signature the spec lacks fails here as in the core."""
    import pluggy
    from aworld_train.plugins import hookspecs
    from aworld_train_verl import engine

    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    manager.register(engine, "verl")
    return manager.hook


@dataclass
class Checks:
    """The engine's hooks called in the core's order, each given what the core resolved and what
    the earlier hooks returned (kept here, under the names the hooks receive them by)."""

    ctx: RunContext
    tools: Any = None
    agent: Any = None
    dataset: Any = None
    reward: Any = None
    config: Any = None

    def check_agent(self, spec: Any) -> Any:
        from aworld_train.tools import ToolSet

        self.agent = _engine_hooks().check_agent(
            agent=spec, config=self.ctx.config, tools=self.tools or ToolSet(), ctx=self.ctx
        )
        return self.agent

    def check_dataset(self, train_dataset: Any, test_dataset: Any = None) -> Any:
        self.dataset = _engine_hooks().check_dataset(
            train_dataset=train_dataset,
            test_dataset=test_dataset,
            agent=self.agent,
            config=self.ctx.config,
            ctx=self.ctx,
        )
        return self.dataset

    def check_reward(self, reward: Any) -> Any:
        self.reward = _engine_hooks().check_reward(
            reward=reward,
            agent=self.agent,
            dataset=self.dataset,
            config=self.ctx.config,
            ctx=self.ctx,
        )
        return self.reward

    def check_config(self) -> Any:
        self.config = _engine_hooks().check_config(
            config=self.ctx.config,
            agent=self.agent,
            dataset=self.dataset,
            reward=self.reward,
            ctx=self.ctx,
        )
        return self.config

    def check_job(self, spec: Any, train_dataset: Any, reward: Any) -> Any:
        """All four checks of a job; ``check_config``'s result."""
        self.check_agent(spec)
        self.check_dataset(train_dataset)
        self.check_reward(reward)
        return self.check_config()

    def train(self) -> Any:
        return _engine_hooks().train(
            agent=self.agent,
            dataset=self.dataset,
            reward=self.reward,
            engine_config=self.config,
            ctx=self.ctx,
        )


class LocalActorHandle:
    """Calls a VeRL worker in this process through the interface of a Ray actor handle
    (``handle.method.remote(...)`` returning an awaitable), so no Ray cluster is started."""

    def __init__(self, worker: Any) -> None:
        self._worker = worker

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._worker, name)

        class _Remote:
            @staticmethod
            def remote(*args: Any, **kwargs: Any) -> Any:
                result = method(*args, **kwargs)
                return result if asyncio.iscoroutine(result) else asyncio.sleep(0, result)

        return _Remote()


@pytest.fixture(scope="session")
def tool_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The calculator example's tiny model, whose chat template renders tools and tool calls."""
    from rollouts import build_tool_model

    return build_tool_model(tmp_path_factory.mktemp("tool-model"))
