"""VeRL on the CPU: a ``cpu`` platform in VeRL's platform registry, and the one patch it needs.

Imported by VeRL itself, in its driver and in each Ray worker, through
``VERL_USE_EXTERNAL_MODULES`` (set by :mod:`aworld_train_verl.device` with
``VERL_PLATFORM=cpu``): ``import verl`` imports this module before any worker module, so the
patch below is in place when ``verl.workers.engine_workers`` binds the function it replaces.
Written for exactly :data:`aworld_train_verl.device.VERL_VERSION`: the registry, the platform
interface and the patched function are VeRL internals, so another version is refused.

VeRL's code asks its platform for a ``torch.<device>`` module and calls memory, RNG and stream
functions on it; ``torch.cpu`` has the streams only, so :class:`_CpuDeviceModule` adds the rest
(memory figures read 0: the CPU has no separate device memory to report or free).

In vLLM's own processes (VeRL's worker extension imports VeRL there, after vLLM), vLLM's CPU
build is made to keep its linear layers' weights loadable (:func:`_keep_vllm_weights_loadable`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import torch
import verl.utils.distributed as verl_distributed
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry

from aworld_train_verl.device import PLATFORM, VERL_VERSION

_installed = importlib.metadata.version("verl")
if _installed != VERL_VERSION:
    raise ImportError(
        f"aworld_train_verl.cpu_platform is written for VeRL {VERL_VERSION}, "
        f"but VeRL {_installed} is installed: train on a GPU, or install verl=={VERL_VERSION}"
    )


class _CpuDeviceModule(ModuleType):
    """``torch.cpu`` with the device-module functions VeRL calls that it lacks."""

    def __init__(self) -> None:
        super().__init__("torch.cpu")

    def __getattr__(self, name: str) -> Any:
        return getattr(torch.cpu, name)

    @staticmethod
    def set_device(device: Any) -> None:
        pass

    @staticmethod
    def empty_cache() -> None:
        pass

    @staticmethod
    def ipc_collect() -> None:
        pass

    @staticmethod
    def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
        pass

    @staticmethod
    def memory_allocated(device: Any = None) -> int:
        return 0

    memory_reserved = max_memory_allocated = max_memory_reserved = memory_allocated

    @staticmethod
    def reset_peak_memory_stats(device: Any = None) -> None:
        pass

    @staticmethod
    def mem_get_info(device: Any = None) -> tuple[int, int]:
        import psutil

        memory = psutil.virtual_memory()
        return memory.available, memory.total

    @staticmethod
    def get_device_name(device: Any = None) -> str:
        return "cpu"

    @staticmethod
    def get_rng_state(device: Any = None) -> torch.Tensor:
        return torch.get_rng_state()

    @staticmethod
    def set_rng_state(state: torch.Tensor, device: Any = None) -> None:
        torch.set_rng_state(state)

    @staticmethod
    def manual_seed(seed: int) -> None:
        torch.manual_seed(seed)

    manual_seed_all = manual_seed


_DEVICE_MODULE = _CpuDeviceModule()


@PlatformRegistry.register(platform=PLATFORM)
class PlatformCPU(PlatformBase):
    """The CPU as VeRL's accelerator: ``gloo`` collectives, no IPC (VeRL then syncs the rollout's
    weights through shared memory), and Ray's logical ``GPU`` resource for placement, since
    VeRL's resource pools always ask Ray for GPUs."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:  # type: ignore[override]
        # VeRL passes it as the device itself (model.to(device=...)), where an index means an
        # accelerator's: "cpu" (torch.cpu's own answer) is the one that works.
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        pass

    def synchronize(self, device_index: int | None = None) -> None:
        pass

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        pass

    def empty_cache(self) -> None:
        pass

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"  # what Ray sets for the logical GPUs it hands out

    @contextlib.contextmanager
    def nvtx_range(self, msg: str) -> Iterator[None]:
        yield

    def profiler_start(self) -> None:
        pass

    def profiler_stop(self) -> None:
        pass

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


_initialize = verl_distributed.initialize_global_process_group_ray


def _initialize_on_cpu(timeout_second: int | None = None, backend: str | None = None) -> None:
    """VeRL's own default backend is ``cpu:gloo,<device>:<collective backend>``, which on this
    platform names the CPU twice and torch refuses ("Duplicate device type cpu")."""
    _initialize(timeout_second=timeout_second, backend=backend or "cpu:gloo")


verl_distributed.initialize_global_process_group_ray = _initialize_on_cpu


def _keep_vllm_weights_loadable() -> None:
    """vLLM's CPU build repacks each linear layer's weight for oneDNN once the model is loaded,
    replacing the parameter with an empty one (without its ``weight_loader``) or, for the
    output embedding, keeping a packed copy that later loads never reach. VeRL syncs the
    trained weights into the rollout's parameters in place after every step, so there the
    layers compute with torch's own ``linear`` on their parameters instead: slower, and for
    debugging and CI only."""
    from torch.nn.functional import linear
    from vllm.model_executor.layers import utils as vllm_layers

    def dispatch(layer: torch.nn.Module, remove_weight: bool) -> None:
        layer.cpu_linear = lambda x, weight, bias: linear(x, weight, bias)

    vllm_layers.dispatch_cpu_unquantized_gemm = dispatch


if "vllm" in sys.modules:  # one of vLLM's processes; elsewhere vLLM is not imported for this
    _keep_vllm_weights_loadable()
