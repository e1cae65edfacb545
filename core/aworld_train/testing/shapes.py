"""Model folders of real shapes and no weights, for the memory estimate's tests and benchmark.

:data:`QWEN25_CONFIGS` holds the public hyperparameters of Qwen2.5-0.5B, 1.5B and 7B (as their
``config.json`` on the Hugging Face hub states them); :func:`write_shaped_model` writes one as
``config.json`` beside the tiny model's tokenizer and a sparse ``model.safetensors`` (a real
header naming every tensor, its data a hole in the file that takes no disk), so the checks
accept the folder and the estimate builds the real architecture on the meta device. Nothing is
downloaded.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path
from typing import Any

_QWEN2_COMMON: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_act": "silu",
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151643,
    "initializer_range": 0.02,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "sliding_window": 32768,
    "use_cache": True,
    "use_sliding_window": False,
    "torch_dtype": "bfloat16",
}

#: name -> config.json of the Qwen2.5 base models (parameters: 494M, 1.54B, 7.62B).
QWEN25_CONFIGS: dict[str, dict[str, Any]] = {
    "qwen2.5-0.5b": {
        **_QWEN2_COMMON,
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "max_window_layers": 24,
        "tie_word_embeddings": True,
        "vocab_size": 151936,
    },
    "qwen2.5-1.5b": {
        **_QWEN2_COMMON,
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 28,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "max_window_layers": 28,
        "tie_word_embeddings": True,
        "vocab_size": 151936,
    },
    "qwen2.5-7b": {
        **_QWEN2_COMMON,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "max_window_layers": 28,
        "tie_word_embeddings": False,
        "vocab_size": 152064,
    },
}

# The tokenizer files copied from the tiny model (its ids all lie below every vocab_size here).
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def write_shaped_model(
    folder: str | Path, name: str, tokenizer_from: str | Path, **overrides: Any
) -> Path:
    """Write ``folder`` as a model folder of the shape ``name`` (a key of
    :data:`QWEN25_CONFIGS`): its ``config.json`` (with ``overrides``) and the tokenizer of
    ``tokenizer_from`` (the tiny model), no weights.

    :returns: the folder.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = {**QWEN25_CONFIGS[name], **overrides}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    for file in _TOKENIZER_FILES:
        source = Path(tokenizer_from) / file
        if source.is_file():
            shutil.copy(source, folder / file)
    _write_sparse_weights(folder)
    return folder


def _write_sparse_weights(folder: Path) -> None:
    """``model.safetensors`` with the header of every tensor the architecture holds (bf16,
    tied weights once) and no data written: the file is extended over a hole."""
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, parameter in model.named_parameters():  # tied parameters are listed once
        size = parameter.numel() * 2
        header[name] = {
            "dtype": "BF16",
            "shape": list(parameter.shape),
            "data_offsets": [offset, offset + size],
        }
        offset += size
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    with open(folder / "model.safetensors", "wb") as handle:
        handle.write(struct.pack("<Q", len(encoded)) + encoded)
        handle.truncate(8 + len(encoded) + offset)
