"""The segments of an episode as rows of TRL's batch, each with the episode's advantage.

An agent that rewrites the conversation it had sent makes an episode of several token sequences
(:attr:`~aworld_train.engine.EpisodeResult.segments`). TRL's ``rollout_func`` returns one row per
prompt, so the rollout gives TRL each episode's last segment (the one that ends with the answer
the reward scores) and keeps the others aside; once TRL has scored the episodes and computed
their advantages per group, :func:`add_segment_rows` appends the other segments as rows of their
own, each with its episode's advantage: the group advantage is computed per episode, not per
segment. The log-probs TRL computes for its own rows (the old policy's, the reference model's)
are computed for the added rows the same way.

When TRL splits a generation batch over several optimizer micro-steps (``steps_per_generation``),
the rows must divide evenly: rows of a segment repeated with nothing to train on (mask 0) fill
the batch up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aworld_train.engine import TrainingError


@dataclass
class SegmentRow:
    """A segment to add: its episode's row in TRL's batch (-1: a filler row), and its tokens
    (a runtime ``Trajectory``)."""

    episode: int
    trajectory: Any


#: The batch keys this module knows how to extend; another key in TRL's batch (images, vLLM's
#: importance-sampling ratio) stops the step with an error naming it, rather than training on
#: rows whose tensors disagree.
_KNOWN = {
    "prompt_ids",
    "prompt_mask",
    "completion_ids",
    "completion_mask",
    "advantages",
    "num_items_in_batch",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "tool_mask",
}


def add_segment_rows(trainer: Any, batch: dict[str, Any], rows: list[SegmentRow]) -> dict[str, Any]:
    """``batch`` (what TRL's ``_generate_and_score_completions`` returned) with ``rows`` added."""
    import torch

    unknown = sorted(set(batch) - _KNOWN)
    if unknown:
        raise TrainingError(
            f"an episode the agent cut into segments cannot be trained with TRL's {unknown[0]!r} "
            "in the batch (images, vLLM importance sampling): train it without, or with an agent "
            "that keeps its conversation whole"
        )
    rows = rows + _fillers(rows, len(batch["prompt_ids"]), trainer.args.steps_per_generation)
    pad = trainer._tokenizer.pad_token_id
    device = batch["prompt_ids"].device
    width_p = max(batch["prompt_ids"].shape[1], *(len(r.trajectory.prompt_ids) for r in rows))
    width_c = max(batch["completion_ids"].shape[1], *(len(r.trajectory.response_ids) for r in rows))
    added = {
        key: value.to(device)
        for key, value in _segment_tensors(trainer, rows, pad, width_p, width_c).items()
    }
    out = dict(batch)
    for key, fill in (("prompt_ids", pad), ("prompt_mask", 0)):
        out[key] = torch.cat([_widen(batch[key], width_p, fill, "left"), added[key]])
    for key, fill in (("completion_ids", pad), ("completion_mask", 0), ("tool_mask", 1)):
        if key in batch:
            out[key] = torch.cat([_widen(batch[key], width_c, fill, "right"), added[key]])
    advantages = batch["advantages"]
    episode_advantages = torch.stack([advantages[max(r.episode, 0)] for r in rows])
    out["advantages"] = torch.cat([advantages, episode_advantages.to(advantages.dtype)])
    if "sampling_per_token_logps" in batch:
        logprobs = [r.trajectory.logprobs for r in rows]
        sampled = _pad_right(logprobs, width_c, 0.0, torch.float32).to(device)
        out["sampling_per_token_logps"] = torch.cat(
            [_widen(batch["sampling_per_token_logps"], width_c, 0.0, "right"), sampled]
        )
    for key in ("old_per_token_logps", "ref_per_token_logps"):
        if key in batch:
            computed = _logps(trainer, key, added, width_c)
            out[key] = torch.cat([_widen(batch[key], width_c, 0.0, "right"), computed])
    loss_mask = out["completion_mask"] * out["tool_mask"]
    out["num_items_in_batch"] = trainer.accelerator.gather(loss_mask.sum()).sum()
    return out


def _segment_tensors(
    trainer: Any, rows: list[SegmentRow], pad: int, width_p: int, width_c: int
) -> dict[str, Any]:
    """The rows' prompts (left-padded to ``width_p``), completions (right-padded to
    ``width_c``) and masks; a filler row trains on nothing, and with
    ``mask_truncated_completions`` neither does a completion cut short."""
    import torch

    prompts = [r.trajectory.prompt_ids for r in rows]
    completions = [r.trajectory.response_ids for r in rows]
    masks = [r.trajectory.mask if r.episode >= 0 else [0] * len(r.trajectory.mask) for r in rows]
    long = torch.long
    tensors = {
        "prompt_ids": _pad_left(prompts, width_p, pad, long),
        "prompt_mask": _pad_left([[1] * len(p) for p in prompts], width_p, 0, long),
        "completion_ids": _pad_right(completions, width_c, pad, long),
        "completion_mask": _pad_right([[1] * len(c) for c in completions], width_c, 0, long),
        "tool_mask": _pad_right(masks, width_c, 1, long),
    }
    if trainer.mask_truncated_completions:
        ends = {*trainer.eos_token_ids, pad}
        cut = torch.tensor([not c or c[-1] not in ends for c in completions]).unsqueeze(1)
        tensors["completion_mask"] = tensors["completion_mask"] * (~cut).long()
        tensors["tool_mask"] = tensors["tool_mask"] * (~cut).long()
    return tensors


def _pad_left(values: list[list[Any]], width: int, fill: Any, dtype: Any) -> Any:
    """``values`` as one tensor, each row filled up to ``width`` on the left."""
    import torch

    return torch.tensor([[fill] * (width - len(v)) + list(v) for v in values], dtype=dtype)


def _pad_right(values: list[list[Any]], width: int, fill: Any, dtype: Any) -> Any:
    """``values`` as one tensor, each row filled up to ``width`` on the right."""
    import torch

    return torch.tensor([list(v) + [fill] * (width - len(v)) for v in values], dtype=dtype)


def _widen(tensor: Any, width: int, fill: Any, side: str) -> Any:
    """A batch tensor filled up to ``width`` columns on ``side`` ("left" or "right")."""
    import torch

    more = width - tensor.shape[1]
    if more == 0:
        return tensor
    padding = torch.full((tensor.shape[0], more), fill, dtype=tensor.dtype, device=tensor.device)
    return torch.cat([padding, tensor] if side == "left" else [tensor, padding], dim=1)


def _fillers(rows: list[SegmentRow], episodes: int, steps: int) -> list[SegmentRow]:
    """Rows with nothing to train on (``episode`` -1: mask 0) that make the batch divide
    evenly into ``steps`` micro-steps."""
    missing = -(episodes + len(rows)) % steps
    return [SegmentRow(-1, rows[i % len(rows)].trajectory) for i in range(missing)]


def _logps(trainer: Any, key: str, added: dict[str, Any], width: int) -> Any:
    """The per-token log-probs TRL computes for ``key``, for the added rows."""
    import torch
    from trl.trainer.utils import use_adapter

    ids = torch.cat([added["prompt_ids"], added["completion_ids"]], dim=1)
    attention = torch.cat([added["prompt_mask"], added["completion_mask"]], dim=1)
    batch_size = trainer.args.per_device_train_batch_size
    with torch.no_grad():
        if key == "old_per_token_logps":
            return trainer._get_per_token_logps_and_entropies(
                trainer.model, ids, attention, width, batch_size=batch_size
            )[0]
        if trainer.ref_model is not None:
            return trainer._get_per_token_logps_and_entropies(
                trainer.ref_model, ids, attention, width, batch_size=batch_size
            )[0]
        model = trainer.accelerator.unwrap_model(trainer.model)
        with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
            return trainer._get_per_token_logps_and_entropies(
                trainer.model, ids, attention, width, batch_size=batch_size
            )[0]
