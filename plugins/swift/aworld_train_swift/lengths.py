"""The ``swift:`` section's length keys against the model's positions.

The core compares each prompt plus the completion budget it knows (config
``max_completion_length``, else the agent's ``llm_max_tokens``) with the model's positions. ms-swift
generates up to its own ``max_completion_length`` (the section's, else its default 512) in GRPO,
and keeps SFT and DPO sequences up to ``max_length``: where those differ from what the core
checked, they are checked here, in one line naming the key.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.engine import ModelError
from aworld_train.engine.hf import arguments_class, check_lengths

from aworld_train_swift.schema import ARGUMENT_CLASSES

if TYPE_CHECKING:
    from aworld_train.engine import TrainConfig

    from aworld_train_swift.agent import SwiftAgent
    from aworld_train_swift.config import SwiftConfig
    from aworld_train_swift.dataset import SwiftDatasets


def swift_default(algorithm: str, name: str) -> Any:
    """ms-swift's default for argument ``name`` of the algorithm's argument class."""
    fields = {
        f.name: f.default for f in dataclasses.fields(arguments_class(ARGUMENT_CLASSES, algorithm))
    }
    return fields.get(name)


def prompts(path: Path | None) -> Any:
    """The GRPO prompts of a converted file (its ``messages``) as the core's ``prompt`` column,
    or ``None``."""
    from datasets import Dataset

    if path is None:
        return None
    dataset = Dataset.from_json(str(path))
    return dataset.select_columns(["messages"]).rename_column("messages", "prompt")


def check_swift_lengths(
    resolved: SwiftConfig,
    agent: SwiftAgent,
    data: SwiftDatasets | None,
    config: TrainConfig,
    tool_schemas: list[dict[str, Any]],
) -> None:
    """GRPO: every prompt plus swift's ``max_completion_length`` fits the model's positions;
    SFT and DPO: ``swift.max_length`` is within them.

    :raises ModelError: the core's message (naming the row), after the key the length came
        from; or ``swift.max_length`` past the positions.
    """
    from aworld_train.engine.settings import max_positions

    if not agent.local or data is None:
        return
    section = config.engine_section()
    if resolved.algorithm == "grpo":
        budget = resolved.arguments.get(
            "max_completion_length", swift_default("grpo", "max_completion_length")
        )
        if budget is None or budget == (config.max_completion_length or agent.max_tokens):
            return
        origin = (
            "config key 'swift.max_completion_length'"
            if "max_completion_length" in section
            else "ms-swift's default max_completion_length"
        )
        try:
            check_lengths(
                agent.model,
                {"train_dataset": prompts(data.train), "test_dataset": prompts(data.test)},
                agent.system or None,
                tool_schemas,
                budget,
                1,
                config.trust_remote_code,
            )
        except ModelError as error:
            raise ModelError(f"{origin} ({budget} tokens): {error}") from None
        return
    length = section.get("max_length")
    found = max_positions(Path(agent.model))
    if not isinstance(length, int) or found is None or length <= found[0]:
        return
    positions, key = found
    raise ModelError(
        f"config key 'swift.max_length' ({length} tokens) is past the model's {positions} "
        f"positions ({key} in {Path(agent.model) / 'config.json'}): ms-swift keeps "
        f"{resolved.algorithm.upper()} sequences up to max_length, longer than the model takes; "
        f"lower swift.max_length to {positions} or less"
    )
