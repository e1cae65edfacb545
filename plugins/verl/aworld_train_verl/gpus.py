"""Where a VeRL job trains: the GPUs this process can use, counted without importing torch, or
the Ray cluster it joins."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig


def cluster_address(config: TrainConfig) -> str | None:
    """The Ray cluster the job joins: ``resources.ray_address``, else ``RAY_ADDRESS``, else none."""
    return config.resources.ray_address or os.environ.get("RAY_ADDRESS") or None


def visible_gpus() -> int:
    """How many NVIDIA GPUs this process can use, without importing torch.

    ``CUDA_VISIBLE_DEVICES`` narrows what ``nvidia-smi -L`` lists, as it does for CUDA.
    """
    import shutil
    import subprocess

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        listed = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    count = sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU "))
    if visible is not None:
        count = min(count, len([d for d in visible.split(",") if d.strip()]))
    return count
