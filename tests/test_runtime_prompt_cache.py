"""The agent runtime renders a prompt it has rendered before from its cache, to the same tokens."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_a_repeated_prompt_gives_the_tokens_the_template_renders(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from aworld_train.runtime._trajectory import ChatRenderer
    from aworld_train.testing import build_tiny_model
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path / "model", tools=True))
    renderer = ChatRenderer(tokenizer)
    schema = {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            },
        },
    }
    reordered = {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {
                "type": "object",
                "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}},
            },
        },
    }

    def rendered(messages: list[dict[str, str]], tools: list[dict] | None) -> list[int]:
        text = tokenizer.apply_chat_template(
            messages, tools=tools, tokenize=False, add_generation_prompt=True
        )
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    prompts = [
        ([{"role": "user", "content": "Repeat: 7"}], None),
        (
            [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Repeat: 7"}],
            None,
        ),
        ([{"role": "user", "content": "Repeat: 7"}], [schema]),
        ([{"role": "user", "content": "Repeat: 7"}], [reordered]),
    ]  # another key order
    for _ in range(2):
        for messages, tools in prompts:
            ids = renderer.prompt_ids(messages, tools)
            assert ids == rendered(messages, tools)
            ids.append(0)  # the caller's own list: the next episode's prompt is unchanged
    assert len({tuple(renderer.prompt_ids(m, t)) for m, t in prompts}) == 4
    # Content that is not plain JSON is rendered every time, not cached under another's key.
    assert renderer.prompt_ids(
        [{"role": "user", "content": "Repeat: 7", "extra": object()}], None
    ) == rendered([{"role": "user", "content": "Repeat: 7"}], None)
