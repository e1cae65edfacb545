"""run_process: output to the caller and the log, errors that name what failed, and no process
of the group left alive however the run ends.

The command under test is a real family of processes: a leader that starts two children in its
own process group (one that stops on SIGTERM, one that ignores SIGINT and SIGTERM and only
SIGKILL ends) and prints their pids, the way ``torchrun`` starts workers and VeRL's driver
starts Ray.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from aworld_train.errors import Interrupted, TrainingCrash, TrainingError
from aworld_train.launch import launcher
from aworld_train.launch.launcher import run_process

CHILD = """
import signal, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
print("ready", flush=True)
time.sleep(600)
"""

# argv[1]: "run" waits to be stopped, "crash" exits 3 and "exit" exits 0, leaving the children.
# The children's stderr is the launcher's pipe, which they hold open after the leader exits.
LEADER = f"""
import os, subprocess, sys, time
children = [subprocess.Popen([sys.executable, "-c", {CHILD!r}, kind], stdout=subprocess.PIPE,
                             text=True) for kind in ("obedient", "stubborn")]
for child in children:
    child.stdout.readline()
    print(f"child {{child.pid}}", flush=True)
print(f"leader {{os.getpid()}}", flush=True)
if sys.argv[1] == "crash":
    print("RuntimeError: a worker crashed", file=sys.stderr, flush=True)
    print("shutting down", flush=True)
    sys.exit(3)
if sys.argv[1] == "exit":
    sys.exit(0)
time.sleep(600)
"""


class Family:
    """The leader's command and the pids its output names."""

    def __init__(self, tmp_path: Path, mode: str) -> None:
        self.command = [sys.executable, "-c", LEADER, mode]
        self.log = tmp_path / "family.log"
        self.lines: list[str] = []
        self.pids: list[int] = []

    def see(self, line: str) -> None:
        self.lines.append(line)
        word, _, pid = line.partition(" ")
        if word in ("child", "leader"):
            self.pids.append(int(pid))

    def alive(self) -> list[int]:
        return [pid for pid in self.pids if _alive(pid)]

    def kill(self) -> None:
        for pid in self.alive():
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"  # a zombie only waits to be reaped


@pytest.fixture(autouse=True)
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launcher, "STOP_GRACE_S", 1.0)  # the stubborn child waits it out


def test_lines_reach_on_line_and_the_log_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAUNCHER_TEST_API_KEY", "sk-planted-1234")
    code = (
        "import sys; print('first', flush=True); print('to stderr', file=sys.stderr, flush=True);"
        " print('key sk-planted-1234', end='')"
    )
    lines: list[str] = []
    run_process(
        [sys.executable, "-c", code],
        what="printer",
        log_path=tmp_path / "p.log",
        on_line=lines.append,
    )
    assert lines == ["first", "to stderr", "key ***"]
    assert (tmp_path / "p.log").read_text() == "first\nto stderr\nkey ***\n"


def test_a_normal_exit_leaves_no_process_of_the_group(tmp_path: Path) -> None:
    family = Family(tmp_path, "exit")
    try:
        run_process(family.command, what="family", log_path=family.log, on_line=family.see)
        assert len(family.pids) == 3
        assert family.alive() == []
    finally:
        family.kill()


def test_a_crashed_worker_is_a_training_error_and_leaves_no_process(tmp_path: Path) -> None:
    family = Family(tmp_path, "crash")
    try:
        with pytest.raises(TrainingError) as error:
            run_process(family.command, what="family of 3", log_path=family.log, on_line=family.see)
        assert str(error.value) == (
            f"family of 3 exited with status 3: RuntimeError: a worker "
            f"crashed (full output in {family.log})"
        )
        assert len(family.pids) == 3
        assert family.alive() == []
        assert family.log.read_text().splitlines()[-1] == "shutting down"
    finally:
        family.kill()


