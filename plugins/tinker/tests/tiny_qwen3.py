"""A tiny Qwen3 the test server serves: SkyRL tx's JAX backend loads Qwen3, Llama 3 and
DeepSeek V3 architectures, not the Qwen2 that ``build_tiny_model`` writes. The tokenizer is
``build_tiny_model``'s (saved by this venv's transformers, which the server loads too); only
the weights are replaced by a ``Qwen3ForCausalLM`` of the same vocabulary."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def build_tiny_qwen3(path: Path, hidden_size: int = 64, **tokenizer_args: Any) -> Path:
    """Write a tiny ``Qwen3ForCausalLM`` (2 layers, 4 heads, 2 KV heads, ``hidden_size`` wide)
    with ``build_tiny_model``'s tokenizer to ``path``.

    :param tokenizer_args: passed on to ``build_tiny_model`` (``alphabet``, ``tools``, ...).
    """
    import torch
    from aworld_train.engine.testing import build_tiny_model
    from transformers import AutoConfig, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    build_tiny_model(path, **tokenizer_args)
    qwen2 = AutoConfig.from_pretrained(path)
    for weights in path.glob("*.safetensors"):
        weights.unlink()
    config = Qwen3Config(
        vocab_size=qwen2.vocab_size,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=qwen2.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=qwen2.bos_token_id,
        eos_token_id=qwen2.eos_token_id,
        pad_token_id=qwen2.pad_token_id,
    )
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        bos_token_id=config.bos_token_id,
    )
    model.save_pretrained(path)
    return path


def repeat_digit_prepare() -> Any:
    """``examples/repeat_digit/prepare.py`` as a module: its model arguments and datasets."""
    import importlib.util

    example = Path(__file__).resolve().parents[3] / "examples" / "repeat_digit" / "prepare.py"
    spec = importlib.util.spec_from_file_location("repeat_digit_prepare", example)
    assert spec is not None and spec.loader is not None
    prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare)
    return prepare


def main() -> None:
    """``python plugins/tinker/tests/tiny_qwen3.py FOLDER``: the repeat-digit example's model
    (``prepare.py``'s arguments) as a Qwen3, which SkyRL tx serves."""
    import shutil
    import sys

    folder = Path(sys.argv[1])
    shutil.rmtree(folder, ignore_errors=True)
    print(f"model: {build_tiny_qwen3(folder, **repeat_digit_prepare().MODEL_ARGS)}")


if __name__ == "__main__":
    main()
