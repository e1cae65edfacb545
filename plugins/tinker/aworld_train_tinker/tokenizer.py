"""The tokenizer the prompts are rendered with must be the one the service trains with: the
engine renders and scores here, the service learns from the token ids."""

from __future__ import annotations

from pathlib import Path

from aworld_train.engine import ConfigError
from aworld_train.engine.runtime import load_tokenizer


def check_tokenizer(model: str | None, base_model: str, trust_remote_code: bool) -> None:
    """When the job's ``model`` folder and a different ``tinker.base_model`` folder are both
    here, their tokenizers must agree (vocabulary, end-of-turn token, chat template). A hub id
    is the service's to resolve: it is not downloaded to compare.

    :raises ConfigError: naming both and what differs.
    """
    if (
        model is None
        or model == base_model
        or not (Path(model).is_dir() and Path(base_model).is_dir())
    ):
        return
    local = load_tokenizer(model, trust_remote_code)
    served = load_tokenizer(base_model, trust_remote_code)
    differences = [
        name
        for name, here, there in (
            ("vocabulary", local.get_vocab(), served.get_vocab()),
            ("end-of-turn token", local.eos_token, served.eos_token),
            ("chat template", local.chat_template, served.chat_template),
        )
        if here != there
    ]
    if differences:
        raise ConfigError(
            f"model {model} and tinker.base_model {base_model} tokenize differently "
            f"({', '.join(differences)}): the prompts would reach the service as other tokens; "
            "point both at the same model"
        )
