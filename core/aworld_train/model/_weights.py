"""The model's weights: the files transformers would load, complete (not Git LFS pointers, not
truncated, every shard an index names: :func:`check_weight_files`), and the tensors named in the
safetensors headers against the model ``config.json`` builds on torch's meta device
(:func:`check_weights`)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import struct
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from aworld_train.errors import ModelError
from aworld_train.model._files import (
    FIRST_FEW,
    REMOTE_CODE_FILES,
    RESAVE,
    WEIGHT_FILES,
    WEIGHT_INDEXES,
    ModelFiles,
    transformers_available,
)
from aworld_train.model._meta import meta_model


def check_weight_files(folder: Path, files: ModelFiles) -> None:
    """Weights transformers can load: a complete single file, or an index and all its shards.

    :raises ModelError: naming the missing, truncated or placeholder file.
    """
    for index_name in WEIGHT_INDEXES:
        index = files.json(index_name)
        if index is None:
            continue
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelError(f"model {folder}: {index_name} has no weight_map: {RESAVE}")
        shards = sorted({str(shard) for shard in weight_map.values()})
        missing = [shard for shard in shards if not (folder / shard).is_file()]
        if missing:
            raise ModelError(
                f"model {folder}: {index_name} names {len(shards)} weight files, "
                f"{len(missing)} missing ({', '.join(missing[:3])}"
                f"{', ...' if len(missing) > 3 else ''}): finish the download"
            )
        _check_files(folder, [folder / shard for shard in shards])
        return
    present = [folder / name for name in WEIGHT_FILES if (folder / name).is_file()]
    if not present:
        raise ModelError(
            f"model folder {folder} has no weights (model.safetensors, "
            f"pytorch_model.bin, or a *.index.json and its shards): {RESAVE}"
        )
    _check_files(folder, present)


def _check_files(folder: Path, paths: Iterable[Path]) -> None:
    for path in paths:
        problem = _weight_file_problem(path)
        if problem:
            raise ModelError(f"model {folder}: {path.name} {problem}")


def _weight_file_problem(path: Path) -> str | None:
    """What is wrong with a weight file, read from its first bytes and, for safetensors, its
    header (a JSON table of every tensor's byte range); ``None`` when nothing is."""
    size = path.stat().st_size
    with open(path, "rb") as handle:
        head = handle.read(8)
        if head.startswith(b"version "):  # "version https://git-lfs.github.com/spec/v1"
            return "is a Git LFS pointer, not the weights: run `git lfs pull` in the folder"
        if size == 0:
            return f"is empty: {RESAVE}"
        if path.suffix != ".safetensors":
            return None
        if len(head) < 8:
            return f"is truncated ({size} bytes): {RESAVE}"
        (header_size,) = struct.unpack("<Q", head)
        if header_size > size - 8:
            return f"is truncated or not a safetensors file: {RESAVE}"
        try:
            header = json.loads(handle.read(header_size))
            ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"]
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return f"has a damaged header: {RESAVE}"
    expected = 8 + header_size + max(ends, default=0)
    if size < expected:
        return f"is truncated ({size:,} of {expected:,} bytes): {RESAVE}"
    return None


def check_weights(folder: str | os.PathLike[str]) -> str:
    """Check that the tensors stored in the folder are the ones ``config.json`` describes,
    without reading a weight or running code from the folder.

    The names and shapes come from the safetensors headers (``model.safetensors``, else every
    shard ``model.safetensors.index.json`` names, as transformers picks them); the architecture
    is the model ``AutoModelForCausalLM`` builds from ``config.json`` on the meta device. A
    stored name is matched as transformers' loading matches it: its renamings and conversions
    for the model type (a tensor a conversion reshapes, such as experts fused into one, is
    matched by name only), then the base model's prefix added or taken away. A tied parameter
    (``lm_head.weight`` with ``tie_word_embeddings``) may be stored under either name; buffers
    may be absent, and the names the model class lists as ignorable on load are ignored.

    Not compared, with the reason returned: ``.bin`` weights (reading them means unpickling
    untrusted data), a folder with its own code (``auto_map``), quantized weights, and where
    torch or transformers are not installed or cannot build the model.

    :param folder: a model folder, as :func:`~aworld_train.model.preflight_model` returns it.
    :returns: what was compared, or why nothing was.
    :raises ModelError: one line naming the folder and the first few tensors of another shape,
        missing, or unexpected, each with its file and both shapes.
    """
    folder = Path(folder)
    files = ModelFiles(folder)
    config = files.config()
    if any((files.json(name) or {}).get("auto_map") for name in REMOTE_CODE_FILES):
        return "not compared: the model is built by code from its folder, not run in the checks"
    if config.get("quantization_config"):
        return "not compared: the weights are quantized (quantization_config in config.json)"
    stored = _stored_shapes(folder, files)
    if isinstance(stored, str):
        return stored
    if importlib.util.find_spec("torch") is None or not transformers_available():
        return "not compared: torch and transformers are not installed here"
    model = meta_model(str(folder), False)
    if isinstance(model, str):
        return f"not compared: {model}"
    mismatched, missing, unexpected = _compare_weights(model, stored)
    architecture = type(model).__name__
    if mismatched or missing or unexpected:
        found = [
            f"{len(items)} {what} ({'; '.join(items[:FIRST_FEW])}"
            f"{f'; {len(items) - FIRST_FEW} more' if len(items) > FIRST_FEW else ''})"
            for items, what in (
                (mismatched, "of another shape"),
                (missing, "missing"),
                (unexpected, "unexpected"),
            )
            if items
        ]
        raise ModelError(
            f"model {folder}: its weights do not match the {architecture} that "
            f"config.json describes: tensors {', '.join(found)}: fix config.json, "
            "or write the folder again with save_pretrained"
        )
    shards = {file for _, file in stored.values()}
    where = shards.pop() if len(shards) == 1 else f"{len(shards)} safetensors shards"
    return f"{len(stored)} tensors in {where} match the {architecture} of config.json"


def _stored_shapes(folder: Path, files: ModelFiles) -> dict[str, tuple[tuple[int, ...], str]] | str:
    """Each stored tensor's shape and file, from the safetensors headers transformers would
    load; or why they are not read."""
    single = folder / "model.safetensors"
    if single.is_file():
        paths = [single]
    elif (index := files.json("model.safetensors.index.json")) is not None:
        weight_map = index.get("weight_map") or {}
        paths = [folder / shard for shard in sorted({str(s) for s in weight_map.values()})]
    else:
        present = [name for name in (*WEIGHT_FILES, *WEIGHT_INDEXES) if (folder / name).is_file()]
        return (
            f"not compared: the weights are {', '.join(present) or 'not safetensors'}, whose "
            "tensors are not listed without unpickling them"
        )
    shapes: dict[str, tuple[tuple[int, ...], str]] = {}
    for path in paths:
        for name, shape in _header_shapes(path).items():
            shapes[name] = (shape, path.name)
    return shapes


def _header_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """The shape of every tensor in a safetensors file, read from its header alone."""
    try:
        with open(path, "rb") as handle:
            (header_size,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(header_size))
        return {
            name: tuple(int(size) for size in entry["shape"])
            for name, entry in header.items()
            if name != "__metadata__"
        }
    except (OSError, ValueError, TypeError, KeyError, AttributeError, struct.error):
        raise ModelError(
            f"model {path.parent}: {path.name} has a damaged header: {RESAVE}"
        ) from None


def _compare_weights(
    model: Any, stored: dict[str, tuple[tuple[int, ...], str]]
) -> tuple[list[str], list[str], list[str]]:
    """The stored tensors of another shape than the model's (with file and both shapes), the
    model's parameters nothing stored fills, and the stored tensors the model has no place
    for; see :func:`check_weights`."""
    parameters = model.state_dict(keep_vars=True)
    expected = {name: tuple(tensor.shape) for name, tensor in parameters.items()}
    rename = _stored_name_in_model(model, expected)
    found: set[str] = set()
    mismatched, unexpected = [], []
    for key, (shape, file) in stored.items():
        name, converted = rename(key)
        if name not in expected:
            unexpected.append(key)
            continue
        found.add(name)
        if not converted and shape != expected[name]:
            mismatched.append(
                f"{key} is {list(shape)} in {file}, {list(expected[name])} by config.json"
            )
    # A tied parameter is one tensor under several names, stored under one of them.
    names_of: dict[int, list[str]] = {}
    for name, tensor in parameters.items():
        names_of.setdefault(id(tensor), []).append(name)
    for names in names_of.values():
        if found.intersection(names):
            found.update(names)
    tied = getattr(model, "all_tied_weights_keys", None)
    if isinstance(tied, dict):
        found.update(target for target, source in tied.items() if source in found)
    buffers = {name for name, _ in model.named_buffers()}
    ignore_missing = _any_of(getattr(model, "_keys_to_ignore_on_load_missing", None))
    # Old checkpoints stored buffers that are not persistent any more (transformers' own list).
    ignore_unexpected = _any_of(
        [
            *(getattr(model, "_keys_to_ignore_on_load_unexpected", None) or ()),
            r"rotary_emb\.inv_freq",
            r"(^|\.)position_ids$",
        ]
    )
    missing = [
        name
        for name in expected
        if name not in found and name not in buffers and not ignore_missing(name)
    ]
    unexpected = [key for key in unexpected if not ignore_unexpected(key)]
    return mismatched, missing, unexpected


def _any_of(patterns: Iterable[str] | None) -> Callable[[str], bool]:
    """Whether a name matches one of a model class's regular expressions of names to ignore."""
    compiled = [re.compile(pattern) for pattern in patterns or ()]
    return lambda name: any(pattern.search(name) for pattern in compiled)


def _stored_name_in_model(
    model: Any, expected: dict[str, tuple[int, ...]]
) -> Callable[[str], tuple[str, bool]]:
    """How transformers' loading names a stored tensor in the model, and whether a conversion
    (which may reshape it) applies: the model type's renamings and conversions (transformers
    5), then the base model's prefix (``model.``) added or taken away."""
    prefix = getattr(model, "base_model_prefix", "") or ""

    def by_prefix(key: str) -> str:
        if key in expected or not prefix:
            return key
        if key.startswith(f"{prefix}.") and key[len(prefix) + 1 :] in expected:
            return key[len(prefix) + 1 :]
        return f"{prefix}.{key}" if f"{prefix}.{key}" in expected else key

    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import (
            WeightConverter,
            WeightRenaming,
            rename_source_key,
        )

        transforms = get_model_conversion_mapping(model)
    except Exception:  # noqa: BLE001 (a transformers without them: the prefix alone)
        return lambda key: (by_prefix(key), False)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]

    def rename(key: str) -> tuple[str, bool]:
        try:
            name, pattern = rename_source_key(key, renamings, converters, prefix, expected)
        except TypeError:  # another transformers' signature: the prefix alone
            return by_prefix(key), False
        if name not in expected and key in expected:  # as the loader: kept, not renamed
            return key, False
        return name, pattern is not None

    return rename
