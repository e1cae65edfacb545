"""Helpers the tests of ``aworld-train view`` share: the view started through the real CLI, and
the system's Chromium for Playwright, and the console errors of a page.

The browsers Playwright downloads itself cannot be fetched where the tests run, so the tests
drive Debian's ``chromium`` (``make chromium`` installs it). A suite points pytest-playwright at
it, and gets the ``console_errors`` fixture, by importing both into its ``conftest.py``::

    from aworld_train.testing.view import browser_type_launch_args, console_errors  # noqa: F401
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
# --no-sandbox: CI runs the tests as root, where Chromium's sandbox refuses to start.
SYSTEM_CHROMIUM: dict[str, Any] = {"executable_path": str(CHROMIUM), "args": ["--no-sandbox"]}
# How long the view may take to start and say where it listens.
_START_SECONDS = 60


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright's browser is the system's Chromium."""
    return {**browser_type_launch_args, **SYSTEM_CHROMIUM}


@pytest.fixture
def console_errors(page: Any) -> list[str]:
    """Every console error and uncaught exception of pytest-playwright's ``page``."""
    found: list[str] = []
    page.on(
        "console", lambda message: found.append(message.text) if message.type == "error" else None
    )
    page.on("pageerror", lambda error: found.append(str(error)))
    return found


@dataclass
class View:
    """A running ``aworld-train view``: the URL it printed (with its token) and its process."""

    url: str
    process: subprocess.Popen[str]

    def get(self, path: str, token: bool = True) -> tuple[int, bytes]:
        """The status and body of ``GET path`` (``token``: with the view's token, if any)."""
        url = self.url.split("?")[0].rstrip("/") + path
        query = self.url.partition("?")[2] if token else ""
        if query:
            url += ("&" if "?" in path else "?") + query
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def ask(self, question: str) -> Any:
        """The JSON answer to ``/api/<question>``."""
        status, body = self.get(f"/api/{question}")
        assert status == 200, f"/api/{question}: {status} {body[:200]!r}"
        return json.loads(body)


@contextmanager
def running_view(*args: str | Path, cwd: Path | None = None) -> Iterator[View]:
    """``aworld-train view ARGS`` in a process of its own, stopped with Ctrl-C (SIGINT) at the
    end; it must then exit 0."""
    process = subprocess.Popen(
        [sys.executable, "-m", "aworld_train.cli", "view", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    try:
        line = _first_line(process)
        found = re.search(r"http://\S+", line)
        assert found, f"the view printed no URL: {line!r}"
        yield View(found.group(0), process)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    assert process.returncode == 0, process.stderr.read() if process.stderr else ""


def _first_line(process: subprocess.Popen[str]) -> str:
    import selectors

    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=_START_SECONDS):
            raise AssertionError(f"aworld-train view said nothing in {_START_SECONDS} s")
    line = process.stdout.readline()
    if not line:
        raise AssertionError(f"aworld-train view exited: {process.wait()} {process.stderr.read()}")  # type: ignore[union-attr]
    return line
