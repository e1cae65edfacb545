"""Dataset rows as token ids: prompts rendered with the base model's chat template as every
engine renders them, SFT rows with the prompt's tokens weighted 0."""

from __future__ import annotations

import random
from typing import Any

from aworld_train.engine.runtime import prompt_messages


def prompt_ids(tokenizer: Any, prompt: Any, system_prompt: str | None) -> list[int]:
    """The tokens the policy continues: the row's messages and the generation prompt."""
    messages = prompt_messages(prompt, system_prompt)
    if tokenizer.chat_template:
        return list(
            tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        )
    text = "\n\n".join(str(message["content"]) for message in messages)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def sft_example(
    tokenizer: Any, row: dict[str, Any], system_prompt: str | None
) -> tuple[list[int], list[float]]:
    """Prompt and answer (ending with the end-of-turn token) as tokens, with the weight of
    each: 0 on the prompt, 1 on the answer."""
    prompt = prompt_ids(tokenizer, row["prompt"], system_prompt)
    answer = list(tokenizer(str(row["ground_truth"]), add_special_tokens=False)["input_ids"])
    answer.append(tokenizer.eos_token_id)
    return prompt + answer, [0.0] * len(prompt) + [1.0] * len(answer)


def batch_indices(size: int, per_step: int, step: int, seed: int) -> list[int]:
    """The dataset rows of ``step`` (1-based): the rows in a seeded order, a new order each
    epoch. A pure function of its arguments, so a resumed run takes the batches the
    interrupted one would have."""
    start = (step - 1) * per_step
    indices = []
    for position in range(start, start + per_step):
        epoch, offset = divmod(position, size)
        order = list(range(size))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        indices.append(order[offset])
    return indices