@pytest.mark.parametrize("raised", [ValueError("on_line failed"), KeyboardInterrupt()])
@pytest.mark.parametrize("in_main_thread", [True, False])
def test_an_exception_in_on_line_stops_the_group(
    tmp_path: Path, raised: BaseException, in_main_thread: bool
) -> None:
    family = Family(tmp_path, "run")
    seen: list[BaseException] = []

    def fail_on_leader(line: str) -> None:
        family.see(line)
        if line.startswith("leader"):
            raise raised

    def launch() -> None:
        try:
            run_process(family.command, what="family", log_path=family.log, on_line=fail_on_leader)
        except BaseException as exc:
            seen.append(exc)

    try:
        if in_main_thread:
            launch()
        else:
            thread = threading.Thread(target=launch)
            thread.start()
            thread.join()
        assert seen == [raised]
        assert len(family.pids) == 3
        assert family.alive() == []
    finally:
        family.kill()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_is_forwarded_to_the_group_which_stops(
    tmp_path: Path, signum: signal.Signals
) -> None:
    family = Family(tmp_path, "run")
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def signal_on_leader(line: str) -> None:
        family.see(line)
        if line.startswith("leader"):
            os.kill(os.getpid(), signum)

    try:
        with pytest.raises(Interrupted, match=f"^family interrupted by {signum.name}$"):
            run_process(
                family.command, what="family", log_path=family.log, on_line=signal_on_leader
            )
        assert len(family.pids) == 3
        assert family.alive() == []
        assert {sig: signal.getsignal(sig) for sig in before} == before
    finally:
        family.kill()


LAUNCHING = f"""
import sys
from pathlib import Path
from aworld_train.launch import launcher
launcher.STOP_GRACE_S = 1.0
try:
    launcher.run_process([sys.executable, "-c", {LEADER!r}, "run"], what="family",
                         log_path=Path(sys.argv[1]), on_line=lambda line: print(line, flush=True))
except KeyboardInterrupt as exc:
    print(f"interrupted: {{exc}}", file=sys.stderr)
    sys.exit(130)
"""


def test_sigterm_to_a_launching_process_leaves_no_process_of_the_group(tmp_path: Path) -> None:
    family = Family(tmp_path, "run")
    parent = subprocess.Popen(
        [sys.executable, "-c", LAUNCHING, str(family.log)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        while len(family.pids) < 3:
            family.see(parent.stdout.readline().strip())
        parent.send_signal(signal.SIGTERM)
        _, stderr = parent.communicate()
        assert parent.returncode == 130
        assert stderr.strip() == "interrupted: family interrupted by SIGTERM"
        assert family.alive() == []
    finally:
        parent.kill()
        family.kill()


KILLED_PARENT = """
import sys
from pathlib import Path
from aworld_train.launch.launcher import run_process
run_process([sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); "
             "time.sleep(600)"], what="sleeper", log_path=Path(sys.argv[1]), on_line=print)
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's"
)
def test_the_command_dies_with_a_launching_process_that_was_killed(tmp_path: Path) -> None:
    """SIGKILL gives the launching process no chance to stop the group: the kernel does."""
    parent = subprocess.Popen(
        [sys.executable, "-c", KILLED_PARENT, str(tmp_path / "s.log")],
        stdout=subprocess.PIPE,
        text=True,
    )
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the command outlived the process that launched it"
    finally:
        parent.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)


def test_a_worker_traceback_is_one_line_naming_its_innermost_frame(tmp_path: Path) -> None:
    worker = tmp_path / "worker.py"
    worker.write_text("import json\n\n\ndef train():\n    json.loads('{broken')\n\n\ntrain()\n")
    log = tmp_path / "workers.log"
    with pytest.raises(TrainingCrash) as error:
        run_process([sys.executable, str(worker)], what="2 workers", log_path=log)
    assert isinstance(error.value, TrainingError), "as every failed launch"
    decoder = launcher.last_frame(log)
    assert decoder is not None and decoder.startswith("json/decoder.py:")
    assert str(error.value) == (
        "2 workers exited with status 1: json.decoder.JSONDecodeError: Expecting property name "
        f"enclosed in double quotes: line 1 column 2 (char 1) at {decoder} (full output in {log})"
    )
    assert f'File "{worker}", line 5, in train' in log.read_text()
