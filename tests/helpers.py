"""Helpers the core tests share: sample rows, file readers, a subprocess runner and an engine
written the AWorld Train way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aworld_train import TrainerProcessor
from aworld_train.reward._builtin import exact_match
from aworld_train.testing.fixtures import run_cli

__all__ = ["run_cli"]  # re-exported: the core tests import it from here

ENV_VARS = (
    "AWORLD_TRAIN_LOAD_PLUGINS",
    "AWORLD_TRAIN_DISABLE_PLUGINS",
    "AWORLD_TRAIN_TRACE_PLUGINS",
)

# Four questions with four distinct answers: a uniform policy scores 0.25, a trained one 1.0.
ARITHMETIC = [
    {"prompt": f"What is {a} + {b}?", "ground_truth": str(a + b)}
    for a, b in ((1, 1), (1, 2), (2, 2), (2, 3))
]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def only_run_dir(run_path: Path) -> Path:
    """The one run directory under ``run_path``."""
    found = list(run_path.iterdir())
    assert len(found) == 1, found
    return found[0]


def manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))


def lay_out_distribution(
    site: Path, name: str, entry_points: str, module: str, source: str, version: str = "0.1.0"
) -> None:
    """Lay out an installed distribution as pip does: its module and a ``.dist-info`` folder.
    Put ``site`` on ``sys.path`` (or ``PYTHONPATH``) to install it."""
    (site / f"{module}.py").write_text(source)
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(entry_points)


def engine_source(check_config: str = "return None") -> str:
    """The hook module of a minimal engine: ``check_config`` runs the given line, ``train``
    does nothing."""
    return (
        "from aworld_train import hookimpl\n\n\n@hookimpl\ndef check_config(config):\n"
        f"    {check_config}\n\n\n@hookimpl\ndef train(ctx):\n    return None\n"
    )


def lay_out_engine(site: Path, name: str, source: str, version: str = "0.1.0") -> None:
    """Install the engine ``name`` (hook module ``source``) as ``aworld-train-<name>``."""
    lay_out_distribution(
        site,
        f"aworld-train-{name}",
        f"[aworld_train.engines]\n{name} = aworld_train_{name}\n",
        f"aworld_train_{name}",
        source,
        version,
    )


def signal_when(
    process: subprocess.Popen[str], ready: Callable[[], bool], signum: int
) -> tuple[str, str]:
    """Send ``signum`` to ``process`` once ``ready()`` (polled for up to 60 s), then return its
    output; the process is killed if it outlives the test."""
    try:
        deadline = time.monotonic() + 60
        while not ready():
            assert process.poll() is None, f"exited {process.returncode}: {process.communicate()}"
            assert time.monotonic() < deadline, "not ready within 60 s"
            time.sleep(0.1)
        process.send_signal(signum)
        return process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def write_model_folder(folder: Path, **config: Any) -> Path:
    """A model folder as save_pretrained leaves one, as far as the checks read it without
    transformers: ``config.json``, a complete (empty) safetensors file and a tokenizer file."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "llama", **config}))
    header = b"{}"
    (folder / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    (folder / "tokenizer.json").write_text("{}")
    return folder


def run_python(
    code: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter of this environment."""
    full_env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=120,
    )


class RecordingProcessor(TrainerProcessor):
    """An engine written the AWorld Train way; it records every call in ``calls`` (each check
    receives what the user passed)."""

    calls: list[tuple[str, Any]] = []

    def check_agent(self, agent: Any) -> Any:
        self.calls.append(("check_agent", agent))
        return {"agent_for": agent}

    def check_dataset(self, dataset: Any, test_dataset: Any = None) -> Any:
        self.calls.append(("check_dataset", (dataset, test_dataset)))
        return None

    def check_reward(self, reward_func: Any) -> Any:
        self.calls.append(("check_reward", reward_func))
        return None

    def check_config(self, config: Any) -> Any:
        self.calls.append(("check_config", config))
        return None

    def train(self) -> Any:
        self.calls.append(("train", self.context))
        self.context.metrics.log(1, {"reward": 0.5, "loss": 1.0})
        self.context.metrics.log(2, {"reward": 0.75, "loss": 0.5})
        return {"reward": 0.75, "initialized_before_train": float(self.initialized)}


class RewardThatStops:
    """``exact_match`` until its ``stop_after``-th call, which raises ``error``."""

    def __init__(self, stop_after: int, error: BaseException) -> None:
        self.calls = 0
        self.stop_after = stop_after
        self.error = error

    def __call__(
        self,
        data_source: str,
        solution_str: str,
        ground_truth: str,
        extra_info: dict[str, Any] | None = None,
    ) -> float:
        self.calls += 1
        if self.calls >= self.stop_after:
            raise self.error
        return exact_match(data_source, solution_str, ground_truth, extra_info)
