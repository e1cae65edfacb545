"""The ``aworld-train`` command end to end.

Each call is a real subprocess, except the matrix of bad inputs and the flag handling: those
call the same ``main`` in-process (exit code, stdout and stderr captured) to keep the suite
fast, after the subprocess tests have shown the same paths end to end.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from aworld_train import AgentTrainer
from helpers import (
    ARITHMETIC,
    ENV_VARS,
    RecordingProcessor,
    engine_source,
    lay_out_engine,
    manifest,
    only_run_dir,
    read_jsonl,
    run_cli,
    run_python,
    signal_when,
    write_jsonl,
)

EXECUTABLE = Path(sys.executable).with_name("aworld-train")

REWARDS = '''
import time


def score(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if solution_str.strip() == ground_truth else 0.0


def slow(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(0.005)
    return 1.0 if solution_str.strip() == ground_truth else 0.0


def stalls(data_source, solution_str, ground_truth, extra_info=None):
    """Tells the test it runs (in the checks' child process), then takes its time."""
    open("reward-started", "w").close()
    time.sleep(60)
    return 1.0


def two_args(solution_str, ground_truth):
    return 1.0
'''


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without plugin selection, plus ``extra``."""
    return {**{k: v for k, v in os.environ.items() if k not in ENV_VARS}, **extra}


def aworld_train(
    *args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXECUTABLE), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env or clean_env(),
        timeout=120,
    )


def aworld_train_in_process(
    capsys: pytest.CaptureFixture[str], *args: str | Path
) -> subprocess.CompletedProcess[str]:
    """:func:`run_cli`'s outcome in the shape :func:`aworld_train` returns."""
    code, out, err = run_cli(capsys, *args)
    return subprocess.CompletedProcess(args, code, out, err)


def write_job(folder: Path, **fields: Any) -> Path:
    """A valid toy job in ``folder`` (dataset, reward file, job.yaml); ``fields`` replace its
    fields (``None`` removes one)."""
    write_jsonl(
        folder / "train.jsonl",
        [{"question": r["prompt"], "answer": r["ground_truth"]} for r in ARITHMETIC],
    )
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
    assert toy == {
        "name": "toy",
        "distribution": "aworld-train-toy",
        "version": "0.1.0",
        "status": "ok",
        "object": "aworld_train_toy.engine",
    }
    assert {row["name"] for row in rows} >= {"toy", "twin", "broken", "mismatch"}


def test_engines_check_imports_and_validates_each_engine() -> None:
    result = aworld_train("engines", "--json", "--check")
    # Broken engines are installed here: the command fails, so that CI can rely on it.
    assert result.returncode == 1, result.stderr
    assert result.stderr == "error: 3 installed engine(s) cannot be used: broken, mismatch, twin\n"
    status = {
        (row["name"], row["distribution"]): row["status"] for row in json.loads(result.stdout)
    }
    assert status[("toy", "aworld-train-toy")] == "ok"
    assert status[("broken", "aworld-train-broken")].startswith("broken: ")
    assert (
        "RuntimeError: aworld_train_broken always fails to import"
        in status[("broken", "aworld-train-broken")]
    )
    assert status[("mismatch", "aworld-train-mismatch")].startswith("broken: ")
    assert "tokenizer" in status[("mismatch", "aworld-train-mismatch")]
    assert status[("twin", "aworld-train-dup")].startswith("conflict: ")


def test_engines_check_passes_when_every_engine_works() -> None:
    env = clean_env(AWORLD_TRAIN_LOAD_PLUGINS="aworld-train-toy")
    result = aworld_train("engines", "--check", env=env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "toy" in result.stdout
    listed = aworld_train("engines")  # listing alone reads metadata: it fails on nothing
    assert listed.returncode == 0 and "broken" in listed.stdout


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
    heavy = {
        "torch",
        "transformers",
        "datasets",
        "ray",
        "verl",
        "swift",
        "trl",
        "aworld",
        "aworld_train_toy",
        "aworld_train_broken",
        "aworld_train_dup",
        "rich",
        "matplotlib",
    }
    assert not imported & heavy, imported & heavy


@pytest.mark.slow
def test_check_passes_a_valid_job_and_writes_no_run(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    result = aworld_train("check", job)
    assert result.returncode == 0, result.stderr
    assert "all checks passed" in result.stdout
    for row in ("agent", "dataset", "reward", "config", "toy", "core"):
        assert row in result.stdout
    assert "the ground truth scores 1 on all 4 rows" in result.stdout
    assert not (tmp_path / "runs").exists()


BAD_JOBS: list[tuple[str, dict[str, Any], list[str], tuple[str, ...]]] = [
    ("unknown engine", {"engine": "tyo"}, [], ("unknown engine 'tyo'", "did you mean 'toy'?")),
    ("conflicting engine", {"engine": "twin"}, [], ("aworld-train-dup", "aworld-train-toy")),
    ("broken engine", {"engine": "broken"}, [], ("aworld-train-broken", "failed to import")),
    (
        "missing dataset",
        {"train_dataset": "nope.jsonl"},
        [],
        ("train_dataset not found", "nope.jsonl"),
    ),
    (
        "missing reward function",
        {"reward": "rewards.py:scroe"},
        [],
        ("'scroe' not found", "rewards.py"),
    ),
    ("reward signature", {"reward": "rewards.py:two_args"}, [], ("two_args", "expected reward(")),
    ("unknown builtin", {"reward": "exact_mach"}, [], ("did you mean 'exact_match'?",)),
    (
        "unknown config key",
        {},
        ["-o", "max_step=3"],
        ("unknown config key 'max_step'", "did you mean 'max_steps'?"),
    ),
    ("config type", {}, ["-o", "max_steps=ten"], ("'max_steps' must be an integer",)),
    (
        "engine section key",
        {},
        ["-o", "toy.temprature=2"],
        ("toy.temprature", "did you mean 'temperature'?"),
    ),
    ("agent file missing", {"agent": "agent.yaml"}, [], ("agent file not found", "agent.yaml")),
    ("agent key", {"agent": {"name": "a", "max_turn": 2}}, [], ("unknown agent key 'max_turn'",)),
    (
        "columns",
        {"columns": {"prompt": "q"}},
        [],
        ("train.jsonl:1", "missing column 'prompt'", "mapped from 'q'"),
    ),
]


@pytest.mark.parametrize(
    ("fields", "args", "fragments"),
    [case[1:] for case in BAD_JOBS],
    ids=[case[0] for case in BAD_JOBS],
)
def test_check_reports_bad_input_in_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    fields: dict[str, Any],
    args: list[str],
    fragments: tuple[str, ...],
) -> None:
    job = write_job(tmp_path, **fields)
    assert_one_line_error(aworld_train_in_process(capsys, "check", job, *args), *fragments)


def test_a_failed_check_prints_the_rows_decided_before_it_and_no_empty_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path)
    first = aworld_train_in_process(capsys, "check", job, "-o", "max_step=3")
    assert_one_line_error(first, "unknown config key 'max_step'")
    assert first.stdout == "", "no row was decided: no table"
    later = aworld_train_in_process(
        capsys, "check", write_job(tmp_path, reward="rewards.py:two_args")
    )
    assert_one_line_error(later, "two_args")
    assert later.stdout.startswith("checks") and "max_steps 5" in later.stdout, later.stdout


@pytest.mark.parametrize("command", ["check", "train"])
def test_a_node_rank_above_zero_on_a_one_node_job_is_refused_by_check_and_train(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: str,
) -> None:
    job = write_job(tmp_path)
    monkeypatch.setenv("NODE_RANK", "1")
    assert_one_line_error(
        aworld_train_in_process(capsys, command, job), "NODE_RANK is 1 but resources.nnodes is 1"
    )
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_a_node_above_zero_ends_naming_node_zeros_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job = write_job(tmp_path)
    monkeypatch.setenv("NODE_RANK", "1")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # node 1's working folder
    result = aworld_train_in_process(
        capsys, "train", job, "-o", "resources.nnodes=2", "-o", "max_steps=2"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "node 1: the run directory is node 0's"
    assert "final metrics" not in result.stdout, "node 0 holds the metrics"


@pytest.mark.slow
def test_check_reports_a_malformed_jsonl_line_with_its_number(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    with (tmp_path / "train.jsonl").open("a") as handle:
        handle.write('{"question": "What is 3 + 3?", "answer": \n')
    assert_one_line_error(aworld_train("check", job), "train.jsonl:5: invalid JSON")


def test_check_reports_job_file_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path)
    job.write_text(job.read_text() + "reward_fn: x\n")
    assert_one_line_error(
        aworld_train_in_process(capsys, "check", job),
        "job.yaml: unknown job field 'reward_fn'",
        "did you mean 'reward'?",
    )
    job.write_text("engine: toy\ntrain_dataset: [train.jsonl\n")
    assert_one_line_error(
        aworld_train_in_process(capsys, "check", job), "job.yaml:", "invalid YAML"
    )
    assert_one_line_error(
        aworld_train_in_process(capsys, "check", tmp_path / "none.yaml"), "job file not found"
    )
    assert_one_line_error(
        aworld_train_in_process(capsys, "check", job, "--no-such-flag"), "no-such-flag"
    )


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    job = write_job(tmp_path, engine="tyo")
    result = aworld_train("check", job, "--debug")
    assert result.returncode == 2
    assert "Traceback (most recent call last)" in result.stderr
    assert "PluginError" in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: unknown engine 'tyo'")


@pytest.mark.slow
def test_train_runs_a_job_into_a_run_directory(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    result = aworld_train(
        "train", job, "-o", "max_steps=4", "-o", "toy.temperature=0.5", cwd=tmp_path.parent
    )
    assert result.returncode == 0, result.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    assert f"run directory: {run_dir}" in result.stdout
    assert "final metrics: reward" in result.stdout
    assert "training" in result.stdout and " 4/4 " in result.stdout, "the engine's step total"
    assert manifest(run_dir)["status"] == "completed"
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3, 4]
    saved = yaml.safe_load((run_dir / "job.yaml").read_text())
    assert saved["config"]["toy"] == {"temperature": 0.5}
    assert {p.name for p in run_dir.iterdir()} >= {
        "job.yaml",
        "manifest.json",
        "metrics.jsonl",
        "reward.png",
        "loss.png",
        "model",
    }


def test_train_flags_replace_the_job_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    job = write_job(tmp_path, engine="twin", reward="nope.py:score")
    other = tmp_path / "other"
    other.mkdir()
    # The job's columns mapping (question/answer) still applies to the dataset the flag names.
    write_jsonl(
        other / "plain.jsonl",
        [{"question": row["prompt"], "answer": row["ground_truth"]} for row in ARITHMETIC[:2]],
    )
    (other / "config.yaml").write_text("max_steps: 3\nbatch_size: 2\n")
    (tmp_path / "agent.json").write_text(json.dumps({"name": "from-flag"}))
    monkeypatch.chdir(other)
    result = aworld_train_in_process(
        capsys,
        "train",
        job,
        "--engine",
        "toy",
        "--train-dataset",
        "plain.jsonl",
        "--reward",
        "exact_match",
        "--config",
        "config.yaml",
        "--agent",
        tmp_path / "agent.json",
        "--run-path",
        "out",
    )
    assert result.returncode == 0, result.stderr
    run_dir = only_run_dir(other / "out")
    saved = yaml.safe_load((run_dir / "job.yaml").read_text())
    assert saved["engine"] == "toy"
    assert saved["agent"]["name"] == "from-flag"
    assert saved["reward"] == "exact_match"
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2, 3]
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "inline", "system_prompt": "Add."}',
        "{name: inline, system_prompt: Add.}",
        "name: inline",
    ],
)
def test_the_agent_flag_takes_a_mapping_written_as_text(
    text: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--agent takes what its help says: a mapping as JSON or YAML text."""
    job = write_job(tmp_path)
    result = aworld_train_in_process(capsys, "check", job, "--agent", text)
    assert result.returncode == 0, result.stderr
    assert "'inline'" in result.stdout, "the check table names the inline agent"
    help_text = aworld_train_in_process(capsys, "check", "--help").stdout
    assert "a mapping as JSON/YAML text" in " ".join(help_text.split())


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ('{"name": "a"', ("--agent:1: invalid YAML",)),
        ("- name: a", ("--agent: an inline agent must be a mapping", "not list")),
        ('{"nam": "a"}', ("unknown agent key 'nam'", "did you mean 'name'")),
    ],
)
def test_an_agent_flag_mapping_that_is_wrong_is_one_line(
    text: str, fragments: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path)
    assert_one_line_error(
        aworld_train_in_process(capsys, "check", job, "--agent", text), *fragments
    )


def test_train_into_a_run_path_that_is_a_file(tmp_path: Path) -> None:
    job = write_job(tmp_path)
    (tmp_path / "runs").write_text("a file")
    assert_one_line_error(aworld_train("train", job), "runs is a file, not a directory")
    assert (tmp_path / "runs").read_text() == "a file"


def test_train_that_fails_a_check_leaves_no_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, reward="rewards.py:two_args")
    assert_one_line_error(aworld_train_in_process(capsys, "train", job), "two_args")
    assert list((tmp_path / "runs").iterdir()) == []


@pytest.mark.slow
def test_sigterm_interrupts_training_and_the_printed_command_resumes(tmp_path: Path) -> None:
    job = write_job(
        tmp_path,
        reward="rewards.py:slow",
        config={"max_steps": 100000, "batch_size": 1, "save_steps": 5},
    )
    process = subprocess.Popen(
        [str(EXECUTABLE), "train", str(job), "-o", "toy.temperature=1.5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
    )
    stdout, stderr = signal_when(
        process, lambda: any((tmp_path / "runs").glob("*/checkpoint-5/policy.json")), signal.SIGTERM
    )
    assert process.returncode == 130, stderr
    assert "interrupted: training interrupted by SIGTERM" in stderr
    interrupted = only_run_dir(tmp_path / "runs")
    assert f"run directory: {interrupted}" in stdout
    assert manifest(interrupted)["status"] == "interrupted"
    last = max(
        int(p.parent.name.split("-")[1]) for p in interrupted.glob("checkpoint-*/policy.json")
    )
    parent = read_jsonl(interrupted / "metrics.jsonl")

    command = f"aworld-train train {job} -o toy.temperature=1.5 --resume {interrupted}"
    assert f"to continue this run: {command}" in stderr.splitlines()
    # show says the same from the saved job, which holds the -o override.
    shown = aworld_train("show", interrupted)
    saved = f"aworld-train train {interrupted / 'job.yaml'} --resume {interrupted}"
    assert f"to continue this run: {saved}" in shown.stdout.splitlines(), shown.stdout
    # The printed command, run as printed, with a nearer end so that the test is short.
    result = aworld_train(
        *shlex.split(command)[1:], "-o", f"max_steps={last + 3}", "-o", "save_steps=1000"
    )
    assert result.returncode == 0, result.stderr
    resumed = next(p for p in (tmp_path / "runs").iterdir() if p != interrupted)
    records = read_jsonl(resumed / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(1, last + 4)), "the whole curve"
    assert records[:last] == parent[:last]
    assert manifest(resumed)["resumed_from"] == str(interrupted)
    assert yaml.safe_load((resumed / "job.yaml").read_text())["config"]["toy"] == {
        "temperature": 1.5
    }
    # show follows the chain both ways; a second resume of the old run names its continuation.
    old, new = aworld_train("show", interrupted).stdout, aworld_train("show", resumed).stdout
    assert f"continued in: {resumed} (completed)" in old.splitlines()
    assert "to continue" not in old
    assert f"resumed from: {interrupted}" in new.splitlines()
    again = aworld_train(*shlex.split(command)[1:])
    assert_one_line_error(
        again,
        f"run {interrupted} was already resumed: it continues in "
        f"{resumed} (completed); nothing is left to resume",
    )
    assert len(list((tmp_path / "runs").iterdir())) == 2, "the refusal adds no run"


def test_an_interrupted_resumed_run_is_continued_from_its_own_job(tmp_path: Path) -> None:
    """The command that resumed A named A; the hint after interrupting its continuation B
    names B's saved job, as ``show`` does."""
    job = write_job(
        tmp_path,
        reward="rewards.py:slow",
        config={"max_steps": 100000, "batch_size": 1, "save_steps": 5},
    )

    def interrupted(*args: str | Path) -> tuple[Path, str]:
        before = set((tmp_path / "runs").glob("*"))
        process = subprocess.Popen(
            [str(EXECUTABLE), "train", str(job), *map(str, args)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=clean_env(),
        )

        def new() -> set[Path]:
            return set((tmp_path / "runs").glob("*")) - before

        _, stderr = signal_when(
            process,
            lambda: any(any(run.glob("checkpoint-*/policy.json")) for run in new()),
            signal.SIGTERM,
        )
        assert process.returncode == 130, stderr
        [run] = new()
        return run, stderr

    first, _ = interrupted()
    resumed, stderr = interrupted("--resume", first)
    assert manifest(resumed)["resumed_from"] == str(first)
    saved = f"aworld-train train {resumed / 'job.yaml'} --resume {resumed}"
    assert f"to continue this run: {saved}" in stderr.splitlines(), stderr
    assert f"to continue this run: {saved}" in aworld_train("show", resumed).stdout.splitlines()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["check", "train"])
def test_sigterm_during_the_checks_interrupts_them_and_leaves_nothing(
    tmp_path: Path, command: str
) -> None:
    job = write_job(
        tmp_path, reward="rewards.py:stalls", config={"max_steps": 5, "reward_timeout": 120}
    )
    process = subprocess.Popen(
        [str(EXECUTABLE), command, str(job)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(),
        cwd=tmp_path,
    )
    _, stderr = signal_when(process, (tmp_path / "reward-started").exists, signal.SIGTERM)
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "interrupted: checks interrupted by SIGTERM"
    assert "Traceback" not in stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_resume_of_an_unknown_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = write_job(tmp_path)
    assert_one_line_error(
        aworld_train_in_process(capsys, "train", job, "--resume", "nowhere"),
        "no run to resume at nowhere",
    )


def test_check_with_flags_and_no_job_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    write_jsonl(tmp_path / "plain.jsonl", ARITHMETIC)
    monkeypatch.chdir(tmp_path)
    result = aworld_train_in_process(
        capsys,
        "check",
        "--engine",
        "toy",
        "--train-dataset",
        "plain.jsonl",
        "--reward",
        "exact_match",
    )
    assert result.returncode == 0, result.stderr
    assert "all checks passed" in result.stdout
    assert_one_line_error(
        aworld_train_in_process(capsys, "check", "--engine", "toy"), "no train_dataset"
    )


def test_engines_when_none_are_selected(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWORLD_TRAIN_LOAD_PLUGINS", "")
    result = aworld_train_in_process(capsys, "engines")
    assert result.returncode == 0
    assert result.stdout.startswith("no engines installed")
    assert json.loads(aworld_train_in_process(capsys, "engines", "--json").stdout) == []


def test_check_with_a_run_path_that_is_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, run_path="results")
    (tmp_path / "results").write_text("a file")
    assert_one_line_error(
        aworld_train_in_process(capsys, "check", job),
        f"run path {tmp_path / 'results'} is a file, not a directory",
    )


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{half", "invalid JSON"),
        ('"a string"', "holds a JSON str, not an object"),
    ],
)
def test_resume_of_a_run_whose_manifest_is_damaged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, fragment: str
) -> None:
    job = write_job(tmp_path)
    (tmp_path / "runs" / "old").mkdir(parents=True)
    (tmp_path / "runs" / "old" / "manifest.json").write_text(text)
    assert_one_line_error(
        aworld_train_in_process(capsys, "train", job, "--resume", "old"),
        "run manifest",
        "old/manifest.json",
        fragment,
    )
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["old"]


def test_resume_of_a_run_that_is_still_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path)
    (tmp_path / "runs" / "live").mkdir(parents=True)
    (tmp_path / "runs" / "live" / "manifest.json").write_text(
        json.dumps({"status": "running", "pid": os.getpid(), "host": socket.gethostname()})
    )
    assert_one_line_error(
        aworld_train_in_process(capsys, "train", job, "--resume", "live"),
        f"is still running (pid {os.getpid()} on host {socket.gethostname()})",
    )
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["live"]


@pytest.mark.slow
def test_the_saved_job_re_runs_from_another_folder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    job = write_job(project, train_dataset="data/train.jsonl", config="config.yaml")
    (project / "train.jsonl").rename(project / "data" / "train.jsonl")
    (project / "config.yaml").write_text("max_steps: 3\nbatch_size: 2\ntoy: {temperature: 0.7}\n")
    first = aworld_train("train", job, "-o", "seed=7", cwd=project)
    assert first.returncode == 0, first.stderr
    run_dir = only_run_dir(project / "runs")
    saved_job = run_dir / "job.yaml"
    saved = yaml.safe_load(saved_job.read_text())
    assert saved["train_dataset"] == str(project / "data" / "train.jsonl")
    assert saved["reward"] == f"{project / 'rewards.py'}:score"
    assert saved["config"] == {
        "algorithm": "grpo",
        "max_steps": 3,
        "batch_size": 2,
        "seed": 7,
        "resources": {"nnodes": 1},
        "toy": {"temperature": 0.7},
    }, "the config file and -o inlined"
    assert saved["run_path"] == str(project / "runs")
    assert "resume" not in saved

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    checked = aworld_train("check", saved_job, cwd=elsewhere)
    assert checked.returncode == 0, checked.stderr
    again = aworld_train("train", saved_job, cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    second = next(p for p in (project / "runs").iterdir() if p != run_dir)
    assert yaml.safe_load((second / "job.yaml").read_text()) == saved, "the same settings"
    assert read_jsonl(second / "metrics.jsonl") != [] and not list(elsewhere.iterdir())
    first_rewards = [r["reward"] for r in read_jsonl(run_dir / "metrics.jsonl")]
    assert [r["reward"] for r in read_jsonl(second / "metrics.jsonl")] == first_rewards, (
        "the same seed and settings train the same steps"
    )


def test_an_engine_this_project_ships_but_not_installed_here(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, engine="swift")
    assert_one_line_error(
        aworld_train_in_process(capsys, "check", job),
        "unknown engine 'swift'",
        "pip install aworld-train-swift",
        "engines may live in separate virtual environments",
    )


def test_new_engine_prints_the_install_line_with_its_test_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "my engine"
    result = aworld_train_in_process(capsys, "new-engine", "mine", target)
    assert result.returncode == 0, result.stderr
    assert f"pip install -e '{target}[test]'" in result.stdout
    assert "engine_section()" in (target / "aworld_train_mine" / "engine.py").read_text()


def test_the_picked_engine_is_named_when_several_are_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    AgentTrainer.register_processor("verl", RecordingProcessor)
    job = write_job(tmp_path, engine=None, config={"max_steps": 2})
    result = aworld_train_in_process(capsys, "check", job)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "engine: verl (installed: broken, mismatch, toy, twin, verl; choose one with --engine "
        "or 'engine:' in the job)"
    ]
    assert "all checks passed" in result.stdout
    result = aworld_train_in_process(capsys, "check", job, "--engine", "toy")
    assert result.returncode == 0 and result.stderr == "", "named: nothing to say"


def test_an_engine_bug_is_one_line_and_debug_shows_the_traceback(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    lay_out_engine(
        site, "buggy", engine_source('raise RuntimeError("schema table missing")'), version="1.0"
    )
    lay_out_engine(site, "idle", "")
    env = clean_env(PYTHONPATH=str(site))
    # No toy section: on another engine it would add a warning line.
    job = write_job(tmp_path, config={"max_steps": 5, "batch_size": 4})
    assert_one_line_error(
        aworld_train("check", job, "--engine", "buggy", env=env),
        "error: engine 'buggy' (aworld-train-buggy 1.0) check_config raised "
        "RuntimeError: schema table missing",
    )
    debug = aworld_train("check", job, "--engine", "buggy", "--debug", env=env)
    assert debug.returncode == 2
    assert "Traceback" in debug.stderr and "schema table missing" in debug.stderr
    assert_one_line_error(
        aworld_train("check", job, "--engine", "idle", env=env),
        "engine 'idle' from aworld-train-idle implements no train hook",
    )

    listed = aworld_train("engines", "--json", "--check", env=env)
    status = {row["name"]: row["status"] for row in json.loads(listed.stdout)}
    assert status["idle"] == "broken: engine 'idle' from aworld-train-idle implements no train hook"
    assert status["buggy"] == "ok", "a bug inside a hook shows when the hook runs"


def test_an_unreachable_mcp_server_is_named_without_its_credentials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://alice:hunter2-planted@127.0.0.1:{port}/mcp"
    job = write_job(
        tmp_path,
        agent={
            "name": "a",
            "mcp_config": {
                "mcpServers": {"remote": {"type": "streamable-http", "url": url, "timeout": 5}}
            },
        },
    )
    result = aworld_train_in_process(capsys, "check", job)
    line = assert_one_line_error(result, "MCP server 'remote'", "unreachable")
    assert "hunter2-planted" not in result.stdout + result.stderr, line


# The toy engine, taking an agent with tools (and leaving them be).
TOY_WITH_TOOLS = """
from aworld_train import hookimpl
from aworld_train_toy.engine import check_config, check_dataset, check_reward, train


@hookimpl
def check_agent(agent):
    return None
"""


PLANTED = {
    "agent llm_api_key": "sk-agent-planted-2222",
    "llm_base_url password": "pw-planted-3333",
    "MCP args --api-key": "mcp-arg-planted-4444",
    "MCP env value": "mcp-env-planted-5555",
    "MCP url password": "url-planted-6666",
    "engine section token": "hf-planted-7777",
    "environment API key": "sk-env-planted-1111",
}


@pytest.mark.slow
def test_no_planted_secret_reaches_the_run_directory_or_the_terminal(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("SEARCH_API_KEY", PLANTED["environment API key"])
    (tmp_path / "site").mkdir()
    lay_out_engine(tmp_path / "site", "toolsy", TOY_WITH_TOOLS)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    server = Path(__file__).parent / "mcp_servers" / "fragile.py"
    agent = {
        "name": "adder",
        "system_prompt": f"Never say {PLANTED['environment API key']}.",
        "llm_api_key": PLANTED["agent llm_api_key"],
        "llm_base_url": f"https://alice:{PLANTED['llm_base_url password']}@llm.example/v1",
        "mcp_servers": ["fragile"],
        "mcp_config": {
            "mcpServers": {
                "fragile": {
                    "command": sys.executable,
                    "args": [str(server), "--api-key", PLANTED["MCP args --api-key"]],
                    "env": {"SERVICE_TOKEN": PLANTED["MCP env value"]},
                },
                "remote": {
                    "url": f"https://bob:{PLANTED['MCP url password']}@mcp.example/mcp",
                    "disabled": True,
                },
            }
        },
    }
    job = write_job(
        tmp_path,
        engine="toolsy",
        agent=agent,
        config={
            "max_steps": 3,
            "batch_size": 2,
            "trl": {"hub_token": PLANTED["engine section token"]},
        },
    )
    with caplog.at_level(logging.DEBUG):
        result = aworld_train_in_process(capsys, "train", job)
    assert result.returncode == 0, result.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    assert manifest(run_dir)["status"] == "completed"
    assert "fragile" in result.stdout, "the check table shows the MCP server that was used"
    files = [path for path in run_dir.rglob("*") if path.is_file()]
    assert {"job.yaml", "manifest.json", "metrics.jsonl", "reward.png"} <= {p.name for p in files}
    for what, secret in PLANTED.items():
        leaks = [path.name for path in files if secret.encode() in path.read_bytes()]
        assert not leaks, f"{what} written to {leaks}"
        for stream, text in (
            ("stdout", result.stdout),
            ("stderr", result.stderr),
            ("log", caplog.text),
        ):
            assert secret not in text, f"{what} printed on {stream}"
    saved = yaml.safe_load((run_dir / "job.yaml").read_text())
    assert saved["agent"]["llm_api_key"] == "***"
    assert saved["agent"]["mcp_config"]["mcpServers"]["fragile"]["args"][1:] == ["--api-key", "***"]


def test_a_secret_in_a_training_error_reaches_neither_the_manifest_nor_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_API_KEY", "sk-env-planted-8888")
    job = write_job(tmp_path, reward="rewards.py:leaky")
    (tmp_path / "rewards.py").write_text(
        REWARDS
        + """

calls = 0


def leaky(data_source, solution_str, ground_truth, extra_info=None):
    global calls
    calls += 1
    if calls > 4:  # past the 4 rows check scores (in its own process), in training
        raise RuntimeError("denied for key " + __import__("os").environ["SEARCH_API_KEY"])
    return 1.0
"""
    )
    result = aworld_train_in_process(capsys, "train", job)
    assert_one_line_error(result, "RuntimeError: denied for key ***")
    data = manifest(only_run_dir(tmp_path / "runs"))
    assert data["status"] == "failed"
    assert data["error"].endswith("denied for key ***")
    assert "sk-env-planted-8888" not in result.stdout + result.stderr


def test_sigterm_before_the_checks_ends_the_command_as_ctrl_c_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from aworld_train.job import spec as job_module

    real_load_job = job_module.load_job

    def load_job_then_terminated(*args: Any, **kwargs: Any) -> Any:
        loaded = real_load_job(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGTERM)
        return loaded

    monkeypatch.setattr(job_module, "load_job", load_job_then_terminated)
    before = signal.getsignal(signal.SIGTERM)
    result = aworld_train_in_process(capsys, "check", write_job(tmp_path))
    assert result.returncode == 130
    assert result.stderr.strip().splitlines()[-1] == "interrupted"
    assert signal.getsignal(signal.SIGTERM) == before, "the handler is put back"
