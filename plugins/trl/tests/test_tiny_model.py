"""The shared tiny model reloads with the Auto classes and round-trips text exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from aworld_train.engine.testing import build_tiny_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), extra_tokens=("<answer>", "</answer>"))


@pytest.mark.parametrize(
    "text",
    ["Repeat: 7", "  two  spaces\n\ttab", " leading space", "ünïcode 日本", "<answer>7</answer>"],
)
def test_text_round_trips(tiny: Path, text: str) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_extra_tokens_are_single_tokens(tiny: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("<answer>7</answer>")["input_ids"])
    assert tokens == ["<answer>", "7", "</answer>"]


def test_chat_template_and_special_tokens(tiny: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.pad_token_id != tokenizer.eos_token_id


def test_model_reloads_and_generates(tiny: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny)
    model = AutoModelForCausalLM.from_pretrained(tiny)
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.hidden_size == 64
    assert sum(p.numel() for p in model.parameters()) < 200_000
    inputs = tokenizer("Repeat: 7", return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    assert out.shape[1] <= inputs["input_ids"].shape[1] + 4


def test_same_seed_same_weights(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    first = load_file(build_tiny_model(tmp_path / "a", seed=3) / "model.safetensors")
    second = load_file(build_tiny_model(tmp_path / "b", seed=3) / "model.safetensors")
    other = load_file(build_tiny_model(tmp_path / "c", seed=4) / "model.safetensors")
    assert all((first[k] == second[k]).all() for k in first)
    assert any((first[k] != other[k]).any() for k in first)


def test_alphabet_limits_the_vocabulary(tmp_path: Path) -> None:
    import string

    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model(tmp_path, alphabet=string.printable))
    assert len(tokenizer) == len(set(string.printable)) + 3
    text = "Repeat: 7\n\t{x}"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text


def test_max_positions_is_the_models_declared_context(tmp_path: Path, tiny: Path) -> None:
    """Trainers read ``max_position_embeddings`` to decide what fits (TRL drops a tool result
    that would pass it), so a long-prompt example needs a model that declares more."""
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained(tiny).max_position_embeddings == 1024
    long = build_tiny_model(tmp_path / "long", max_positions=4096)
    assert AutoConfig.from_pretrained(long).max_position_embeddings == 4096
