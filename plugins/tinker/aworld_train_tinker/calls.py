"""Waiting on the service: each call bounded, a service that stops answering ended as one line
that says the run can be resumed."""

from __future__ import annotations

from typing import Any

from aworld_train.engine import TrainingError


class ServiceLost(TrainingError):
    """The service stopped answering mid-run."""


def wait(future: Any, what: str, url: str, timeout: float) -> Any:
    """``future.result()`` within ``timeout`` seconds.

    :raises ServiceLost: when the call fails or times out, naming the call and the service.
    """
    try:
        return future.result(timeout=timeout)
    except Exception as exc:  # the SDK's errors, a timeout, a dropped connection
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ServiceLost(f"tinker service {url}: {what} failed ({reason})") from exc
