"""One way to start the processes that train: a command in a process group of its own, its
output streamed, and the whole group stopped on every way out.

Engines start trainers through ``accelerate launch``, ``torchrun`` or a driver that starts Ray;
each of those starts children of its own. :func:`run_process` puts them all in one new process
group, so that a terminal's Ctrl-C reaches only the parent, which forwards SIGINT and SIGTERM to
the group, gives it :data:`STOP_GRACE_S` to save and stop, then kills what is left. However the
call ends (the command exits, fails or is interrupted, or the caller's line handler raises), no
process of the group outlives it; and where this process itself is killed, on Linux, the kernel
sends the command SIGTERM.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from aworld_train.errors import Interrupted, TrainingCrash
from aworld_train.launch.threads import with_thread_policy
from aworld_train.run.redaction import redact_text

STOP_GRACE_S = 30.0  # a trainer saving a checkpoint after SIGTERM may need this long
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Processes that left the group alive when its first process exited send no notice when they
# stop, so the group is looked at this often until it is empty.
_CHECK_S = 0.1
# Once the group is gone, what it wrote is already in the pipe; a process outside the group
# that holds the pipe open (one that started a session of its own) is not waited for longer.
_DRAIN_S = 2.0

_EOF = object()  # the reader's last event: every writer closed the pipe
_EXITED = object()  # the command's own process exited


def run_process(
    command: Sequence[str],
    *,
    what: str,
    log_path: Path,
    on_line: Callable[[str], None] | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Run ``command`` in a new process group until it and every process it started are gone.

    Each line it prints (stdout and stderr, redacted like everything AWorld Train writes, since
    the command may print the secrets it got through its environment) is appended to
    ``log_path`` and passed, without its line ending, to ``on_line`` in the calling thread.
    In the main thread SIGINT and SIGTERM are forwarded to the group while it runs (elsewhere
    signals do not reach this code, and an exception still stops the group).

    :param what: what runs, for the errors (``"VeRL's main_ppo"``).
    :raises TrainingCrash: (a ``TrainingError``) when the command exits non-zero, naming
        ``what``, the status, its last error line, the innermost frame of the last traceback it
        printed, and ``log_path``.
    :raises Interrupted: (a ``KeyboardInterrupt``) after a forwarded signal, once the group
        stopped.
    """
    with log_path.open("a", encoding="utf-8") as log, _forwarded_signals() as events:
        group = _Group(
            subprocess.Popen(
                list(command),
                cwd=cwd,
                # Every process an engine starts gets the CPU thread policy (idle threads sleep).
                env=with_thread_policy(env),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                encoding="utf-8",
                errors="replace",
                start_new_session=True,  # a terminal's Ctrl-C reaches only this process
                preexec_fn=_dies_with_this_process(),
            ),
            events,
            log,
            on_line,
        )
        try:
            group.wait()
        except BaseException:
            group.on_line = None  # what raised gets no more lines; the log still does
            group.stop(signal.SIGTERM)
            group.wait()
            raise
    if group.signals:
        raise Interrupted(f"{what} interrupted by {signal.Signals(group.signals[0]).name}")
    status = group.process.returncode
    if status != 0:
        where = last_frame(log_path)
        at = f" at {where}" if where else ""
        raise TrainingCrash(
            f"{what} {_describe(status)}: {last_error(log_path)}{at} (full output in {log_path})"
        )


