"""The CPU thread policy every training process gets: idle OpenMP threads sleep.

On a CPU, torch's OpenMP threads that run out of work spin for a while before they sleep. When
the cores are shared (other processes, a trainer beside its generation engine, several workers)
the spinning threads take the cores the working ones need: the demo's 6 steps took 57 s with
OpenMP's default and 13 s with ``OMP_WAIT_POLICY=PASSIVE``. OpenMP reads the variable once, when
its runtime loads (when torch is imported), so it is set in the environment before that: by
the CLI's entry point for its own process, and by :func:`aworld_train.launch.launcher.run_process` for
every process an engine starts. A value the user set is never changed, and a machine with an
accelerator gets nothing (its CPU threads only feed the device).

This module imports nothing heavy: it runs before any command does.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, MutableMapping

# What `make demo` used to set itself; the variables OpenMP reads when its runtime loads.
CPU_THREAD_POLICY: dict[str, str] = {"OMP_WAIT_POLICY": "PASSIVE"}

# The accelerators torch trains on: their device files, and the variables that hide every
# device of the kind when empty or -1 (ROCm's torch also reads CUDA's).
_ACCELERATORS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("/dev/nvidia[0-9]*", ("CUDA_VISIBLE_DEVICES",)),
    ("/dev/kfd", ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")),
    ("/dev/davinci[0-9]*", ("ASCEND_RT_VISIBLE_DEVICES",)),
)


def accelerator_visible(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a process started with ``environ`` (default: this one's) could train on an
    accelerator, judged from device files and the variables that hide them, without importing
    torch or running a driver tool (this runs before every command)."""
    environ = os.environ if environ is None else environ
    for pattern, hiding in _ACCELERATORS:
        hidden = any(environ.get(name, "x").strip() in ("", "-1") for name in hiding)
        if not hidden and glob.glob(pattern):
            return True
    return False


def thread_policy(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of :data:`CPU_THREAD_POLICY` a process started with ``environ`` (default:
    this one's) lacks: all that the user did not set, on a machine that trains on its CPU; none
    where an accelerator is visible."""
    environ = os.environ if environ is None else environ
    if accelerator_visible(environ):
        return {}
    return {name: value for name, value in CPU_THREAD_POLICY.items() if name not in environ}


def apply_thread_policy(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Add :func:`thread_policy` to ``environ`` (default: this process's environment, which every
    child inherits) and return what was added. It takes effect in this process only when torch
    was not imported yet."""
    environ = os.environ if environ is None else environ
    added = thread_policy(environ)
    environ.update(added)
    return added


def with_thread_policy(env: Mapping[str, str] | None) -> dict[str, str] | None:
    """The environment to start a child with: ``env`` (``None``: this process's, inherited)
    plus :func:`thread_policy`. ``None`` again when nothing needs adding, so the child
    inherits as before."""
    base = os.environ if env is None else env
    added = thread_policy(base)
    if not added:
        return None if env is None else dict(env)
    return {**base, **added}
