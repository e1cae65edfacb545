"""What a model folder holds, read as data: its JSON files (:class:`ModelFiles`), the names of
its weight files, and the few helpers every check of the folder shares."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from aworld_train.errors import ModelError
from aworld_train.job.files import parse_json_text, read_text

#: The JSON files of a model folder whose ``auto_map`` makes transformers import the folder's code.
REMOTE_CODE_FILES = (
    "config.json",
    "tokenizer_config.json",
    "processor_config.json",
    "preprocessor_config.json",
)


# The weights transformers' from_pretrained loads: a single file, or an index naming its shards.
WEIGHT_FILES = (
    "model.safetensors",
    "pytorch_model.bin",
    "tf_model.h5",
    "flax_model.msgpack",
    "model.ckpt.index",
)


WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")


FIX = "point `model` at a folder written by save_pretrained, or at a hub id 'organisation/name'"


RESAVE = "write the folder again with save_pretrained, or download it again"


# Tokens, ids or tensors named in one line; the rest are counted.
FIRST_FEW = 3


class ModelFiles:
    """The JSON files of a model folder, each read once, as data."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._read: dict[str, dict[str, Any] | None] = {}

    def config(self) -> dict[str, Any]:
        """``config.json``, which must be an object with a ``model_type``."""
        config = self.json("config.json")
        if config is None:
            raise ModelError(f"model folder {self.folder} has no config.json: {FIX}")
        if not isinstance(config.get("model_type"), str) or not config["model_type"]:
            raise ModelError(
                f"model {self.folder}: config.json has no model_type, so "
                f"transformers cannot tell which model it is: {RESAVE}"
            )
        return config

    def json(self, name: str) -> dict[str, Any] | None:
        """The JSON object in ``name``, or ``None`` when the folder has no such file.

        :raises ModelError: for a file that is not a JSON object.
        """
        if name not in self._read:
            self._read[name] = self._parse(name)
        return self._read[name]

    def _parse(self, name: str) -> dict[str, Any] | None:

        path = self.folder / name
        if not path.exists():
            return None
        try:
            data = parse_json_text(read_text(path, ModelError, "model file"), str(path), ModelError)
        except ModelError as exc:
            raise ModelError(f"model {self.folder}: {exc}; {RESAVE}") from None
        if not isinstance(data, dict):
            raise ModelError(
                f"model {self.folder}: {name} holds a JSON {type(data).__name__}, "
                f"not an object: {RESAVE}"
            )
        return data


def vocab_size_of(config: dict[str, Any]) -> tuple[int, str] | None:
    """The rows of the model's embeddings and the ``config.json`` key that gives them
    (``text_config.vocab_size`` for a multimodal model); ``None`` when it names none."""
    for section, prefix in ((config, ""), (config.get("text_config"), "text_config.")):
        value = section.get("vocab_size") if isinstance(section, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, prefix + "vocab_size"
    return None


def transformers_available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]
