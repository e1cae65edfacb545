"""Build what the calculator example needs offline: a tiny model whose chat template renders tools,
and (when missing) the multiplication datasets.

Run from the repository root: ``python examples/calculator_agent/prepare.py``. It writes
``examples/calculator_agent/build/model`` and leaves existing files alone. The tiny model is
random: it lets ``aworld-train check`` and smoke runs work without a model hub, not learn the task.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE / "build" / "model"

QUESTION = "What is {a} * {b}?"

# ChatML with tools, the layout Qwen models use: the tool schemas go into the system message,
# the model calls a tool as <tool_call>{"name": ..., "arguments": {...}}</tool_call>, and a tool's
# result comes back in a user turn inside <tool_response>.
CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions. Their signatures:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nCall one as <tool_call>{\"name\": <name>, \"arguments\": <object>}"
    "</tool_call>.<|im_end|>\\n' }}"
    "{%- elif messages[0].role == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' %}"
    "{%- elif message.role == 'tool' %}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') }}"
    "{%- for call in message.tool_calls or [] %}"
    "{%- set function = call.function if call.function is defined else call %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + function.name + '\", \"arguments\": ' }}"
    "{{- (function.arguments if function.arguments is string else function.arguments | tojson) }}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def write_dataset(path: Path, rows: int, seed: int) -> None:
    """Products of a 3- or 4-digit and a 3-digit number: too long to guess, exact with the tool."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for _ in range(rows):
            a, b = rng.randrange(100, 10000), rng.randrange(100, 1000)
            row = {"prompt": QUESTION.format(a=a, b=b), "ground_truth": str(a * b),
                   "data_source": "calculator"}
            handle.write(json.dumps(row) + "\n")


def main() -> None:
    from aworld_train.testing import build_tiny_model
    from transformers import AutoTokenizer

    if not (MODEL / "config.json").is_file():
        # 4096 positions: its byte-level tokens make a prompt with the three tools' schemas
        # ~1200 tokens, and an episode adds turns and tool results to it.
        build_tiny_model(MODEL, extra_tokens=("<tool_call>", "</tool_call>", "<answer>", "</answer>"),
                         max_positions=4096)
        tokenizer = AutoTokenizer.from_pretrained(MODEL)
        tokenizer.chat_template = CHAT_TEMPLATE
        tokenizer.save_pretrained(MODEL)
    for name, rows, seed in (("train", 256, 0), ("test", 32, 1)):
        path = HERE / "data" / f"{name}.jsonl"
        if not path.is_file():
            write_dataset(path, rows, seed)
    print(f"model: {MODEL}\ndata: {HERE / 'data'}")


if __name__ == "__main__":
    main()
