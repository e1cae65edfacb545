"""Waiting on the service: each call bounded, a service that stops answering ended as one line.

Losing the service mid-run is not a mistake in the job: :class:`ServiceLost` is no
``AWorldTrainError``, so the run ends ``failed`` with exit code 1 and resumes from its last
checkpoint (``aworld-train train JOB --resume RUN``) once the service is back.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any


class ServiceLost(RuntimeError):
    """The service stopped answering, or failed a call, mid-run."""


def wait(future: Any, what: str, url: str, timeout: float) -> Any:
    """``future.result()`` within ``timeout`` seconds.

    :raises ServiceLost: when the call fails or times out, naming the call and the service.
    """
    try:
        return future.result(timeout=timeout)
    except Exception as exc:  # a timeout, the SDK's errors, a dropped connection
        if isinstance(exc, (concurrent.futures.TimeoutError, TimeoutError)):
            reason = f"no answer within {timeout:g} s"
        else:
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ServiceLost(f"tinker service {url}: {what} failed ({reason})") from exc
