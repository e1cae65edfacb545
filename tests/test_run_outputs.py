"""What a training run leaves, and the helpers that make and read it: ``merge_adapter`` (a LoRA
adapter merged into its base is a plain model that loads without peft, computes what base +
adapter compute, and keeps the tokenizer's chat template) and ``tensorboard_scalars``.

Needs torch, transformers, peft and tensorboard: runs in the TRL environment (the Makefile's
EXTRA_TESTS_trl).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from aworld_train.errors import TrainingError
from aworld_train.engine import merge_adapter
from aworld_train.testing.fixtures import (  # noqa: F401 (pytest fixtures)
    assert_loads_without_peft,
    tensorboard_scalars,
    tiny_model,
)

pytest.importorskip("peft")


@pytest.fixture(scope="module")
def adapter(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    """A rank-4 adapter on every linear layer of the tiny model, with B made non-zero (a fresh
    adapter adds nothing, and merging it would change nothing to see), saved with the
    tokenizer as a trainer saves one."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(tiny_model),
        LoraConfig(r=4, lora_alpha=8, target_modules="all-linear"),
    )
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "lora_B" in name:
                parameter.normal_(0, 0.5)
    folder = tmp_path_factory.mktemp("adapter")
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(folder)
    return folder


def logits(model: object, tiny_model: Path) -> object:  # noqa: F811
    import torch
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(tiny_model)("Repeat: 7", return_tensors="pt")
    with torch.no_grad():
        return model(**ids).logits  # type: ignore[operator]


def test_the_merged_model_computes_base_plus_adapter_and_loads_without_peft(
    tiny_model: Path,  # noqa: F811
    adapter: Path,
    tmp_path: Path,
) -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    target = tmp_path / "run" / "model"
    target.parent.mkdir()
    merge_adapter(str(tiny_model), adapter, target)

    assert not (tmp_path / "run" / "model.partial").exists()
    assert not (target / "adapter_config.json").exists()
    merged = logits(AutoModelForCausalLM.from_pretrained(target), tiny_model)
    with_adapter = logits(
        PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), adapter),
        tiny_model,
    )
    base = logits(AutoModelForCausalLM.from_pretrained(tiny_model), tiny_model)
    assert torch.allclose(merged, with_adapter, atol=1e-4)
    assert not torch.allclose(merged, base, atol=1e-2), "the adapter changed the model"
    assert (
        "chat_template" in (target / "tokenizer_config.json").read_text()
        or (target / "chat_template.jinja").is_file()
    )
    assert_loads_without_peft(target)


def test_merging_replaces_an_earlier_model(
    tiny_model: Path,  # noqa: F811
    adapter: Path,
    tmp_path: Path,
) -> None:
    target = tmp_path / "model"
    target.mkdir()
    (target / "stale.bin").write_text("from an earlier merge")
    merge_adapter(str(tiny_model), adapter, target)
    assert not (target / "stale.bin").exists() and (target / "config.json").is_file()


def test_a_folder_without_an_adapter_is_one_line(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    with pytest.raises(
        TrainingError,
        match=r"^no LoRA adapter to merge in .*: it has no "
        r"adapter_config\.json$",
    ):
        merge_adapter(str(tiny_model), tmp_path, tmp_path / "model")
    assert not (tmp_path / "model").exists()


def test_assert_loads_without_peft_refuses_an_unmerged_adapter(adapter: Path) -> None:
    with pytest.raises(AssertionError, match="LoRA adapter, not merged"):
        assert_loads_without_peft(adapter)


def test_tensorboard_scalars_reads_every_event_file(tmp_path: Path) -> None:
    from torch.utils.tensorboard import SummaryWriter

    for run, offset in (("first", 0), ("second", 10)):  # two writers, as after a resume
        writer = SummaryWriter(str(tmp_path / "tensorboard" / run))
        for step in (3, 1, 2):
            writer.add_scalar("train/reward", step / 4 + offset, step + offset)
        writer.add_scalar("train/loss", 0.5, offset)
        writer.close()
    scalars = tensorboard_scalars(tmp_path / "tensorboard")
    assert scalars == {
        "train/reward": [(1, 0.25), (2, 0.5), (3, 0.75), (11, 10.25), (12, 10.5), (13, 10.75)],
        "train/loss": [(0, 0.5), (10, 0.5)],
    }
    with pytest.raises(AssertionError, match="no TensorBoard event files"):
        tensorboard_scalars(tmp_path / "elsewhere")
