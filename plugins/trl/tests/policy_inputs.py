"""What the policy reads while a trainer trains, for tests that check the prompts TRL builds."""

from __future__ import annotations

from typing import Any


def train_recording_inputs(trainer: Any) -> tuple[dict[str, Any], list[list[int]]]:
    """Train ``trainer`` (an ``AgentTrainer``) and return its final metrics with every token
    sequence the policy's embedding read: prompts, its own turns and what TRL appends."""
    import torch

    seen: list[list[int]] = []

    def record(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if isinstance(module, torch.nn.Embedding) and args and args[0].dim() == 2:
            seen.extend(args[0].tolist())

    hook = torch.nn.modules.module.register_module_forward_pre_hook(record)
    try:
        final = trainer.train()
    finally:
        hook.remove()
    return final, seen
