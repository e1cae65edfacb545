"""call_isolated: the user's code runs in a forked child; every way it can end is one line."""

from __future__ import annotations

import asyncio
import faulthandler
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from aworld_train.errors import AgentError, RewardError
from aworld_train.isolation import call_isolated


def isolated(fn: Any, timeout: float = 5.0) -> Any:
    return call_isolated(
        fn,
        timeout=timeout,
        what="reward 'r' on row 0",
        error=RewardError,
        hint="set config reward_timeout to allow more",
    )


def one_line(raised: pytest.ExceptionInfo[RewardError]) -> str:
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("reward 'r' on row 0 ")
    return message


def test_a_closure_returns_its_result() -> None:
    captured = {"value": 21}
    assert isolated(lambda: captured["value"] * 2) == 42
    assert isolated(lambda: {"score": 0.5, "rows": [1, 2]}) == {"score": 0.5, "rows": [1, 2]}


def test_the_child_cannot_change_the_parent() -> None:
    state = {"calls": 0}

    def bump() -> int:
        state["calls"] += 1
        return state["calls"]

    assert isolated(bump) == 1
    assert state["calls"] == 0, "the child's memory is its own"


def test_an_exception_is_one_line() -> None:
    def fail() -> None:
        raise ZeroDivisionError("planted\nsecond line")

    with pytest.raises(RewardError) as raised:
        isolated(fail)
    assert one_line(raised).endswith("raised ZeroDivisionError: planted second line")


def test_an_aworld_train_error_comes_back_as_itself() -> None:
    def fail() -> None:
        raise AgentError("agent 'x': planted")

    with pytest.raises(AgentError, match="^agent 'x': planted$"):
        isolated(fail)


def test_a_timeout_kills_the_child(tmp_path: Path) -> None:
    marker = tmp_path / "finished"

    def slow() -> None:
        time.sleep(60)
        marker.write_text("finished")

    with pytest.raises(RewardError) as raised:
        isolated(slow, timeout=0.5)
    assert one_line(raised).endswith(
        "did not return within 0.5 s (set config reward_timeout to allow more)"
    )
    assert not marker.exists()


@pytest.mark.parametrize(
    ("code", "shown"),
    [(3, "sys.exit(3)"), (0, "sys.exit(0)"), (None, "sys.exit()"), ("bye", "sys.exit('bye')")],
)
def test_sys_exit_is_one_line(code: Any, shown: str) -> None:
    with pytest.raises(RewardError) as raised:
        isolated(lambda: sys.exit(code))
    assert one_line(raised).endswith(f"called {shown}")


@pytest.mark.parametrize("code", [0, 7])
def test_os_exit_is_one_line(code: int) -> None:
    with pytest.raises(RewardError) as raised:
        isolated(lambda: os._exit(code))
    assert one_line(raised).endswith(f"ended the process (exit {code}) without returning")


def test_a_crash_names_the_signal() -> None:
    def crash() -> None:
        faulthandler.disable()  # pytest's handler would print the child's stack
        os.kill(os.getpid(), signal.SIGSEGV)

    with pytest.raises(RewardError) as raised:
        isolated(crash)
    assert one_line(raised).endswith("was killed by signal SIGSEGV")


def test_a_result_that_does_not_pickle() -> None:
    with pytest.raises(RewardError) as raised:
        isolated(lambda: threading.Lock())
    assert "returned a value that cannot be sent back from its process" in one_line(raised)


def test_a_large_result_comes_back() -> None:
    assert len(isolated(lambda: "x" * 10_000_000)) == 10_000_000


def test_output_of_the_child_is_kept(capfd: pytest.CaptureFixture[str]) -> None:
    def talk() -> int:
        print("from the reward")
        return 1

    assert isolated(talk) == 1
    assert capfd.readouterr().out.count("from the reward") == 1


def test_the_parents_atexit_handlers_and_buffers_stay_in_the_parent(tmp_path: Path) -> None:
    script = tmp_path / "parent.py"
    script.write_text(
        "import atexit, sys\n"
        "from aworld_train.errors import RewardError\n"
        "from aworld_train.isolation import call_isolated\n"
        "atexit.register(lambda: print('atexit ran'))\n"
        "sys.stdout.write('buffered before the fork ')\n"
        "print(call_isolated(lambda: 5, timeout=5, what='r', error=RewardError))\n"
    )
    import subprocess

    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "buffered before the fork 5\natexit ran\n"


def test_from_a_thread_while_an_event_loop_runs_in_another() -> None:
    loop = asyncio.new_event_loop()
    loop_thread = threading.Thread(target=loop.run_forever, daemon=True)
    loop_thread.start()
    try:
        alive = asyncio.run_coroutine_threadsafe(asyncio.sleep(0, "alive"), loop)
        assert alive.result(5) == "alive"
        results: list[Any] = []

        def call() -> None:
            results.append(isolated(lambda: 2 + 2))
            try:
                isolated(lambda: sys.exit(3))
            except RewardError as exc:
                results.append(str(exc))

        worker = threading.Thread(target=call)
        worker.start()
        worker.join(60)
        assert results == [4, "reward 'r' on row 0 called sys.exit(3)"]
        still = asyncio.run_coroutine_threadsafe(asyncio.sleep(0, "still"), loop)
        assert still.result(5) == "still", "the event loop thread runs on"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        loop_thread.join(5)
        loop.close()


def test_a_heartbeat_gives_each_step_the_time_limit_and_names_the_hung_one() -> None:
    from aworld_train.isolation import Heartbeat

    heartbeat = Heartbeat()

    def steps(hang_at: int) -> int:
        for step in range(5):
            heartbeat.beat(step)
            time.sleep(60 if step == hang_at else 0.2)
        return 5

    # Five steps of 0.2 s: 1 s in all, each within the 0.5 s limit.
    assert (
        call_isolated(
            lambda: steps(-1), timeout=0.5, what="r", error=RewardError, heartbeat=heartbeat
        )
        == 5
    )
    with pytest.raises(RewardError) as raised:
        call_isolated(
            lambda: steps(3),
            timeout=0.5,
            error=RewardError,
            heartbeat=heartbeat,
            what=lambda: f"reward 'r' on step {heartbeat.step}",
        )
    assert str(raised.value) == "reward 'r' on step 3 did not return within 0.5 s"
