"""``aworld-train eval`` and ``show`` where no model loads: the torch-free core's one-line
refusal, a run's rollout samples cut short, and what is said of a run without a final model
(its export note included).
(Evaluating a model is tests/test_eval.py, in an engine's environment.)"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from typing import Any

import pytest
from aworld_train import AgentTrainer
from aworld_train.errors import TrainingError
from aworld_train.evaluation._target import _no_final_model, eval_hint
from aworld_train.run.export import ExportNote, note_export, read_export_note
from aworld_train.run.samples import append_samples, read_samples
from helpers import RecordingProcessor, run_cli


def make_run(folder: Path, status: str = "failed") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(
        json.dumps({"engine": "trl", "status": status, "started_at": "2026-01-01T00:00:00"})
    )
    (folder / "job.yaml").write_text("agent: {name: tiny}\n")
    return folder


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is not None, reason="the core's environment has no torch"
)
def test_eval_without_torch_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "eval", make_run(tmp_path / "run"), "--json")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "error: aworld-train eval needs torch and transformers (torch and transformers not "
        "installed here): install an engine (pip install aworld-train-<engine>) and run eval in "
        "its environment"
    ]


def test_a_cut_off_last_sample_line_is_skipped(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    append_samples(run, 1, [{"prompt": "p", "completion": "c", "reward": 1.0}])
    with open(run / "samples.jsonl", "a", encoding="utf-8") as file:
        file.write('{"step": 2, "prompt": "p", "compl')  # the run was killed mid-write
    assert [sample["step"] for sample in read_samples(run)] == [1]


def test_a_bad_sample_line_elsewhere_names_the_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    append_samples(run, 1, [{"prompt": "p", "completion": "c", "reward": 1.0}])
    with open(run / "samples.jsonl", "a", encoding="utf-8") as file:
        file.write("not json\n")
    append_samples(run, 2, [{"prompt": "p", "completion": "c", "reward": 1.0}])
    code, _, err = run_cli(capsys, "show", run)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {run / 'samples.jsonl'}:2: ")


def test_show_of_a_run_with_a_cut_off_sample_and_no_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    append_samples(run, 1, [{"prompt": "p", "completion": "c", "reward": 1.0}])
    with open(run / "samples.jsonl", "a", encoding="utf-8") as file:
        file.write('{"step": 2')
    code, out, err = run_cli(capsys, "show", run)
    assert code == 0, err
    assert "last rollout samples (1 of 1):" in out
    # No model/ nor checkpoint: the command it suggests is one that works.
    assert (
        f"eval results: none (no model/ nor checkpoint: aworld-train eval {run} --model base)"
        in out
    )


def test_a_run_without_a_final_model_is_one_sentence(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run").resolve()
    assert _no_final_model(run) == (
        f"run {run} (failed) has no final model (model/) and saved no checkpoint: only its base "
        "model can be evaluated (--model base)"
    )


class SavesShards(RecordingProcessor):
    """A toy engine whose library saves checkpoints eval cannot load as they are: it saves one,
    names it in the run's export note with its own converter, and fails before its export."""

    def train(self) -> Any:
        self.context.metrics.log(1, {"reward": 0.5, "loss": 1.0})
        shards = self.context.run_dir / "checkpoints" / "step_1"
        shards.mkdir(parents=True)
        (shards / "rank_0.pt").write_bytes(b"shard")
        note_export(self.context.run_dir, shards, "python -m toy_shards.export {run}")
        raise TrainingError("planted failure after the checkpoint")


def test_a_run_whose_checkpoint_needs_converting_is_told_the_engines_command(
    toy_job: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    AgentTrainer.register_processor("shards", SavesShards)
    toy_job["train_engine_name"] = "shards"
    trainer = AgentTrainer(**toy_job)
    with pytest.raises(TrainingError, match="planted"):
        trainer.train()
    run = trainer.run_dir.path.resolve()
    assert _no_final_model(run) == (
        f"run {run} (failed) has no final model (model/); its last checkpoint, "
        f"checkpoints/step_1, does not load as it is: convert it into model/ with python -m "
        f"toy_shards.export {run}, then evaluate the run"
    )
    code, out, err = run_cli(capsys, "show", run)
    assert code == 0, err
    assert (
        f"eval results: none (no model/: python -m toy_shards.export {run} converts "
        f"checkpoints/step_1, then aworld-train eval {run})"
    ) in out


def test_an_export_note_is_read_back_wherever_the_run_moved(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run").resolve()
    (run / "checkpoints" / "global_step_6").mkdir(parents=True)
    note_export(run, run / "checkpoints" / "global_step_6", "convert {run}")
    moved = run.rename(tmp_path / "moved")
    assert read_export_note(moved) == ExportNote("checkpoints/global_step_6", f"convert {moved}")
    assert eval_hint(moved) == (
        f"no model/: convert {moved} converts checkpoints/global_step_6, then aworld-train eval "
        f"{moved}"
    )


@pytest.mark.parametrize(
    "note",
    [
        '{"checkpoint": "checkpoints/gone", "command": "convert {run}"}',
        '{"checkpoint": 6, "command": "convert {run}"}',
        '["checkpoints/global_step_6"]',
        '{"checkpoint": "checkp',
    ],
)
def test_an_export_note_that_does_not_hold_is_no_hint(tmp_path: Path, note: str) -> None:
    run = make_run(tmp_path / "run").resolve()
    (run / "checkpoints" / "global_step_6").mkdir(parents=True)
    (run / "export.json").write_text(note)
    assert read_export_note(run) is None
    assert eval_hint(run) == f"no model/ nor checkpoint: aworld-train eval {run} --model base"


def test_an_export_note_names_a_checkpoint_of_the_run_and_the_run(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(ValueError):
        note_export(run, tmp_path / "elsewhere", "convert {run}")
    with pytest.raises(ValueError, match="has no {run}"):
        note_export(run, run / "checkpoints", "convert")
    assert not (run / "export.json").exists()
