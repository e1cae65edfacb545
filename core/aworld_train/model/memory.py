"""Memory before launch: the peak memory of one training step on each GPU, estimated from the
model's ``config.json`` and the settings the engine will train with.

The model is built on torch's meta device (:func:`aworld_train.model._meta.meta_model`): its
parameters are counted, nothing is downloaded, loaded or allocated. What an engine holds per
GPU comes from a :class:`MemoryPlan`: the core derives one from the common config and the
effective settings (:func:`default_plan`), and an engine that knows better (its micro-batch,
gradient checkpointing, FSDP/ZeRO sharding, a colocated vLLM) answers the ``memory_plan`` hook.

The estimate has two parts. The *certain* part is what the step cannot do without: weights,
gradients and AdamW's two states, the reference model, and what the rollout engine reserves;
it is exact for the parameters torch allocates, and ``check`` refuses a job whose certain part
does not fit the GPU. Activations depend on kernels and on the data, so they are an
approximation, and a job that fits only without them gets a warning. torch is imported only
inside functions.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from aworld_train.errors import ConfigError

GB = 1e9  # decimal, as GPU vendors and ``resources.gpu_memory_gb`` count
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
# config.json's dtype names -> the common precision names.
_CONFIG_DTYPES = {
    "float32": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "float": "fp32",
    "half": "fp16",
}
ADAM_STATES = 2  # AdamW keeps exp_avg and exp_avg_sq, each shaped and typed like its parameter
# Budgets when neither the job nor the engine bounds the sequence: TRL's old prompt default and
# a common completion length.
DEFAULT_PROMPT_TOKENS = 512
DEFAULT_COMPLETION_TOKENS = 256
# The certain parts, in the order a refusal names them.
CERTAIN_PARTS = ("weights", "gradients", "optimizer", "reference", "rollout")


@dataclass(frozen=True)
class MemoryPlan:
    """What one training process holds on its GPU during a step, as the engine will train.

    :ivar precision: the precision computed in (``fp32``, ``bf16``, ``fp16``); activations are
        kept in it.
    :ivar weight_dtype: the dtype the weights are stored in (``fp32``, ``bf16``, ``fp16``);
        ``None``: the one ``config.json`` names (``dtype``/``torch_dtype``), else fp32, as
        transformers loads a model without a ``dtype``.
    :ivar lora: the adapter trained (``Lora.to_dict()``), or ``None`` for a full fine-tune.
    :ivar adapter_dtype: the dtype of the LoRA adapter (PEFT upcasts it to fp32 by default).
    :ivar micro_batch: sequences in one forward/backward pass on one GPU.
    :ivar sequence_length: tokens per sequence (prompt + completion, or the agent's response
        budget).
    :ivar gradient_checkpointing: activations are recomputed in the backward pass, so only
        each layer's input is kept.
    :ivar shard_degree: the GPUs the weights, gradients and optimizer states are sharded over
        (``gpus_per_node × nnodes`` under FSDP or ZeRO).
    :ivar zero_stage: what is sharded: 0 nothing (DDP), 1 optimizer states, 2 and gradients,
        3 and weights (FSDP's full shard).
    :ivar offload_optimizer: optimizer states live in CPU memory.
    :ivar offload_fix: how a refusal names offloading the optimizer states as a fix, in the
        engine's own words where it has a key for it.
    :ivar reference_model: a frozen copy of the weights computes the KL term (``kl_coef > 0``
        without LoRA: with LoRA the base model with the adapter off is the reference).
    :ivar rollout_fraction: the share of the GPU's memory a colocated vLLM reserves
        (``gpu_memory_utilization``); 0 when rollouts run elsewhere.
    :ivar rollout_alongside: ``None`` when the rollout engine keeps its reservation through the
        update; else it generates between updates (its cache freed, its weights asleep while
        the trainer steps) and these certain parts stay on the GPU while it generates (the
        others are offloaded): the step's peak is the larger of the two phases.
    :ivar notes: what the plan assumed, for the check row (``prompt 512 tokens assumed``).
    """

    precision: str = "fp32"
    weight_dtype: str | None = None
    lora: dict[str, Any] | None = None
    adapter_dtype: str = "fp32"
    micro_batch: int = 1
    sequence_length: int = DEFAULT_PROMPT_TOKENS + DEFAULT_COMPLETION_TOKENS
    gradient_checkpointing: bool = False
    shard_degree: int = 1
    zero_stage: int = 0
    offload_optimizer: bool = False
    offload_fix: str = "optimizer offload"
    reference_model: bool = False
    rollout_fraction: float = 0.0
    rollout_alongside: tuple[str, ...] | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelShape:
    """What the estimate needs of the model: parameter counts and the transformer's sizes."""

    architecture: str
    parameters: int  # every parameter, tied ones once
    adapter_parameters: int  # the LoRA adapter's, 0 without LoRA
    config_dtype: str  # fp32 when config.json names none
    layers: int
    hidden: int
    intermediate: int
    kv_width: int  # num_key_value_heads × head_dim
    vocab: int


@dataclass(frozen=True)
class MemoryEstimate:
    """The peak memory of one training step on one GPU, in bytes, part by part.

    :ivar parts: ``weights``, ``gradients``, ``optimizer``, ``reference``, ``rollout`` (the
        certain part) and ``activations`` (an approximation).
    :ivar capacity: the GPU's memory in bytes, or ``None`` when none is known (no verdict).
    :ivar gpu: the GPU assumed (``resources.gpu_memory_gb 80``, ``NVIDIA H100 80GB HBM3``).
    """

    parts: dict[str, int]
    plan: MemoryPlan
    shape: ModelShape
    capacity: int | None = None
    gpu: str = ""

    @property
    def certain(self) -> int:
        """Weights, gradients, optimizer states and reservations: what the step cannot shed."""
        return sum(self.parts[name] for name in CERTAIN_PARTS)

    @property
    def total(self) -> int:
        return self.certain + self.parts["activations"]

    @property
    def verdict(self) -> str:
        """``fits``, ``may not fit`` (only the certain part fits), ``does not fit``, or
        ``unknown`` (no GPU to compare with)."""
        if self.capacity is None:
            return "unknown"
        if self.certain > self.capacity:
            return "does not fit"
        return "fits" if self.total <= self.capacity else "may not fit"

    def to_dict(self) -> dict[str, Any]:
        """The manifest's ``memory``: bytes per GPU, the GPU, the verdict and the plan."""
        return {
            "per_gpu_bytes": dict(self.parts),
            "certain_bytes": self.certain,
            "total_bytes": self.total,
            "gpu": self.gpu or None,
            "gpu_memory_bytes": self.capacity,
            "verdict": self.verdict,
            "parameters": self.shape.parameters,
            "trainable_parameters": self.shape.adapter_parameters or self.shape.parameters,
            "plan": {k: v for k, v in asdict(self.plan).items() if k != "notes"},
        }


def model_shape(
    folder: str | Path, lora: dict[str, Any] | None, trust_remote_code: bool = False
) -> ModelShape | str:
    """The shape of the model ``config.json`` in ``folder`` describes, built on the meta
    device; or why it could not be built (transformers' one line)."""
    from aworld_train.model._meta import meta_model

    model = meta_model(str(folder), trust_remote_code)
    if isinstance(model, str):
        return model
    config = model.config
    text = getattr(config, "get_text_config", lambda: config)()
    hidden = int(text.hidden_size)
    heads = int(getattr(text, "num_attention_heads", 1) or 1)
    head_dim = int(getattr(text, "head_dim", None) or hidden // heads)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    return ModelShape(
        architecture=type(model).__name__,
        parameters=sum(p.numel() for p in model.parameters()),
        adapter_parameters=adapter_parameters(model, lora) if lora else 0,
        config_dtype=_config_dtype(Path(folder)),
        layers=int(text.num_hidden_layers),
        hidden=hidden,
        intermediate=int(getattr(text, "intermediate_size", None) or 4 * hidden),
        kv_width=kv_heads * head_dim,
        vocab=int(text.vocab_size),
    )


def adapter_parameters(model: Any, lora: dict[str, Any]) -> int:
    """The LoRA adapter's parameter count: ``rank × (in + out)`` for each linear layer it
    targets, matched as PEFT matches ``target_modules`` (``all-linear``: every linear layer
    but the output head)."""
    import torch

    from aworld_train.job.settings import ALL_LINEAR

    targets = lora.get("target_modules") or ALL_LINEAR
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    count = 0
    for name, module in model.named_modules():
        if not isinstance(module, torch.nn.Linear) or module is output:
            continue
        if targets == ALL_LINEAR:
            hit = True
        elif isinstance(targets, str):
            hit = re.fullmatch(targets, name) is not None
        else:
            hit = any(name == t or name.endswith(f".{t}") for t in targets)
        if hit:
            count += int(lora["rank"]) * (module.in_features + module.out_features)
    return count


def _config_dtype(folder: Path) -> str:
    """The dtype ``config.json`` stores the weights in, as a common precision name."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "fp32"
    name = config.get("dtype") or config.get("torch_dtype") or "float32"
    return _CONFIG_DTYPES.get(str(name).removeprefix("torch."), "fp32")


def estimate(
    shape: ModelShape, plan: MemoryPlan, capacity: int | None = None, gpu: str = ""
) -> MemoryEstimate:
    """The memory one training step holds on each GPU, part by part (see the module's
    docstring for what is certain).

    Full fine-tune, ``P`` parameters of ``w`` bytes: weights ``P·w``, gradients ``P·w``, AdamW
    ``2·P·w`` (torch keeps each state in its parameter's dtype). LoRA, ``A`` adapter
    parameters of ``a`` bytes: frozen weights ``P·w`` plus ``A·a``, gradients ``A·a``, AdamW
    ``2·A·a``. Under ZeRO/FSDP over ``n`` GPUs, stage 1 divides the optimizer states by ``n``,
    stage 2 the gradients too, stage 3 the weights too. The reference model is ``P·w``
    (sharded with the weights); a colocated vLLM reserves its fraction of the GPU, and where
    it generates only between updates (``rollout_alongside``) the ``rollout`` part is what
    generating needs beyond the update's certain part.
    """
    weight_bytes = DTYPE_BYTES[plan.weight_dtype or shape.config_dtype]
    if plan.lora:
        trainable, trainable_bytes = shape.adapter_parameters, DTYPE_BYTES[plan.adapter_dtype]
        weights = shape.parameters * weight_bytes + trainable * trainable_bytes
    else:
        trainable, trainable_bytes = shape.parameters, weight_bytes
        weights = shape.parameters * weight_bytes
    gradients = trainable * trainable_bytes
    optimizer = ADAM_STATES * trainable * trainable_bytes
    degree = max(1, plan.shard_degree)
    stage = plan.zero_stage if degree > 1 else 0
    optimizer = 0 if plan.offload_optimizer else optimizer // (degree if stage >= 1 else 1)
    gradients //= degree if stage >= 2 else 1
    weights //= degree if stage >= 3 else 1
    reference = 0
    if plan.reference_model:
        reference = shape.parameters * weight_bytes // (degree if stage >= 3 else 1)
    parts = {
        "weights": weights,
        "gradients": gradients,
        "optimizer": optimizer,
        "reference": reference,
    }
    rollout = int(plan.rollout_fraction * capacity) if capacity else 0
    if rollout and plan.rollout_alongside is not None:
        generating = rollout + sum(parts[name] for name in plan.rollout_alongside)
        rollout = max(0, generating - sum(parts.values()))
    parts.update(rollout=rollout, activations=activation_bytes(shape, plan))
    return MemoryEstimate(parts, plan, shape, capacity, gpu)


def activation_bytes(shape: ModelShape, plan: MemoryPlan) -> int:
    """An approximation of the activations a step keeps for its backward pass.

    Per decoder layer and token a Llama-style block keeps about ``8h + 2kv + 4i`` values (the
    norms' inputs and outputs, q/k/v, the attention output, the MLP's gate, up, activation and
    product; fused attention keeps no score matrix); with gradient checkpointing only each
    layer's input ``h`` is kept, plus one layer's full set while it is recomputed. The logits
    add ``V`` values per token in the compute dtype plus two fp32 copies (the upcast and the
    log-softmax the loss takes).
    """
    tokens = plan.micro_batch * plan.sequence_length
    value = (
        DTYPE_BYTES[plan.precision]
        if plan.precision != "fp32"
        else DTYPE_BYTES[plan.weight_dtype or shape.config_dtype]
    )
    per_layer = 8 * shape.hidden + 2 * shape.kv_width + 4 * shape.intermediate
    if plan.gradient_checkpointing:
        layers = shape.layers * shape.hidden + per_layer
    else:
        layers = shape.layers * per_layer
    logits = shape.vocab * (value + 8)
    return tokens * (layers * value + logits)


def default_plan(
    config: Any, settings: dict[str, Any], response_budget: int | None = None
) -> MemoryPlan:
    """The plan the common config and the engine's effective settings imply, for an engine
    that does not answer ``memory_plan``: the precision, LoRA and ``kl_coef`` it reported,
    ``batch_size`` sequences of ``max_prompt_length + max_completion_length`` tokens (defaults
    :data:`DEFAULT_PROMPT_TOKENS`, the agent's ``response_budget``, else
    :data:`DEFAULT_COMPLETION_TOKENS`), no checkpointing and no sharding.

    :param config: the common ``TrainConfig``.
    :param settings: ``{common name: value}`` of the effective settings (may be empty).
    """
    from aworld_train.job.settings import resolve_precision

    prompt = prompt_budget(config)
    notes = [] if config.max_prompt_length else [f"prompts of {prompt} tokens assumed"]
    completion = config.max_completion_length or response_budget or DEFAULT_COMPLETION_TOKENS
    lora = settings.get("lora", config.lora.to_dict() if config.lora else None)
    kl_coef = settings.get("kl_coef", config.kl_coef) or 0.0
    return MemoryPlan(
        precision=settings.get("precision") or resolve_precision(config.precision, False),
        lora=lora,
        micro_batch=config.batch_size or 1,
        sequence_length=prompt + completion,
        reference_model=float(kl_coef) > 0 and not lora,
        notes=tuple(notes),
    )


def prompt_budget(config: Any) -> int:
    """The prompt tokens a sequence is sized for: the common ``max_prompt_length``, else
    :data:`DEFAULT_PROMPT_TOKENS` (the plan's notes say it was assumed)."""
    return int(config.max_prompt_length or DEFAULT_PROMPT_TOKENS)


def gpu_capacity(gpu_memory_gb: float | None, device: str | None) -> tuple[int | None, str]:
    """The memory of the GPU the job trains on, in bytes, and how it is named: the config's
    ``resources.gpu_memory_gb``, else the visible GPU when the engine trains on one (its
    ``device`` setting is not ``cpu``), else ``(None, "")``."""
    if gpu_memory_gb is not None:
        return int(gpu_memory_gb * GB), f"a {gpu_memory_gb:g} GB GPU (resources.gpu_memory_gb)"
    if not device or device == "cpu":
        return None, ""
    import torch

    if not torch.cuda.is_available():
        return None, ""
    properties = torch.cuda.get_device_properties(0)
    memory = int(properties.total_memory)
    return memory, f"the visible {properties.name} ({gb(memory)})"


def describe(estimate_: MemoryEstimate) -> str:
    """The ``resources`` row: the breakdown per GPU, the GPU assumed and the verdict."""
    parts = estimate_.parts
    shown = [
        f"{name} {gb(parts[name])}"
        for name in (*CERTAIN_PARTS, "activations")
        if parts[name] or name in ("weights", "activations")
    ]
    plan = estimate_.plan
    how = [
        f"{plan.lora and 'LoRA' or 'full'} {plan.precision}",
        f"micro-batch {plan.micro_batch} × {plan.sequence_length} tokens",
    ]
    if plan.gradient_checkpointing:
        how.append("gradient checkpointing")
    if plan.shard_degree > 1 and plan.zero_stage:
        how.append(f"sharded over {plan.shard_degree} GPUs (stage {plan.zero_stage})")
    how += list(plan.notes)
    text = (
        f"{gb(estimate_.total)} per GPU ({', '.join(shown)}; "
        f"{estimate_.shape.architecture} {_count(estimate_.shape.parameters)} parameters, "
        f"{', '.join(how)})"
    )
    if estimate_.capacity is None:
        return f"{text}; no GPU to compare with (set resources.gpu_memory_gb)"
    return f"{text}; {estimate_.verdict} on {estimate_.gpu}"


def refuse_or_warn(estimate_: MemoryEstimate) -> str | None:
    """Refuse a job whose certain part does not fit its GPU; a warning, or ``None``, else.

    :raises ConfigError: one line naming the biggest parts and what would make the job fit.
    """
    verdict = estimate_.verdict
    if verdict in ("fits", "unknown"):
        return None
    parts = estimate_.parts
    plan = estimate_.plan
    if verdict == "may not fit":
        return (
            f"resources: the step may not fit {estimate_.gpu}: "
            f"{gb(estimate_.certain)} is certain and activations add about "
            f"{gb(parts['activations'])}: a smaller micro-batch"
            f"{'' if plan.gradient_checkpointing else ', gradient checkpointing'} or shorter "
            "sequences would make room"
        )
    biggest = sorted(CERTAIN_PARTS, key=lambda name: -parts[name])
    named = ", ".join(f"{name} {gb(parts[name])}" for name in biggest if parts[name])
    fixes = []
    if not plan.lora:
        fixes.append("lora")
    fixes.append(
        "more GPUs with FSDP/ZeRO sharding"
        if plan.zero_stage < 3 or plan.shard_degree == 1
        else "more GPUs"
    )
    if not plan.offload_optimizer and parts["optimizer"]:
        fixes.append(plan.offload_fix)
    if parts["rollout"]:
        fixes.append("a lower vLLM gpu_memory_utilization")
    raise ConfigError(
        f"resources: the job does not fit {estimate_.gpu}: "
        f"{gb(estimate_.certain)} per GPU before activations ({named}): use "
        f"{', '.join(fixes[:-1]) + ' or ' + fixes[-1] if len(fixes) > 1 else fixes[0]}"
    )


def trainer_sharding(fsdp: Any, deepspeed: Any) -> tuple[int, bool]:
    """The ZeRO stage transformers' ``fsdp`` and ``deepspeed`` arguments ask for (FSDP's full
    shard is 3, ``shard_grad_op`` 2) and whether the optimizer states are offloaded to the CPU
    or NVMe.

    :param fsdp: the ``fsdp`` argument (``"full_shard offload"``, a list of options), or
        ``None``.
    :param deepspeed: the DeepSpeed config: a dict, the path of its JSON file, or ``None``;
        ``(0, False)`` for a file that cannot be read (the engine's own checks name it).
    """
    if fsdp:
        options = fsdp if isinstance(fsdp, str) else " ".join(map(str, fsdp))
        return 2 if "shard_grad_op" in options else 3, "offload" in options
    config = deepspeed
    if isinstance(config, (str, Path)):
        try:
            config = json.loads(Path(config).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return 0, False
    if not isinstance(config, dict):
        return 0, False
    zero = config.get("zero_optimization") or {}
    offload = (zero.get("offload_optimizer") or {}).get("device") in ("cpu", "nvme")
    return int(zero.get("stage") or 0), offload


def _count(parameters: int) -> str:
    """A parameter count as people say it: ``494M``, ``7.62B``."""
    return f"{parameters / 1e9:.2f}B" if parameters >= 1e9 else f"{parameters / 1e6:.3g}M"


def gb(size: int | None) -> str:
    """Bytes as GB with a sensible number of digits (``15.23 GB``, ``0.0004 GB``)."""
    if size is None:
        return "?"
    value = size / GB
    return f"{value:.2f} GB" if value >= 0.1 else f"{value:.2g} GB"
