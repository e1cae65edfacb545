"""The model's tokenizer: loaded once per process and flag (:func:`load_tokenizer`), and checked
against the model's embeddings: an eos token, and every token id, like the special-token ids of
``config.json``, a row of the embeddings."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from aworld_train.errors import ModelError
from aworld_train.model._files import FIRST_FEW, ModelFiles, first_line


def load_tokenizer(folder: str | os.PathLike[str], trust_remote_code: bool = False) -> Any:
    """The tokenizer of a local model folder, loaded once per process and flag (no hub
    contacted): the checks and an engine's own loading share it.

    The object is shared by every caller: copy it before changing it.

    :param folder: a model folder, as :func:`~aworld_train.model.preflight_model` returns it.
    :param trust_remote_code: passed to transformers; true only when the job sets it.
    """
    return _cached_tokenizer(str(Path(folder).resolve()), bool(trust_remote_code))


def checked_tokenizer(folder: Path, trust_remote_code: bool) -> Any:
    """:func:`load_tokenizer`, with a failure as one line naming the folder."""
    try:
        return load_tokenizer(folder, trust_remote_code)
    except Exception as exc:  # transformers and tokenizers raise many kinds
        raise ModelError(
            f"model {folder}: its tokenizer does not load offline: {first_line(exc)}"
        ) from None


@functools.lru_cache(maxsize=8)
def _cached_tokenizer(folder: str, trust_remote_code: bool) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        folder, trust_remote_code=trust_remote_code, local_files_only=True
    )


# The special-token ids config.json and generation_config.json may name, each an int or a list.
_SPECIAL_ID_KEYS = ("pad_token_id", "eos_token_id", "bos_token_id", "decoder_start_token_id")


def check_config_ids(folder: Path, files: ModelFiles, vocab_size: tuple[int, str]) -> None:
    """Each special-token id ``config.json`` and ``generation_config.json`` give is a row of
    the embeddings (below ``vocab_size``): a ``pad_token_id`` past them fails the model's build
    (``Padding_idx must be within num_embeddings``). Read as data, before the tokenizer, whose
    loading would warn about them first.

    :raises ModelError: naming the folder, the ids and the ``vocab_size`` key.
    """
    rows, key = vocab_size
    beyond = _config_ids_beyond(files, rows)
    if beyond:
        needed = max(i for _, ids in beyond for i in ids) + 1
        shown = ", ".join(
            f"{name} {ids[0] if len(ids) == 1 else ids}" for name, ids in beyond[:FIRST_FEW]
        )
        shown += f" and {len(beyond) - FIRST_FEW} more" if len(beyond) > FIRST_FEW else ""
        raise ModelError(
            f"model {folder}: config.json {key} {rows} leaves no row in the "
            f"embeddings for {shown}: set {key} to the embeddings' rows (at least "
            f"{needed}), or resize them (model.resize_token_embeddings(len("
            "tokenizer))) and save the model again"
        )


def check_tokenizer_fits(folder: Path, tokenizer: Any, vocab_size: tuple[int, str] | None) -> None:
    """The tokens the engines need, each a row of the model's embeddings.

    An eos token: generation stops at it, SFT ends every completion with it, and the engines
    pad with it when the tokenizer has no pad token (with neither, TRL fails deep in training,
    ``full(): argument 'fill_value' must be Number, not NoneType``). Every token id below
    ``vocab_size``: the embeddings have one row per id, and a token past them fails the first
    batch that holds it.

    :param vocab_size: the embeddings' rows and the ``config.json`` key giving them; ``None``
        when it gives none.
    :raises ModelError: naming the folder, the missing token, or the first few ids past
        ``vocab_size`` and its key.
    """
    if getattr(tokenizer, "eos_token_id", None) is None:
        pad = " (nor a pad token)" if getattr(tokenizer, "pad_token_id", None) is None else ""
        raise ModelError(
            f"model {folder}: its tokenizer has no eos token{pad}, which the engines "
            "stop generation at, end SFT completions with and pad with when there is "
            f"no pad token: set eos_token in {folder / 'tokenizer_config.json'} to "
            "the token that ends the model's turn"
        )
    if vocab_size is None:
        return
    size, key = vocab_size
    rows = max(len(tokenizer), _largest_id(tokenizer) + 1)
    beyond = _tokens_beyond(tokenizer, size)
    if beyond:
        shown = ", ".join(beyond[:FIRST_FEW]) + (", ..." if len(beyond) > FIRST_FEW else "")
        raise ModelError(
            f"model {folder}: config.json {key} {size} is smaller than its "
            f"tokenizer ({rows} token ids): these have no row in the embeddings: "
            f"{shown}: set {key} to the embeddings' rows, at least {rows}, or resize "
            "them (model.resize_token_embeddings(len(tokenizer))) and save the "
            "model again"
        )


def _largest_id(tokenizer: Any) -> int:
    """The tokenizer's largest token id: its added tokens may come after a gap."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return max([len(tokenizer) - 1, *(int(index) for index in added)])


def _tokens_beyond(tokenizer: Any, vocab_size: int) -> list[str]:
    """The tokenizer's ids from ``vocab_size`` on, described: its added tokens by name (the
    special tokens are usually the last ids), the rest of its vocabulary as a range."""
    added = {
        int(index): str(token)
        for index, token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items()
    }
    named = [f"{token} {index}" for index, token in sorted(added.items()) if index >= vocab_size]
    plain = [index for index in range(vocab_size, len(tokenizer)) if index not in added]
    if plain:
        span = f"{plain[0]}" if len(plain) == 1 else f"{plain[0]}-{plain[-1]}"
        named.insert(0, f"{len(plain)} vocabulary id{'s' if len(plain) > 1 else ''} {span}")
    return named


def _config_ids_beyond(files: ModelFiles, vocab_size: int) -> list[tuple[str, list[int]]]:
    """The special-token ids ``config.json`` (and its ``text_config``) and
    ``generation_config.json`` give from ``vocab_size`` on, each under its file and key."""
    config = files.config()
    places = [
        ("config.json ", config),
        ("config.json text_config.", config.get("text_config")),
        ("generation_config.json ", files.json("generation_config.json")),
    ]
    beyond = []
    for place, section in places:
        if not isinstance(section, dict):
            continue
        for key in _SPECIAL_ID_KEYS:
            value = section.get(key)
            ids = [
                i
                for i in (value if isinstance(value, list) else [value])
                if isinstance(i, int) and not isinstance(i, bool)
            ]
            if any(i >= vocab_size for i in ids):
                beyond.append((f"{place}{key}", ids))
    return beyond
