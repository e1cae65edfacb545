"""Running the user's code during checks in a forked child process.

A check calls code nobody reviewed (a reward function): it may sleep, call ``sys.exit``, end
the process with ``os._exit`` or crash it. In a child process each of these becomes one line
naming what was called, and the check carries on to report it.

The child is forked (not spawned), so ``fn`` may be any callable, a lambda or a closure
included: nothing is pickled on the way in; only the result comes back through a pipe.

One child may run many calls of the user's code (a reward on many rows): a :class:`Heartbeat`
gives each call its own time limit and lets the error name the call that was running.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from aworld_train.errors import AWorldTrainError

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

T = TypeVar("T")

# What the child sends back: ("returned", value), ("exited", code), ("raised", text),
# ("own", pickled AWorldTrainError, text) or ("unsendable", text).
Outcome = tuple[Any, ...]


class Heartbeat:
    """Memory shared with the child :func:`call_isolated` forks, which the child's code writes
    as it starts each of many steps: the time limit then applies to each step, not to all of
    them together, and the parent can tell which step was running when one hangs or ends the
    process.

    Make it before :func:`call_isolated` forks, and call :meth:`beat` in the child only.
    """

    def __init__(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context("fork")
        self._step = context.RawValue("q", -1)
        self._since = context.RawValue("d", 0.0)

    def beat(self, step: int) -> None:
        """Step ``step`` starts now: its time limit starts now."""
        self._step.value = step
        # time.monotonic is CLOCK_MONOTONIC on Linux, one clock for the parent and the child.
        self._since.value = time.monotonic()

    @property
    def step(self) -> int:
        """The step running (or last run); -1 before the first beat."""
        return int(self._step.value)

    def deadline(self, timeout: float, started: float) -> float:
        """When the running step's time runs out: ``timeout`` after its beat, or after
        ``started`` before the first beat."""
        return max(started, float(self._since.value)) + timeout


def call_isolated(
    fn: Callable[[], T],
    *,
    timeout: float,
    what: str | Callable[[], str],
    error: type[AWorldTrainError],
    hint: str = "",
    heartbeat: Heartbeat | None = None,
) -> T:
    """Call ``fn()`` in a forked child process and return its result.

    :param fn: a zero-argument callable; its result must be picklable.
    :param timeout: seconds ``fn`` may take; the child is killed after them.
    :param what: how errors name the call, e.g. ``"reward 'rewards.py:score' on row 0"``; a
        callable is asked when an error is raised (with a ``heartbeat``: the step running).
    :param error: the error class to raise.
    :param hint: said in brackets after a timeout, e.g. ``"set config reward_timeout to allow
        more"``.
    :param heartbeat: the steps ``fn`` reports: ``timeout`` then limits each step, from its
        beat, rather than the whole call.
    :raises AWorldTrainError: ``error`` with one line starting with ``what`` when ``fn`` raises,
        calls ``sys.exit``, ends or crashes the process, returns something that cannot be sent
        back, or takes longer than ``timeout``; an ``AWorldTrainError`` that ``fn`` raises is
        raised again as itself.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    # Not a daemon: a daemonic process may not start processes, and reward code may.
    label = what if isinstance(what, str) else "the user's code"
    process = context.Process(target=_child, args=(fn, sender), name=f"aworld-train: {label}")
    outcome: Outcome | None = None
    try:
        process.start()
        sender.close()
        started = time.monotonic()
        # Wait on the pipe and on the process: a child that dies without sending leaves the
        # pipe open while another child forked meanwhile holds a copy of its write end.
        while outcome is None and process.exitcode is None:
            deadline = (
                started + timeout if heartbeat is None else heartbeat.deadline(timeout, started)
            )
            left = deadline - time.monotonic()
            if left <= 0:
                after = f" ({hint})" if hint else ""
                raise error(f"{_named(what)} did not return within {timeout:g} s{after}")
            if wait([receiver, process.sentinel], left):
                outcome = _receive(receiver)
        if outcome is None:
            outcome = _receive(receiver)  # sent just before the child ended
    finally:
        if outcome is None and process.is_alive():
            process.kill()
        process.join()
        receiver.close()
    if outcome is None:
        raise error(f"{_named(what)} {_ending(process.exitcode)}")
    return _unpack(outcome, _named(what), error)


def _named(what: str | Callable[[], str]) -> str:
    return what if isinstance(what, str) else what()


def _child(fn: Callable[[], Any], sender: Connection) -> None:
    """Call ``fn`` and send its outcome; never return into the parent's code."""
    # An interrupt (Ctrl-C reaches the whole process group) is the parent's to handle: it
    # kills this child on its way out.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    outcome: Outcome
    try:
        outcome = ("returned", fn())
    except SystemExit as exc:
        outcome = ("exited", exc.code)
    except AWorldTrainError as exc:
        outcome = ("own", _pickled(exc), describe(exc))
    except BaseException as exc:  # the user's code: whatever it raises is reported
        outcome = ("raised", describe(exc))
    try:
        sender.send(outcome)
    except Exception as exc:  # the result does not pickle
        sender.send(("unsendable", describe(exc)))
    # Output the user's code printed is the user's to see.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or broken stream: nothing left to show
            pass
    # Exit without the parent's atexit handlers, finalizers and buffered files, which
    # belong to the parent alone.
    os._exit(0)


def _receive(receiver: Connection) -> Outcome | None:
    """The child's outcome, or ``None`` when it ended without sending one."""
    if not receiver.poll():
        return None
    try:
        return pickle.loads(receiver.recv_bytes())
    except EOFError:
        return None
    except Exception as exc:  # a result whose class cannot be rebuilt here
        return ("unsendable", describe(exc))


def _unpack(outcome: Outcome, what: str, error: type[AWorldTrainError]) -> Any:
    kind = outcome[0]
    if kind == "returned":
        return outcome[1]
    if kind == "own":
        try:
            own = pickle.loads(outcome[1]) if outcome[1] is not None else None
        except Exception:  # its class exists only in the child
            own = None
        if isinstance(own, AWorldTrainError):
            raise own
        raise error(f"{what} raised {outcome[2]}")
    if kind == "exited":
        code = "" if outcome[1] is None else repr(outcome[1])
        raise error(f"{what} called sys.exit({code})")
    if kind == "raised":
        raise error(f"{what} raised {outcome[1]}")
    raise error(f"{what} returned a value that cannot be sent back from its process: {outcome[1]}")


def _ending(exitcode: int | None) -> str:
    """How a child that sent nothing ended, for the message."""
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = str(-exitcode)
        return f"was killed by signal {name}"
    return f"ended the process (exit {exitcode}) without returning"


def _pickled(exc: BaseException) -> bytes | None:
    try:
        return pickle.dumps(exc)
    except Exception:  # an attribute that does not pickle: the message still goes back
        return None


def describe(exc: BaseException) -> str:
    """``Type: message`` on one line, for an error line that names an exception."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
