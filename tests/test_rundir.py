"""The run directory: unique names, created only for a job that passed its checks, job.yaml
redacted and re-runnable, manifest status and process, crashed runs, resume, metrics and plots."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from aworld_train import AgentTrainer
from aworld_train.agent import AgentSpec
from aworld_train.errors import AWorldTrainError, Interrupted, RewardError, RunDirectoryError
from aworld_train.job.saved import rerunnable_job
from aworld_train.job.spec import Job, resolve_job
from aworld_train.run.directory import RunDirectory
from aworld_train.run.manifest import read_manifest
from aworld_train.run.redaction import REDACTED
from aworld_train.run.resume import resolve_resume
from helpers import (
    RecordingProcessor,
    RewardThatStops,
    manifest,
    only_run_dir,
    read_jsonl,
    run_cli,
    signal_when,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_run_directories_are_unique_and_named_after_the_engine(tmp_path: Path) -> None:
    made = [RunDirectory.create(tmp_path / "runs", "toy").path for _ in range(5)]
    assert len(set(made)) == 5
    assert all(re.fullmatch(r"\d{8}-\d{6}-toy-[0-9a-f]{6}", path.name) for path in made)
    assert all(path.parent == (tmp_path / "runs").resolve() for path in made)


def test_run_path_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("not a folder")
    with pytest.raises(RunDirectoryError, match=r"run path .*runs is a file, not a directory"):
        RunDirectory.create(tmp_path / "runs", "toy")


def test_run_path_inside_a_file(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("not a folder")
    with pytest.raises(RunDirectoryError, match=r"cannot create run path .*runs/inner"):
        RunDirectory.create(tmp_path / "runs" / "inner", "toy")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_run_path_that_cannot_be_created() -> None:
    # Nobody, not even root, can make a folder in /proc.
    with pytest.raises(RunDirectoryError, match="cannot create run path /proc/aworld-train-runs"):
        RunDirectory.create("/proc/aworld-train-runs", "toy")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_run_path_that_is_not_writable(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(RunDirectoryError, match="is not writable"):
        RunDirectory.create(locked, "toy")


def test_trainer_rejects_a_bad_run_path_before_writing_anything(
    toy_job: dict[str, Any], tmp_path: Path
) -> None:
    (tmp_path / "runs").write_text("not a folder")
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(RunDirectoryError):
        AgentTrainer(**toy_job)
    assert sorted(tmp_path.rglob("*")) == before
    assert (tmp_path / "runs").read_text() == "not a folder"


def test_job_yaml_is_the_resolved_job_with_secrets_redacted(
    toy_job: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEARCH_API_KEY", "search-key-98765")
    toy_job["agent"] = {
        "name": "adder",
        "llm_api_key": "sk-agent-secret",
        "llm_max_tokens": 64,
        "system_prompt": "Use search-key-98765 when asked.",
    }
    trainer = AgentTrainer(**toy_job)
    text = (trainer.run_dir.path / "job.yaml").read_text()
    assert "sk-agent-secret" not in text and "search-key-98765" not in text
    job = yaml.safe_load(text)
    assert job["engine"] == "toy"
    assert job["agent"]["llm_api_key"] == REDACTED
    assert job["agent"]["system_prompt"] == f"Use {REDACTED} when asked."
    assert job["agent"]["llm_max_tokens"] == 64
    assert job["reward"] == "exact_match"
    assert job["train_dataset"] == toy_job["train_dataset"]
    assert job["config"]["max_steps"] == 6 and job["config"]["batch_size"] == 4


def test_completed_run_has_manifest_metrics_and_plots(toy_job: dict[str, Any]) -> None:
    trainer = AgentTrainer(**toy_job)
    run_dir = trainer.run_dir.path
    final = trainer.train()
    data = manifest(run_dir)
    assert data["status"] == "completed"
    assert data["engine"] == "toy"
    assert (data["pid"], data["host"]) == (os.getpid(), socket.gethostname())
    assert data["versions"]["aworld-train"] == "0.1.0"
    assert data["versions"]["aworld-train-toy"] == "0.1.0"
    assert data["started_at"] <= data["ended_at"]
    assert data["final_metrics"] == final
    assert data["plots"] == ["reward.png", "loss.png"]
    records = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert all({"reward", "loss", "time"} <= set(r) for r in records)
    for name in ("reward.png", "loss.png"):
        assert (run_dir / name).read_bytes()[:8] == PNG_MAGIC
    assert not list(run_dir.glob("*.tmp")), "the manifest is replaced whole"


def test_a_run_that_raises_while_training_is_marked_failed(toy_job: dict[str, Any]) -> None:
    toy_job["reward_func"] = RewardThatStops(10, ZeroDivisionError("planted"))
    trainer = AgentTrainer(**toy_job)
    with pytest.raises(RewardError, match="planted"):
        trainer.train()
    data = manifest(trainer.run_dir.path)
    assert data["status"] == "failed"
    assert data["error"].startswith("RewardError:")
    assert data["final_metrics"]["step"] == 2, "the steps logged before the failure"


def test_keyboard_interrupt_marks_the_run_interrupted(toy_job: dict[str, Any]) -> None:
    toy_job["reward_func"] = RewardThatStops(10, KeyboardInterrupt())
    trainer = AgentTrainer(**toy_job)
    with pytest.raises(KeyboardInterrupt):
        trainer.train()
    assert manifest(trainer.run_dir.path)["status"] == "interrupted"


SLOW_TRAINING = """
import sys, time
from aworld_train import AgentTrainer

