"""A tiny offline causal language model that tests, benchmarks and demos build in seconds.

No model hub is needed: the tokenizer is a byte-level BPE without merges (one token per byte,
so any text round-trips exactly and a random model learns character-level tasks quickly), with
ChatML special tokens and chat template; the model is a randomly initialised
``Qwen2ForCausalLM``. Both are saved with ``save_pretrained`` and load back with
``AutoTokenizer`` / ``AutoModelForCausalLM`` in every engine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD = "<|endoftext|>"

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

# ChatML with tools, the layout Qwen models use: the tool schemas go into the system message,
# the model calls a tool as <tool_call>{"name": ..., "arguments": {...}}</tool_call>, and a tool's
# result comes back in a user turn inside <tool_response>.
TOOL_CHAT_TEMPLATE = (
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions. Their signatures:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    '{{- \'\\n</tools>\\n\\nCall one as <tool_call>{"name": <name>, "arguments": <object>}'
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
    '{{- \'\\n<tool_call>\\n{"name": "\' + function.name + \'", "arguments": \' }}'
    "{{- (function.arguments if function.arguments is string else function.arguments | tojson) }}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
TOOL_TOKENS = ("<tool_call>", "</tool_call>")


def build_tiny_model(
    path: str | Path,
    *,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    extra_tokens: Sequence[str] = (),
    alphabet: str | None = None,
    max_positions: int = 1024,
    seed: int = 0,
    tools: bool = False,
) -> Path:
    """Build a tiny tokenizer and ``Qwen2ForCausalLM`` and save both to ``path``.

    :param path: the folder to write (created if needed).
    :param hidden_size: the model width; 64 gives ~100k parameters, 128 learns faster.
    :param num_layers: the number of decoder layers.
    :param num_heads: the number of attention heads (``hidden_size`` must divide by it).
    :param extra_tokens: strings added to the vocabulary as single plain tokens, such as
        ``"<answer>"`` and ``"</answer>"``.
    :param alphabet: the only characters the vocabulary holds (their UTF-8 bytes), such as
        ``string.printable``; ``None`` holds all 256 bytes. A smaller vocabulary makes a random
        model hit the right character more often, so it learns faster, but drops other text.
    :param max_positions: the longest sequence, prompt and completion together, the model takes
        (``max_position_embeddings``).
    :param seed: the seed of the random weights; the same arguments give the same model.
    :param tools: a chat template that renders tool schemas, tool calls and tool results as
        Qwen models do (:data:`TOOL_CHAT_TEMPLATE`), with ``<tool_call>`` tags as tokens of
        their own: a model an agent with tools can be checked and trained with. Its prompts
        hold the tools' schemas, so give it room (``max_positions=4096``).
    :returns: the folder, as a :class:`~pathlib.Path`.
    """
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size {hidden_size} is not divisible by num_heads {num_heads}")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = _tiny_tokenizer(extra_tokens, alphabet, tools)
    model = _tiny_qwen2(
        tokenizer,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_heads=num_heads,
        max_positions=max_positions,
        seed=seed,
    )
    with _no_progress_bar():
        model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _tiny_tokenizer(extra_tokens: Sequence[str], alphabet: str | None, tools: bool) -> Any:
    """A byte-level tokenizer with no merges: one token per byte of ``alphabet`` (all 256
    without one), the chat's special tokens and ``extra_tokens`` (the tool tags first with
    ``tools``), and the chat template."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if alphabet is None:
        symbols = set(pre_tokenizers.ByteLevel.alphabet())
    else:
        # ByteLevel shows each byte as one printable character (a space as "Ġ").
        mapped = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        symbols = {char for text, _ in mapped.pre_tokenize_str(alphabet) for char in text}
    vocab = {symbol: index for index, symbol in enumerate(sorted(symbols))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = byte_level
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True) for t in (PAD, IM_START, IM_END)])
    if tools:
        extra_tokens = (*TOOL_TOKENS, *(t for t in extra_tokens if t not in TOOL_TOKENS))
    if extra_tokens:
        backend.add_tokens([AddedToken(t, special=False, normalized=False) for t in extra_tokens])
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        eos_token=IM_END,
        pad_token=PAD,
        chat_template=TOOL_CHAT_TEMPLATE if tools else CHAT_TEMPLATE,
        padding_side="left",
        clean_up_tokenization_spaces=False,
    )


def _tiny_qwen2(
    tokenizer: Any,
    *,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    max_positions: int,
    seed: int,
) -> Any:
    """A ``Qwen2ForCausalLM`` with random weights (seeded) for ``tokenizer``'s vocabulary,
    its end of turn as the end of text."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    eos_id = tokenizer.convert_tokens_to_ids(IM_END)
    pad_id = tokenizer.convert_tokens_to_ids(PAD)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=eos_id, pad_token_id=pad_id, bos_token_id=eos_id
    )
    return model


@contextlib.contextmanager
def _no_progress_bar() -> Iterator[None]:
    """transformers' progress bars off for the block: a one-shard model of a few kB would
    otherwise draw one ("Writing model shards") under the command's one line of output."""
    from transformers.utils import logging as transformers_logging

    enabled = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            transformers_logging.enable_progress_bar()


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m aworld_train.testing.tiny_model FOLDER``: build a tiny model to try a job
    with, where no model hub is at hand (random weights: it trains, it does not know anything)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m aworld_train.testing.tiny_model", description=main.__doc__
    )
    parser.add_argument("folder", help="where to write the model (created if needed)")
    parser.add_argument(
        "--hidden-size",
        type=int,
        default=128,
        help="the model width (128: heads 32 wide, as vLLM's CPU attention needs)",
    )
    parser.add_argument(
        "--tools", action="store_true", help="a chat template that renders tools (4,096 positions)"
    )
    arguments = parser.parse_args(argv)
    folder = build_tiny_model(
        arguments.folder,
        hidden_size=arguments.hidden_size,
        tools=arguments.tools,
        max_positions=4096 if arguments.tools else 1024,
    )
    print(f"model: {folder}")


if __name__ == "__main__":
    main()
