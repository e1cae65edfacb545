"""aworld_train.engine.hf: what engines built on a Hugging Face Trainer share."""

from __future__ import annotations

import dataclasses
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from aworld_train.errors import RunDirectoryError
from aworld_train.engine import resume_checkpoint
from aworld_train.engine.hf import (
    TrainerConfig,
    all_argument_names,
    completion_text,
    last_checkpoint,
    trainer_callback,
)


def _checkpoint(folder: Path, name: str, finished: bool = True) -> Path:
    path = folder / name
    path.mkdir(parents=True)
    if finished:
        (path / "trainer_state.json").write_text("{}")
    return path


def test_last_checkpoint_is_the_highest_finished_step(tmp_path: Path) -> None:
    assert last_checkpoint(tmp_path) is None
    _checkpoint(tmp_path, "checkpoint-9")
    ten = _checkpoint(tmp_path, "checkpoint-10")  # 10 > 9, though "10" < "9" as text
    _checkpoint(tmp_path, "checkpoint-12", finished=False)  # a save an interrupt cut short
    _checkpoint(tmp_path, "checkpoint-last")
    assert last_checkpoint(tmp_path) == ten


def test_resume_checkpoint_reads_the_run_directory_or_says_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(RunDirectoryError, match="no checkpoint to resume from.*save_steps"):
        resume_checkpoint(tmp_path)
    two = _checkpoint(tmp_path / "checkpoints", "checkpoint-2")
    assert resume_checkpoint(tmp_path) == two


def test_a_checkpoint_cut_short_is_passed_over_with_a_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    partial = _checkpoint(tmp_path / "checkpoints", "checkpoint-4", finished=False)
    with pytest.raises(RunDirectoryError, match=f"{partial} was cut short while being saved"):
        resume_checkpoint(tmp_path)
    two = _checkpoint(tmp_path / "checkpoints", "checkpoint-2")
    _checkpoint(tmp_path / "checkpoints", "checkpoint-1", finished=False)  # older: no matter
    with caplog.at_level("WARNING", logger="aworld_train"):
        assert resume_checkpoint(tmp_path) == two
    assert [r.getMessage() for r in caplog.records] == [
        f"{partial} was cut short while being saved (it has no trainer_state.json): "
        f"resuming from {two}, the last whole checkpoint"
    ]


def test_a_resumed_runs_train_loss_covers_the_steps_before_its_checkpoint() -> None:
    """The trainer's summary averages the steps of its own call (2 here, at 0.1); the steps
    before the checkpoint (logged every 2 steps: 0.5 and 0.3) count too."""
    logged: list[dict[str, Any]] = []
    callback = trainer_callback(object, lambda *_: None, lambda _, m: logged.append(m))()
    history = [{"step": 2, "loss": 0.5}, {"step": 4, "loss": 0.3}, {"step": 6, "loss": 0.1}]
    state = types.SimpleNamespace(
        is_world_process_zero=True, max_steps=6, global_step=4, log_history=history[:2]
    )
    callback.on_train_begin(None, state, None)
    state.global_step, state.log_history = 6, history
    callback.on_log(None, state, None, logs={"train_loss": 0.1, "train_runtime": 1.0})
    assert logged[-1]["train_loss"] == pytest.approx((0.5 * 2 + 0.3 * 2 + 0.1 * 2) / 6)
    assert logged[-1]["train_runtime"] == 1.0
    fresh = types.SimpleNamespace(is_world_process_zero=True, max_steps=6, global_step=0)
    callback.on_train_begin(None, fresh, None)
    callback.on_log(None, fresh, None, logs={"train_loss": 0.1})
    assert logged[-1] == {"train_loss": 0.1}, "a run that resumed nothing keeps the trainer's"


@pytest.mark.parametrize(
    "completion, text",
    [
        ("42", "42"),
        ({"role": "assistant", "content": "42"}, "42"),
        (
            [
                {"role": "assistant", "content": "4"},
                {"role": "tool", "content": "x"},
                {"role": "assistant", "content": "2"},
            ],
            "42",
        ),
        ([{"content": "42"}, {"role": "assistant", "content": None}], "42"),
    ],
)
def test_completion_text_keeps_what_the_model_wrote(completion: Any, text: str) -> None:
    assert completion_text(completion) == text


def test_trainer_callback_reports_from_the_main_process_only() -> None:
    started: list[tuple[int, int]] = []
    logged: list[tuple[int, dict[str, Any]]] = []
    callback = trainer_callback(
        object,
        lambda total, done: started.append((total, done)),
        lambda step, metrics: logged.append((step, metrics)),
    )()
    main = types.SimpleNamespace(is_world_process_zero=True, max_steps=8, global_step=3)
    other = types.SimpleNamespace(is_world_process_zero=False, max_steps=8, global_step=3)
    for state in (main, other):
        callback.on_train_begin(None, state, None)
        callback.on_log(None, state, None, logs={"loss": 0.5})
        callback.on_log(None, state, None, logs=None)
    assert started == [(8, 3)]
    assert logged == [(3, {"loss": 0.5})]


def test_trainer_config_counts_processes_on_every_node() -> None:
    assert not TrainerConfig(algorithm="sft", arguments={}).distributed
    config = TrainerConfig(algorithm="sft", arguments={}, nproc_per_node=2, nnodes=3)
    assert (config.world_size, config.distributed) == (6, True)


def test_argument_names_are_read_once_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @dataclasses.dataclass
    class SftArgs:
        lr: float = 0.1
        derived: int = dataclasses.field(init=False, default=0)

    @dataclasses.dataclass
    class GrpoArgs(SftArgs):
        beta: float = 0.0

    module = types.ModuleType("fake_trainer")
    module.SftArgs, module.GrpoArgs = SftArgs, GrpoArgs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_trainer", module)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    classes = {"sft": "fake_trainer:SftArgs", "grpo": "fake_trainer:GrpoArgs"}

    assert all_argument_names("pytest", classes) == {"lr", "beta"}
    [cached] = (tmp_path / "aworld-train").glob("*-section-keys.json")
    assert json.loads(cached.read_text()) == ["beta", "lr"]
    cached.write_text(json.dumps(["from_the_cache"]))
    assert all_argument_names("pytest", classes) == {"from_the_cache"}
    cached.write_text("not json")  # a damaged file is made again
    assert all_argument_names("pytest", classes) == {"lr", "beta"}