def slow_match(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(0.005)
    return float(solution_str == ground_truth)

rows = [{"prompt": f"q{i}", "ground_truth": str(i)} for i in range(4)]
trainer = AgentTrainer(train_dataset=rows, reward_func=slow_match, run_path=sys.argv[1],
                       train_engine_name="toy", config={"max_steps": 100000, "batch_size": 1})
trainer.train()
"""


def slow_training(runs: Path) -> subprocess.Popen[str]:
    """A training process on the toy engine that runs for minutes."""
    return subprocess.Popen(
        [sys.executable, "-c", SLOW_TRAINING, str(runs)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def logged_a_step(runs: Path) -> bool:
    return any(path.stat().st_size > 0 for path in runs.glob("*/metrics.jsonl"))


@pytest.mark.slow
def test_sigterm_to_a_training_process_marks_the_run_interrupted(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    process = slow_training(runs)
    _, stderr = signal_when(process, lambda: logged_a_step(runs), signal.SIGTERM)
    assert process.returncode != 0
    assert "interrupted by SIGTERM" in stderr
    data = manifest(only_run_dir(runs))
    assert data["status"] == "interrupted"
    assert data["error"] == "Interrupted: training interrupted by SIGTERM"
    assert data["final_metrics"]["step"] >= 1


class InterruptedWhileChecking(RecordingProcessor):
    """Sends this process ``signal`` from its config check, as ``kill`` would."""

    signal = signal.SIGTERM

    def check_config(self, config: Any) -> Any:
        os.kill(os.getpid(), self.signal)
        time.sleep(5)  # the handler raises before this ends
        raise AssertionError("the signal did not interrupt the checks")


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_the_checks_interrupts_them_and_leaves_no_run(
    toy_job: dict[str, Any], sent: signal.Signals
) -> None:
    InterruptedWhileChecking.signal = sent
    AgentTrainer.register_processor("stopped", InterruptedWhileChecking)
    toy_job["train_engine_name"] = "stopped"
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    for check_only in (False, True):
        with pytest.raises(Interrupted, match=f"checks interrupted by {sent.name}"):
            AgentTrainer(**toy_job, check_only=check_only)
        assert list(toy_job["run_path"].iterdir()) == [], "the checks' directory was removed"
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers


def test_a_failing_check_leaves_no_run_directory(toy_job: dict[str, Any]) -> None:
    toy_job["reward_func"] = "no_such_reward"
    with pytest.raises(RewardError, match="no_such_reward"):
        AgentTrainer(**toy_job)
    assert list(toy_job["run_path"].iterdir()) == []


def test_a_failing_engine_check_removes_what_the_engine_wrote(toy_job: dict[str, Any]) -> None:
    # The recorder plugin writes into the run directory during check_dataset; the toy engine
    # then refuses its config.
    toy_job["config"] = dict(toy_job["config"], toy={"temperature": 0})
    with pytest.raises(AWorldTrainError, match="toy.temperature"):
        AgentTrainer(**toy_job)
    assert list(toy_job["run_path"].iterdir()) == []


def test_the_checks_run_in_the_directory_that_becomes_the_run(
    recording_engine: type[RecordingProcessor], toy_job: dict[str, Any]
) -> None:
    seen: list[Path] = []

    class Remembers(RecordingProcessor):
        def check_dataset(self, dataset: Any, test_dataset: Any = None) -> Any:
            seen.append(self.context.run_dir)
            (self.context.run_dir / "converted.txt").write_text("rows")
            return {"file": str(self.context.run_dir / "converted.txt")}

    AgentTrainer.register_processor("remembers", Remembers)
    toy_job["train_engine_name"] = "remembers"
    trainer = AgentTrainer(**toy_job)
    assert seen == [trainer.run_dir.path]
    assert (trainer.run_dir.path / "converted.txt").read_text() == "rows", (
        "a path an engine kept during the checks still holds its file"
    )


@pytest.mark.slow
def test_resume_continues_from_the_last_checkpoint(toy_job: dict[str, Any]) -> None:
    toy_job["config"] = {"max_steps": 20, "batch_size": 4, "save_steps": 5}
    # Four reward calls a step (the sample row is scored in a child process): call 51 is in
    # step 13, after the checkpoints of steps 5 and 10.
    interrupted = dict(toy_job, reward_func=RewardThatStops(51, KeyboardInterrupt()))
    first = AgentTrainer(**interrupted)
    with pytest.raises(KeyboardInterrupt):
        first.train()
    first_dir = first.run_dir.path
    assert manifest(first_dir)["status"] == "interrupted"
    assert sorted(p.name for p in first_dir.glob("checkpoint-*")) == [
        "checkpoint-10",
        "checkpoint-5",
    ]
    parent = read_jsonl(first_dir / "metrics.jsonl")
    assert [r["step"] for r in parent] == list(range(1, 13))

    resumed = AgentTrainer(**toy_job, resume=first_dir.name)
    resumed.train()
    resumed_dir = resumed.run_dir.path
    assert resumed_dir != first_dir, "a run directory is never reused"
    records = read_jsonl(resumed_dir / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(1, 21)), "the whole curve"
    assert records[:10] == parent[:10], "the parent's steps up to the checkpoint resumed from"
    data = manifest(resumed_dir)
    assert data["status"] == "completed"
    assert data["resumed_from"] == str(first_dir)
    assert data["plots"] == ["reward.png", "loss.png"]
    saved = yaml.safe_load((resumed_dir / "job.yaml").read_text())
    assert "resume" not in saved, "the saved job re-runs as a new run"
    old = manifest(first_dir)
    assert old["continued_in"] == str(resumed_dir), "linked both ways"
    assert old["status"] == "interrupted", "the old run's ending stays as it was"
    assert [r["step"] for r in read_jsonl(first_dir / "metrics.jsonl")] == list(range(1, 13))

    runs_before = sorted(toy_job["run_path"].iterdir())
    with pytest.raises(RunDirectoryError) as raised:
        AgentTrainer(**toy_job, resume=first_dir.name)
    assert str(raised.value) == (
        f"run {first_dir} was already resumed: it continues in "
        f"{resumed_dir} (completed); nothing is left to resume"
    )
    assert sorted(toy_job["run_path"].iterdir()) == runs_before, "a refused resume adds no run"

    straight = AgentTrainer(**toy_job)
    straight.train()
    policy = json.loads((resumed_dir / "model" / "policy.json").read_text())
    expected = json.loads((straight.run_dir.path / "model" / "policy.json").read_text())
    assert policy["logits"] == expected["logits"], "resuming is the same as never stopping"


def interrupted_with_checkpoints(toy_job: dict[str, Any]) -> Path:
    """A toy run interrupted in step 13 of 20, after its checkpoints of steps 5 and 10."""
    toy_job["config"] = {"max_steps": 20, "batch_size": 4, "save_steps": 5}
    first = AgentTrainer(**dict(toy_job, reward_func=RewardThatStops(51, KeyboardInterrupt())))
    with pytest.raises(KeyboardInterrupt):
        first.train()
    return first.run_dir.path


@pytest.mark.slow
def test_a_second_resume_names_the_end_of_the_chain_and_what_to_do(
    toy_job: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    first = interrupted_with_checkpoints(toy_job)
    # The continuation is interrupted too (in its step 13 again), then resumed in turn.
    second = AgentTrainer(
        **dict(toy_job, reward_func=RewardThatStops(13, KeyboardInterrupt())), resume=first
    )
    with pytest.raises(KeyboardInterrupt):
        second.train()
    with pytest.raises(RunDirectoryError) as raised:
        resolve_resume(first, toy_job["run_path"], "toy")
    # Its reward is an object of this test: the saved job cannot load it, Python can.
    command = f"AgentTrainer(<the same arguments>, resume={str(second.run_dir)!r}).train()"
    assert str(raised.value) == (
        f"run {first} was already resumed: it continues in {second.run_dir} (interrupted); "
        f"resume that one instead: {command}"
    )
    code, out, err = run_cli(capsys, "show", first)
    assert code == 0, err
    assert f"continued in: {second.run_dir} (interrupted)" in out.splitlines()
    assert f"to continue the chain: {command}" in out.splitlines()
    third = AgentTrainer(**toy_job, resume=second.run_dir.path)
    third.train()
    with pytest.raises(RunDirectoryError) as raised:
        resolve_resume(first, toy_job["run_path"], "toy")
    assert str(raised.value) == (
        f"run {first} was already resumed: it continues in {second.run_dir}, and the chain "
        f"ends at {third.run_dir} (completed); nothing is left to resume"
    )


def test_two_trainers_resuming_one_run_cannot_both_train(toy_job: dict[str, Any]) -> None:
    first = interrupted_with_checkpoints(toy_job)
    one = AgentTrainer(**toy_job, resume=first)
    other = AgentTrainer(**toy_job, resume=first)
    one.train()
    with pytest.raises(
        RunDirectoryError,
        match=f"run {first} was already resumed: it "
        f"continues in {one.run_dir.path} \\(completed\\)",
    ):
        other.train()
    assert manifest(first)["continued_in"] == str(one.run_dir.path)
    assert manifest(other.run_dir.path)["status"] == "checked", "it never trained"
    assert not (other.run_dir / "metrics.jsonl").exists()


NEVER_TRAINED = """
import sys
from aworld_train import AgentTrainer

rows = [{"prompt": f"q{i}", "ground_truth": str(i)} for i in range(4)]
trainer = AgentTrainer(train_dataset=rows, reward_func="exact_match", run_path=sys.argv[1],
                       train_engine_name="toy", config={"max_steps": 3, "batch_size": 1})
print(trainer.run_dir)
"""


@pytest.mark.slow
def test_a_trainer_built_but_never_trained_leaves_a_checked_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    built = subprocess.run(
        [sys.executable, "-c", NEVER_TRAINED, str(runs)], capture_output=True, text=True, check=True
    )
    run_dir = only_run_dir(runs)
    assert built.stdout.strip() == str(run_dir), "the run directory prints as its path"
    assert read_manifest(run_dir)["status"] == "checked", "never taken for a crashed run"
    with pytest.raises(RunDirectoryError) as raised:
        resolve_resume(run_dir, runs, "toy")
    assert str(raised.value) == (
        f"run {run_dir} passed its checks but never trained: nothing to resume; train its job "
        f"instead: aworld-train train {run_dir / 'job.yaml'}"
    )
    code, out, err = run_cli(capsys, "show", run_dir)
    assert code == 0, err
    assert "status:   checked (its checks passed " in out and "it never trained)" in out
    assert "to continue" not in out


def test_the_run_directory_reads_as_a_path_and_is_announced_as_training_starts(
    toy_job: dict[str, Any], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    trainer = AgentTrainer(**toy_job)
    path = trainer.run_dir.path
    assert str(trainer.run_dir) == str(path) and os.fspath(trainer.run_dir) == str(path)
    assert Path(trainer.run_dir) == path and trainer.run_dir / "job.yaml" == path / "job.yaml"
    assert repr(trainer.run_dir) == f"RunDirectory({str(path)!r})"
    capsys.readouterr()
    with caplog.at_level("INFO", logger="aworld_train"):
        trainer.train()
    assert capsys.readouterr().out.splitlines()[0] == f"training in {path}"
    assert f"run directory: {path}" in caplog.messages


def test_resume_of_a_missing_or_completed_run(toy_job: dict[str, Any]) -> None:
    with pytest.raises(RunDirectoryError, match="no run to resume at nowhere"):
        AgentTrainer(**toy_job, resume="nowhere")
    trainer = AgentTrainer(**toy_job)
    trainer.train()
    with pytest.raises(RunDirectoryError, match="already completed; nothing to resume"):
        resolve_resume(trainer.run_dir.path, toy_job["run_path"], "toy")


def test_a_failed_resume_leaves_nothing_new(toy_job: dict[str, Any]) -> None:
    first = AgentTrainer(**dict(toy_job, reward_func=RewardThatStops(10, KeyboardInterrupt())))
    with pytest.raises(KeyboardInterrupt):
        first.train()
    before = sorted(toy_job["run_path"].rglob("*"))
    for bad in (
        {"reward_func": "no_such_reward"},
        {"config": {"max_steps": "ten"}},
        {"train_dataset": []},
    ):
        with pytest.raises(AWorldTrainError):
            AgentTrainer(**dict(toy_job, **bad), resume=first.run_dir.path)
    assert sorted(toy_job["run_path"].rglob("*")) == before


def write_manifest(run_dir: Path, **fields: Any) -> Path:
    run_dir.mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"status": "running", **fields}))
    return run_dir


def gone_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_running_run_whose_process_is_gone_reads_crashed(tmp_path: Path) -> None:
    here = socket.gethostname()
    dead = write_manifest(tmp_path / "dead", pid=gone_pid(), host=here)
    alive = write_manifest(tmp_path / "alive", pid=os.getpid(), host=here)
    elsewhere = write_manifest(tmp_path / "elsewhere", pid=gone_pid(), host=f"not-{here}")
    unknown = write_manifest(tmp_path / "unknown")
    assert read_manifest(dead)["status"] == "crashed"
    assert read_manifest(alive)["status"] == "running"
    assert read_manifest(elsewhere)["status"] == "running", "another host's process is unknown"
    assert read_manifest(unknown)["status"] == "crashed", "no pid: written before pids were"
    for pid in (2**80, 0, -1):  # no process has it (0 and -1 would name process groups)
        odd = write_manifest(tmp_path / f"pid{pid}", pid=pid, host=here)
        assert read_manifest(odd)["status"] == "crashed", pid
    assert json.loads((dead / "manifest.json").read_text())["status"] == "running", (
        "reading changes nothing on disk"
    )

    assert resolve_resume(dead, tmp_path, "toy") == dead.resolve()
    with pytest.raises(RunDirectoryError) as raised:
        resolve_resume("alive", tmp_path, "toy")
    assert str(raised.value) == (
        f"run {tmp_path / 'alive'} is still running (pid {os.getpid()} "
        f"on host {here}); stop it before resuming it"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", r"run manifest .*manifest.json: invalid JSON"),
        ("[1, 2]", r"run manifest .*manifest.json: holds a JSON list, not an object"),
        ("\xff\xfe", r"cannot read run manifest .*manifest.json: not UTF-8"),
    ],
)
def test_resume_of_a_run_whose_manifest_is_damaged(
    toy_job: dict[str, Any], tmp_path: Path, text: str, message: str
) -> None:
    damaged = tmp_path / "runs" / "damaged"
    damaged.mkdir(parents=True)
    (damaged / "manifest.json").write_bytes(text.encode("latin-1"))
    with pytest.raises(RunDirectoryError, match=message) as raised:
        AgentTrainer(**toy_job, resume="damaged")
    assert "\n" not in str(raised.value)
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["damaged"]


@pytest.mark.slow
def test_a_killed_run_reads_crashed_and_resumes(toy_job: dict[str, Any], tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    process = slow_training(runs)

    def refused_while_alive() -> bool:
        if not logged_a_step(runs):
            return False
        with pytest.raises(RunDirectoryError, match=f"still running \\(pid {process.pid} on host"):
            AgentTrainer(**toy_job, resume=only_run_dir(runs))
        assert len(list(runs.iterdir())) == 1, "a refused resume leaves nothing"
        return True

    signal_when(process, refused_while_alive, signal.SIGKILL)
    run_dir = only_run_dir(runs)
    assert manifest(run_dir)["status"] == "running", "kill -9 leaves the manifest as it was"
    assert read_manifest(run_dir)["status"] == "crashed"
    rows = [{"prompt": f"q{i}", "ground_truth": str(i)} for i in range(4)]
    resumed = AgentTrainer(
        train_dataset=rows,
        reward_func="exact_match",
        run_path=runs,
        train_engine_name="toy",
        config={"max_steps": 3, "batch_size": 1},
        resume=run_dir.name,
    )
    assert resumed.context.resume_from == run_dir
    assert manifest(run_dir)["status"] == "crashed", "written down once a resume found it"
    assert "continued_in" not in manifest(run_dir), "linked once the continuation trains"


@pytest.mark.slow
def test_show_of_a_killed_run_prints_how_to_resume_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    signal_when(slow_training(runs), lambda: logged_a_step(runs), signal.SIGKILL)
    run_dir = only_run_dir(runs)
    code, out, err = run_cli(capsys, "show", run_dir)
    assert code == 0, err
    assert "status:   crashed (started " in out
    # Its reward was a function of the script that trained: the job file cannot load it.
    assert (
        f"to continue this run: AgentTrainer(<the same arguments>, resume={str(run_dir)!r}).train()"
    ) in out.splitlines()


def test_nothing_is_written_outside_the_run_directory(
    toy_job: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    trainer = AgentTrainer(**toy_job)
    trainer.train()
    toy_job["reward_func"] = "no_such_reward"
    with pytest.raises(AWorldTrainError):
        AgentTrainer(**toy_job)
    outside = [p for p in tmp_path.rglob("*") if toy_job["run_path"] not in (p, *p.parents)]
    assert outside == [work]
    statuses = sorted(manifest(run)["status"] for run in toy_job["run_path"].iterdir())
    assert statuses == ["completed"], "the job that failed its checks left no run"


def test_one_run_directory_per_trainer(toy_job: dict[str, Any]) -> None:
    AgentTrainer(**toy_job).train()
    assert only_run_dir(toy_job["run_path"]).name.split("-")[2] == "toy"


def test_the_saved_job_has_absolute_paths_for_what_was_relative(tmp_path: Path) -> None:
    spec = AgentSpec(
        name="a",
        tools=["tools.py:add", "pkg.tools:mul", "search"],
        mcp_config={
            "mcpServers": {
                "local": {"command": "python", "args": ["server.py"]},
                "beside": {"command": "./serve", "cwd": "servers"},
                "remote": {"url": "http://127.0.0.1:1/mcp"},
            }
        },
    )
    job = rerunnable_job(
        resolve_job(
            Job(
                engine="toy",
                agent="agent.yaml",
                train_dataset="data/train.jsonl",
                reward=[
                    "rewards.py:score",
                    {"name": "lib/r.py:f", "weight": 2},
                    "exact_match",
                    "pkg.rewards:score",
                ],
                columns={"prompt": "q"},
                run_path="runs",
                base_dir=tmp_path,
            )
        ),
        spec,
        config={"model": str(tmp_path / "model")},
    )
    assert job == {
        "engine": "toy",
        "agent": {
            "name": "a",
            "tools": [f"{tmp_path}/tools.py:add", "pkg.tools:mul", "search"],
            "mcp_config": {
                "mcpServers": {
                    "local": {"command": "python", "args": ["server.py"], "cwd": str(tmp_path)},
                    "beside": {"command": "./serve", "cwd": str(tmp_path / "servers")},
                    "remote": {"url": "http://127.0.0.1:1/mcp"},
                }
            },
            "max_turns": 1,
        },
        "train_dataset": str(tmp_path / "data" / "train.jsonl"),
        "reward": [
            f"{tmp_path}/rewards.py:score",
            {"name": f"{tmp_path}/lib/r.py:f", "weight": 2},
            "exact_match",
            "pkg.rewards:score",
        ],
        "columns": {"prompt": "q"},
        "config": {"model": str(tmp_path / "model")},
        "run_path": str(tmp_path / "runs"),
    }
    factory = rerunnable_job(
        resolve_job(
            Job(
                engine="toy",
                agent="agents.py:make",
                train_dataset=[{"prompt": "p", "ground_truth": "g"}],
                run_path=tmp_path,
                base_dir=tmp_path,
            )
        ),
        spec,
        config={},
    )
    assert factory["agent"] == f"{tmp_path}/agents.py:make", "a factory stays a reference"
    assert factory["train_dataset"] == [{"prompt": "p", "ground_truth": "g"}]
    assert "reward" not in factory
