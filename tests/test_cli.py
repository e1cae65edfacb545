"""The ``aworld-train`` command end to end.

Each call is a real subprocess, except the matrix of bad inputs and the flag handling: those
call the same ``main`` in-process (exit code, stdout and stderr captured) to keep the suite
fast, after the subprocess tests have shown the same paths end to end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ARITHMETIC, ENV_VARS, manifest, only_run_dir, read_jsonl, run_python, write_jsonl

EXECUTABLE = Path(sys.executable).with_name("aworld-train")

REWARDS = '''
import time


def score(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if solution_str.strip() == ground_truth else 0.0


def slow(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(0.005)
    return 1.0 if solution_str.strip() == ground_truth else 0.0


def two_args(solution_str, ground_truth):
    return 1.0
'''


def aworld_train(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    return subprocess.run([str(EXECUTABLE), *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def aworld_train_in_process(capsys: pytest.CaptureFixture[str],
                            *args: str | Path) -> subprocess.CompletedProcess[str]:
    from aworld_train.cli import main

    code = 0
    try:
        main([str(arg) for arg in args])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def write_job(folder: Path, **fields: Any) -> Path:
    """A valid toy job in ``folder`` (dataset, reward file, job.yaml); ``fields`` replace its
    fields (``None`` removes one)."""
    write_jsonl(folder / "train.jsonl",
                [{"question": r["prompt"], "answer": r["ground_truth"]} for r in ARITHMETIC])
    (folder / "rewards.py").write_text(REWARDS)
    job: dict[str, Any] = {
        "engine": "toy",
        "agent": {"name": "adder"},
        "train_dataset": "train.jsonl",
        "reward": "rewards.py:score",
        "columns": {"prompt": "question", "ground_truth": "answer"},
        "config": {"max_steps": 5, "batch_size": 4, "toy": {"temperature": 1.0}},
    }
    job.update(fields)
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in job.items() if v is not None}))
    return path


def assert_one_line_error(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2, exactly one line on stderr, no traceback; the line holds every fragment."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def test_engines_lists_names_distributions_versions_and_status() -> None:
    result = aworld_train("engines")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "DISTRIBUTION", "VERSION", "STATUS"]
    rows = {tuple(line.split()[:4]) for line in lines[1:]}
    assert ("toy", "aworld-train-toy", "0.1.0", "ok") in rows
    assert ("broken", "aworld-train-broken", "0.1.0", "ok") in rows, "listing imports nothing"
    twins = [line for line in lines if line.startswith("twin ")]
    assert len(twins) == 2 and all("conflict" in line for line in twins)


def test_engines_json() -> None:
    result = aworld_train("engines", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    toy = next(row for row in rows if row["name"] == "toy")
    assert toy == {"name": "toy", "distribution": "aworld-train-toy", "version": "0.1.0",
                   "status": "ok", "object": "aworld_train_toy.engine"}
    assert {row["name"] for row in rows} >= {"toy", "twin", "broken", "mismatch"}


def test_engines_check_imports_and_validates_each_engine() -> None:
    result = aworld_train("engines", "--json", "--check")
    assert result.returncode == 0, result.stderr
    status = {(row["name"], row["distribution"]): row["status"] for row in json.loads(result.stdout)}
    assert status[("toy", "aworld-train-toy")] == "ok"
    assert status[("broken", "aworld-train-broken")].startswith("broken: ")
    assert "RuntimeError: aworld_train_broken always fails to import" in status[
        ("broken", "aworld-train-broken")]
    assert status[("mismatch", "aworld-train-mismatch")].startswith("broken: ")
    assert "tokenizer" in status[("mismatch", "aworld-train-mismatch")]
    assert status[("twin", "aworld-train-dup")].startswith("conflict: ")


def test_engines_command_imports_no_engine_and_nothing_heavy() -> None:
    code = (
        "import json, sys\n"
        "from aworld_train.cli import main\n"
        "main(['engines', '--json'])\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    imported = set(json.loads(result.stderr.strip().splitlines()[-1]))
    heavy = {"torch", "transformers", "datasets", "ray", "verl", "swift", "trl", "aworld",
             "aworld_train_toy", "aworld_train_broken", "aworld_train_dup", "rich", "matplotlib"}
    assert not imported & heavy, imported & heavy


def test_check_passes_a_valid_job_and_writes_no_run(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    result = aworld_train("check", job)
    assert result.returncode == 0, result.stderr
    assert "all checks passed" in result.stdout
    for row in ("agent", "dataset", "reward", "config", "toy", "core"):
        assert row in result.stdout
    assert "sample row 0 scored 1" in result.stdout
    assert not (tmp_path / "runs").exists()


BAD_JOBS: list[tuple[str, dict[str, Any], list[str], tuple[str, ...]]] = [
    ("unknown engine", {"engine": "tyo"}, [], ("unknown engine 'tyo'", "did you mean 'toy'?")),
    ("conflicting engine", {"engine": "twin"}, [], ("aworld-train-dup", "aworld-train-toy")),
    ("broken engine", {"engine": "broken"}, [], ("aworld-train-broken", "failed to import")),
    ("missing dataset", {"train_dataset": "nope.jsonl"}, [], ("train_dataset not found", "nope.jsonl")),
    ("missing reward function", {"reward": "rewards.py:scroe"}, [], ("'scroe' not found", "rewards.py")),
    ("reward signature", {"reward": "rewards.py:two_args"}, [], ("two_args", "expected reward(")),
    ("unknown builtin", {"reward": "exact_mach"}, [], ("did you mean 'exact_match'?",)),
    ("unknown config key", {}, ["-o", "max_step=3"], ("unknown config key 'max_step'",
                                                     "did you mean 'max_steps'?")),
    ("config type", {}, ["-o", "max_steps=ten"], ("'max_steps' must be int",)),
    ("engine section key", {}, ["-o", "toy.temprature=2"], ("toy.temprature",
                                                           "did you mean 'temperature'?")),
    ("agent file missing", {"agent": "agent.yaml"}, [], ("agent file not found", "agent.yaml")),
    ("agent key", {"agent": {"name": "a", "max_turn": 2}}, [], ("unknown agent key 'max_turn'",)),
    ("columns", {"columns": {"prompt": "q"}}, [], ("train.jsonl:1", "missing column 'prompt'",
                                                   "mapped from 'q'")),
]


@pytest.mark.parametrize(("fields", "args", "fragments"),
                         [case[1:] for case in BAD_JOBS], ids=[case[0] for case in BAD_JOBS])
def test_check_reports_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, Any], args: list[str],
    fragments: tuple[str, ...],
) -> None:
    job = write_job(tmp_path, **fields)
    assert_one_line_error(aworld_train_in_process(capsys, "check", job, *args), *fragments)


def test_check_reports_a_malformed_jsonl_line_with_its_number(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    with (tmp_path / "train.jsonl").open("a") as handle:
        handle.write('{"question": "What is 3 + 3?", "answer": \n')
    assert_one_line_error(aworld_train("check", job), "train.jsonl:5: invalid JSON")


def test_check_reports_job_file_errors(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path)
    job.write_text(job.read_text() + "reward_fn: x\n")
    assert_one_line_error(aworld_train_in_process(capsys, "check", job),
                          "job.yaml: unknown job field 'reward_fn'", "did you mean 'reward'?")
    job.write_text("engine: toy\ntrain_dataset: [train.jsonl\n")
    assert_one_line_error(aworld_train_in_process(capsys, "check", job), "job.yaml:",
                          "invalid YAML")
    assert_one_line_error(aworld_train_in_process(capsys, "check", tmp_path / "none.yaml"),
                          "job file not found")
    assert_one_line_error(aworld_train_in_process(capsys, "check", job, "--no-such-flag"),
                          "no-such-flag")


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    job = write_job(tmp_path, engine="tyo")
    result = aworld_train("check", job, "--debug")
    assert result.returncode == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert "PluginError" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: unknown engine 'tyo'")


def test_train_runs_a_job_into_a_run_directory(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    result = aworld_train("train", job, "-o", "max_steps=4", "-o", "toy.temperature=0.5",
                          cwd=tmp_path.parent)
    assert result.returncode == 0, result.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    assert f"run directory: {run_dir}" in result.stdout
    assert "final metrics: reward" in result.stdout
    assert "training" in result.stdout and " 4/4 " in result.stdout, "the engine's step total"
    assert manifest(run_dir)["status"] == "completed"
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3, 4]
    saved = yaml.safe_load((run_dir / "job.yaml").read_text())
    assert saved["config"]["toy"] == {"temperature": 0.5}
    assert {p.name for p in run_dir.iterdir()} >= {"job.yaml", "manifest.json", "metrics.jsonl",
                                                   "reward.png", "loss.png", "model"}


def test_train_flags_replace_the_job_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    job = write_job(tmp_path, engine="twin", reward="nope.py:score")
    other = tmp_path / "other"
    other.mkdir()
    write_jsonl(other / "plain.jsonl", ARITHMETIC[:2])
    (other / "config.yaml").write_text("max_steps: 3\nbatch_size: 2\n")
    (tmp_path / "agent.json").write_text(json.dumps({"name": "from-flag"}))
    monkeypatch.chdir(other)
    result = aworld_train_in_process(
        capsys, "train", job, "--engine", "toy", "--train-dataset", "plain.jsonl",
        "--reward", "exact_match", "--config", "config.yaml", "--agent", tmp_path / "agent.json",
        "--run-path", "out")
    assert result.returncode == 0, result.stderr
    run_dir = only_run_dir(other / "out")
    saved = yaml.safe_load((run_dir / "job.yaml").read_text())
    assert saved["engine"] == "toy"
    assert saved["agent"]["name"] == "from-flag"
    assert saved["reward"] == "exact_match"
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3]
    assert not (tmp_path / "runs").exists()


def test_train_into_a_run_path_that_is_a_file(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    (tmp_path / "runs").write_text("a file")
    assert_one_line_error(aworld_train("train", job), "runs is a file, not a directory")
    assert (tmp_path / "runs").read_text() == "a file"


def test_train_with_a_bad_reward_marks_the_run_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, reward="rewards.py:two_args")
    assert_one_line_error(aworld_train_in_process(capsys, "train", job), "two_args")
    assert manifest(only_run_dir(tmp_path / "runs"))["status"] == "failed"


def test_sigterm_interrupts_training_and_resume_continues(tmp_path: Path) -> None:
    job = write_job(tmp_path, reward="rewards.py:slow",
                    config={"max_steps": 100000, "batch_size": 1, "save_steps": 5})
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS}
    process = subprocess.Popen([str(EXECUTABLE), "train", str(job)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 60
        saved: list[Path] = []
        while time.monotonic() < deadline and process.poll() is None and not saved:
            saved = list((tmp_path / "runs").glob("*/checkpoint-5/policy.json"))
            time.sleep(0.1)
        assert saved, f"no checkpoint within 60 s; exit {process.poll()}"
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "interrupted by SIGTERM" in stderr
    interrupted = only_run_dir(tmp_path / "runs")
    assert manifest(interrupted)["status"] == "interrupted"
    last = max(int(p.parent.name.split("-")[1]) for p in interrupted.glob("checkpoint-*/policy.json"))

    result = aworld_train("train", job, "--resume", interrupted.name, "-o", f"max_steps={last + 3}",
                          "-o", "save_steps=1000")
    assert result.returncode == 0, result.stderr
    resumed = next(p for p in (tmp_path / "runs").iterdir() if p != interrupted)
    assert [r["step"] for r in read_jsonl(resumed / "metrics.jsonl")] == [last + 1, last + 2,
                                                                          last + 3]
    assert manifest(resumed)["resumed_from"] == str(interrupted)


def test_resume_of_an_unknown_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path)
    assert_one_line_error(aworld_train_in_process(capsys, "train", job, "--resume", "nowhere"),
                          "no run to resume at nowhere")


def test_check_with_flags_and_no_job_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    write_jsonl(tmp_path / "plain.jsonl", ARITHMETIC)
    monkeypatch.chdir(tmp_path)
    result = aworld_train_in_process(capsys, "check", "--engine", "toy", "--train-dataset",
                                     "plain.jsonl", "--reward", "exact_match")
    assert result.returncode == 0, result.stderr
    assert "all checks passed" in result.stdout
    assert_one_line_error(aworld_train_in_process(capsys, "check", "--engine", "toy"),
                          "no train_dataset")


def test_engines_when_none_are_selected(capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_LOAD_PLUGINS", "")
    result = aworld_train_in_process(capsys, "engines")
    assert result.returncode == 0
    assert result.stdout.startswith("no engines installed")
    assert json.loads(aworld_train_in_process(capsys, "engines", "--json").stdout) == []
