"""The agent runtime reads a model turn's tool calls as Qwen and Hermes chat templates write them."""

from __future__ import annotations

from aworld_train.runtime._trajectory import parse_tool_calls


def test_tool_calls_are_read_as_the_chat_template_writes_them() -> None:
    content, calls = parse_tool_calls(
        'Let me compute.\n<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
        '<tool_call>{"name": "multiply", "arguments": {"a": 3}}</tool_call><|im_end|>'
    )
    assert content == "Let me compute."
    assert calls == [
        {"name": "add", "arguments": {"a": 1, "b": 2}},
        {"name": "multiply", "arguments": {"a": 3}},
    ]
    _, calls = parse_tool_calls("<tool_call>{not json}</tool_call>")
    assert "not valid JSON" in calls[0]["error"]
    assert parse_tool_calls("<answer>3</answer>") == ("<answer>3</answer>", [])
