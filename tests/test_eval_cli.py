"""``aworld-train eval`` and ``show`` where no model loads: the torch-free core's one-line
refusal, a run's rollout samples cut short, and what is said of a run without a final model.
(Evaluating a model is tests/test_eval.py, in an engine's environment.)"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from aworld_train.evaluation._target import _no_final_model
from aworld_train.run.samples import append_samples, read_samples
from helpers import run_cli


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


def test_a_verl_run_without_a_final_model_is_told_to_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run").resolve()
    (run / "checkpoints" / "global_step_6" / "actor").mkdir(parents=True)
    (run / "checkpoints" / "latest_checkpointed_iteration.txt").write_text("6")
    assert _no_final_model(run) == (
        f"run {run} (failed) has no final model (model/); its last checkpoint is VeRL's sharded "
        f"checkpoints/global_step_6: convert it into model/ with python -m "
        f"aworld_train_verl.export {run}, then evaluate the run"
    )
    code, out, _ = run_cli(capsys, "show", run)
    assert code == 0
    assert (
        f"eval results: none (no model/: python -m aworld_train_verl.export {run} converts "
        f"checkpoints/global_step_6, then aworld-train eval {run})"
    ) in out
