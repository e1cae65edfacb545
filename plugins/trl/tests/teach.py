"""A tiny model taught one tool-calling exchange, so that its rollouts call the tool."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def teach_exchange(
    model: Path, prompt: list[dict[str, str]], functions: list[dict[str, Any]], call: dict[str, Any],
    result: str, answer: str, steps: int = 200,
) -> None:
    """Overfit the model in ``model`` on one exchange: after ``prompt`` it writes ``call`` (a
    tool call in its chat template's format), and after the tool's ``result`` it writes
    ``answer``. Only the model's own two turns are trained; the prompt and the tool's result are
    context, as in GRPO's loss."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)

    def render(messages: list[dict[str, Any]]) -> list[int]:
        text = tokenizer.apply_chat_template(messages, tools=functions,
                                             add_generation_prompt=True, tokenize=False)
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    prompt_ids = render(prompt)
    context_ids = render([*prompt, {"role": "assistant", "content": "", "tool_calls": [call]},
                          {"role": "tool", "name": call["function"]["name"], "content": result}])
    assert context_ids[: len(prompt_ids)] == prompt_ids
    answer_ids = tokenizer(answer + tokenizer.eos_token, add_special_tokens=False)["input_ids"]
    input_ids = context_ids + answer_ids
    call_end = input_ids.index(tokenizer.eos_token_id, len(prompt_ids)) + 1
    labels = [-100] * len(input_ids)
    labels[len(prompt_ids):call_end] = input_ids[len(prompt_ids):call_end]
    labels[len(context_ids):] = answer_ids

    torch.manual_seed(0)
    policy = AutoModelForCausalLM.from_pretrained(model)
    policy.train()
    optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
    batch = {"input_ids": torch.tensor([input_ids]), "labels": torch.tensor([labels])}
    for _ in range(steps):
        loss = policy(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
    assert loss.item() < 0.01, f"the model did not learn the exchange (loss {loss.item():.3f})"
    policy.save_pretrained(model)