def _dies_with_this_process() -> Callable[[], None] | None:
    """On Linux, what the command's process runs before it starts: it asks the kernel for
    SIGTERM when this process dies, so that a launcher whose parent was killed (SIGKILL, which
    no handler here sees) stops its workers rather than training on without it; on another
    node's job the others then notice that it left. SIGTERM, not SIGKILL: the launchers
    (accelerate, torchrun, VeRL's driver) stop their own children on it.

    The kernel sends it when the thread that started the process exits, not the process: that
    thread is the one in :func:`run_process`, which returns only once the group is gone.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    parent = os.getpid()

    def request() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if os.getppid() != parent:  # the parent died before the request took hold
            os.kill(os.getpid(), signal.SIGTERM)

    return request


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def last_error(log_path: Path) -> str:
    """The line of a log that names its error: the first failure of a training process (a
    traceback torch.distributed marks with ``[rankN]:``; the other ranks' and the launcher's
    follow from it), else the last line that names an error, else the last line."""
    lines = _log_lines(log_path)
    index = _error_index(lines)
    if index is not None:
        return lines[index]
    return next((line for line in reversed(lines) if line), "no output")


def last_frame(log_path: Path) -> str | None:
    """``file.py:line`` of the innermost frame of the traceback that ends in the line
    :func:`last_error` names (a library's file as it reads inside its package), or ``None``
    when no traceback leads to that line."""
    from aworld_train.run.failure import short_path

    lines = _log_lines(log_path)
    index = _error_index(lines)
    if index is None:
        return None
    frames: list[tuple[str, str]] = []
    for line in map(_unmarked, reversed(lines[:index])):
        if line.startswith("Traceback (most recent call last)"):
            break
        if match := _FRAME.match(line):
            frames.append((match[1], match[2]))
    else:  # no traceback opens before the error line: its frames are not the error's
        return None
    if not frames:
        return None
    filename, number = frames[0]  # the innermost: the last before the error line
    return f"{short_path(filename)}:{number}"


_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_RANK = re.compile(r"^\[rank\d+\]:\s?")


def _log_lines(log_path: Path) -> list[str]:
    """A log's lines, stripped; a training process's keep their ``[rankN]:`` mark."""
    return [line.strip() for line in log_path.read_text(encoding="utf-8").splitlines()]


def _error_index(lines: list[str]) -> int | None:
    """The index of the line :func:`last_error` names, or ``None`` when none names an error."""
    opened = next(
        (
            i
            for i, line in enumerate(lines)
            if _RANK.match(line) and _unmarked(line).startswith("Traceback (most recent")
        ),
        None,
    )
    if opened is not None:  # that process's traceback ends at its first unindented error line
        mark = lines[opened][: _RANK.match(lines[opened]).end()]  # type: ignore[union-attr]
        for index in range(opened + 1, len(lines)):
            rest = lines[index].removeprefix(mark)
            if rest != lines[index] and not rest[:1].isspace() and _names_error(rest):
                return index
    for index in range(len(lines) - 1, -1, -1):
        if _names_error(lines[index]):
            return index
    return None


def _names_error(line: str) -> bool:
    return bool(line) and ("Error" in line or "Exception" in line)


def _unmarked(line: str) -> str:
    """A line without torch.distributed's ``[rankN]:`` mark."""
    return _RANK.sub("", line).strip()


class _Group:
    """A started command's process group: its output, its signals and its stop.

    Two threads feed one queue (the signal handler feeds it too, which a ``SimpleQueue``
    allows): one reads the output, one waits for the command's process to exit, so that the
    calling thread can keep a stop's deadline while it waits for either.
    """

    def __init__(
        self,
        process: subprocess.Popen[str],
        events: queue.SimpleQueue[Any],
        log: Any,
        on_line: Callable[[str], None] | None,
    ) -> None:
        self.process = process
        self.events = events
        self.log = log
        self.on_line = on_line
        self.signals: list[int] = []
        self.exited = False
        self.closed = False  # every writer closed the output pipe
        self.kill_at: float | None = None  # set by the first stop
        for target in (self._read, self._await_exit):
            threading.Thread(target=target, daemon=True).start()

    def wait(self) -> None:
        """Handle events until the command exited and no process of its group is alive."""
        while not self.exited:
            self._handle(self._next_event(None))
        if _group_alive(self.process.pid):
            self.stop(signal.SIGTERM)  # processes it left behind
        while _group_alive(self.process.pid):
            self._handle(self._next_event(_CHECK_S))
        drained_at = time.monotonic() + _DRAIN_S
        while not self.closed and time.monotonic() < drained_at:
            self._handle(self._next_event(max(drained_at - time.monotonic(), 0.0)))
        if self.closed:  # else the reader still reads it, for a process outside the group
            assert self.process.stdout is not None
            self.process.stdout.close()

    def stop(self, signum: int) -> None:
        """Send ``signum`` to the group; the group is killed :data:`STOP_GRACE_S` after the
        first stop."""
        _signal_group(self.process.pid, signum)
        if self.kill_at is None:
            self.kill_at = time.monotonic() + STOP_GRACE_S

    def _next_event(self, timeout: float | None) -> Any:
        """The next event, waiting at most ``timeout`` and never past the kill deadline;
        ``None`` when the wait ended without one. Kills the group when its grace is over."""
        if self.kill_at is not None:
            left = self.kill_at - time.monotonic()
            if left <= 0:  # again at each look while a process of the group is alive
                _signal_group(self.process.pid, signal.SIGKILL)
                left = _CHECK_S
            timeout = left if timeout is None else min(timeout, left)
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def _handle(self, event: Any) -> None:
        if event is _EXITED:
            self.exited = True
        elif event is _EOF:
            self.closed = True
        elif isinstance(event, int):  # a signal the parent received
            self.signals.append(event)
            self.stop(event)
        elif isinstance(event, str):
            line = redact_text(event.rstrip("\r\n"))
            self.log.write(line + "\n")
            self.log.flush()  # the log is what a user reads while the command runs
            if self.on_line is not None:
                self.on_line(line)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.events.put(line)
        self.events.put(_EOF)

    def _await_exit(self) -> None:
        self.process.wait()
        self.events.put(_EXITED)


@contextlib.contextmanager
def _forwarded_signals() -> Iterator[queue.SimpleQueue[Any]]:
    """A queue that receives SIGINT and SIGTERM while the block runs in the main thread."""
    events: queue.SimpleQueue[Any] = queue.SimpleQueue()
    if threading.current_thread() is not threading.main_thread():
        yield events
        return

    def forward(signum: int, _frame: Any) -> None:
        events.put(signum)

    # An ignored signal stays ignored; one handled outside Python (None) could not be put back.
    previous = {
        sig: handler
        for sig in _STOP_SIGNALS
        if (handler := signal.getsignal(sig)) not in (signal.SIG_IGN, None)
    }
    for sig in previous:
        signal.signal(sig, forward)
    try:
        yield events
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _signal_group(pgid: int, signum: int) -> None:
    # Only a group with a live process: once none is left, its id may be given to another.
    if _group_alive(pgid):
        with contextlib.suppress(ProcessLookupError):  # it ended since it was looked at
            os.killpg(pgid, signum)


def _group_alive(pgid: int) -> bool:
    """Whether a process of the group is alive; a zombie, which only waits to be reaped, is not."""
    if not os.path.isdir("/proc/self"):  # no procfs (macOS): the kernel's answer counts zombies
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:  # it exited while the list was read
            continue
        state, _ppid, group = stat[stat.rindex(")") + 2 :].split()[:3]
        if int(group) == pgid and state not in "ZX":
            return True
    return False


def _describe(status: int) -> str:
    if status < 0:
        return f"was killed by {signal.Signals(-status).name}"
    return f"exited with status {status}"
