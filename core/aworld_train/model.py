"""The policy model, checked before any engine loads it.

:func:`preflight_model` tells a local model folder from a hub id and checks the folder the way a
reviewer would, without running anything from it: ``config.json`` and the other JSON files are
parsed as data, weights are found by name and their headers read, and a folder whose
``auto_map`` names its own Python code is refused unless the job sets ``trust_remote_code``.
Only then is the tokenizer loaded, when ``transformers`` is installed, and checked against the
model (an eos token, every id a row of the embeddings). A hub id is returned as given: nothing
here contacts a hub.

:func:`check_weights` compares the tensors named in the safetensors headers with the model
``config.json`` builds on torch's meta device: a folder whose weights and config disagree is
refused before an engine loads it.

:func:`check_lengths` renders the longest prompts of each dataset as training renders them and
compares them, with the completion budget, to the model's positions.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import os
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aworld_train.errors import ModelError

if TYPE_CHECKING:
    import datasets
    import numpy as np

# A hub repository id as huggingface_hub accepts one: an optional namespace and a name, each of
# word characters, '-' and '.' (a trailing '.git', '--' and '..' are refused below).
_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")

#: The JSON files of a model folder whose ``auto_map`` makes transformers import the folder's code.
REMOTE_CODE_FILES = ("config.json", "tokenizer_config.json", "processor_config.json",
                     "preprocessor_config.json")

# The weights transformers' from_pretrained loads: a single file, or an index naming its shards.
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "tf_model.h5", "flax_model.msgpack",
                 "model.ckpt.index")
_WEIGHT_INDEXES = ("model.safetensors.index.json", "pytorch_model.bin.index.json")

# Where config.json gives the longest sequence, by model family; multimodal models nest it.
_POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length",
                  "max_sequence_length", "n_ctx")

# A folder close to a missing one by this much is taken for a typo of it, not for a hub id.
_TYPO_CUTOFF = 0.8

_FIX = "point `model` at a folder written by save_pretrained, or at a hub id 'organisation/name'"
_RESAVE = "write the folder again with save_pretrained, or download it again"


def preflight_model(model: str | os.PathLike[str] | None, base_dir: Path | None = None,
                    trust_remote_code: bool = False) -> str | None:
    """Check the model before any engine loads it, without running code from its folder.

    A local folder (absolute, or relative to ``base_dir``, then to the current directory) must
    hold a ``config.json`` object with a ``model_type``, weights transformers can load (complete
    safetensors files, not Git LFS pointers; every shard an index names), no ``auto_map`` unless
    ``trust_remote_code``, and a tokenizer that loads offline when ``transformers`` is installed,
    has an eos token, and whose token ids, like the special-token ids of ``config.json``, are
    rows of the embeddings (below ``vocab_size``).
    A relative path that is not there and looks like a path (``./x``, ``a/b/c``, a first folder
    that exists, or a close typo of a folder there) is reported with a did-you-mean instead of
    being sent to a hub; anything else of the form ``organisation/name`` is a hub id.

    :param model: the config's or the agent's ``model``; ``None`` (or ``""``) when neither
        names one.
    :param base_dir: the job file's folder, which relative folders are looked up in first.
    :param trust_remote_code: the job's ``trust_remote_code``: allow a folder's own code, and
        pass the flag to the tokenizer.
    :returns: ``None`` for ``None``, the folder as an absolute path, or the hub id as given.
    :raises ModelError: one line naming the folder (or the path as written) and the fix.
    """
    if model is None or model == "":
        return None
    if not isinstance(model, (str, os.PathLike)):
        raise ModelError(f"model must be a local folder or a hub id 'organisation/name', not "
                         f"{type(model).__name__} {model!r}")
    given = os.fspath(model)
    folder = _local_folder(given, base_dir)
    if folder is None:
        return given
    files = _ModelFiles(folder)
    config = files.config()
    remote_code = _check_remote_code(folder, files, trust_remote_code)
    _check_weights(folder, files)
    _check_tokenizer_files(folder)
    vocab_size = _vocab_size(config)
    if vocab_size is not None:
        _check_config_ids(folder, files, vocab_size)
    if _transformers_available():
        if not remote_code:
            _check_model_type(folder, config)
        _check_tokenizer_fits(folder, _checked_tokenizer(folder, trust_remote_code), vocab_size)
    return str(folder)


def load_tokenizer(folder: str | os.PathLike[str], trust_remote_code: bool = False) -> Any:
    """The tokenizer of a local model folder, loaded once per process and flag (no hub
    contacted): the checks and an engine's own loading share it.

    The object is shared by every caller: copy it before changing it.

    :param folder: a model folder, as :func:`preflight_model` returns it.
    :param trust_remote_code: passed to transformers; true only when the job sets it.
    """
    return _cached_tokenizer(str(Path(folder).resolve()), bool(trust_remote_code))


def _checked_tokenizer(folder: Path, trust_remote_code: bool) -> Any:
    """:func:`load_tokenizer`, with a failure as one line naming the folder."""
    try:
        return load_tokenizer(folder, trust_remote_code)
    except Exception as exc:  # transformers and tokenizers raise many kinds
        raise ModelError(f"model {folder}: its tokenizer does not load offline: "
                         f"{_first_line(exc)}") from None


@functools.lru_cache(maxsize=8)
def _cached_tokenizer(folder: str, trust_remote_code: bool) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder, trust_remote_code=trust_remote_code,
                                         local_files_only=True)


def check_lengths(
    model: str,
    datasets: dict[str, datasets.Dataset | None],
    system_prompt: str | None,
    tool_schemas: list[dict[str, Any]],
    max_completion_length: int | None,
    max_turns: int = 1,
    trust_remote_code: bool = False,
) -> None:
    """Check that every prompt, rendered as training renders it, fits the model with its
    completion.

    A prompt is rendered as the engines render it: the system prompt prepended as a system
    message (unless the row starts with its own), ``tools=tool_schemas`` given to the chat
    template, and the generation prompt added; a tokenizer without a chat template gets the
    plain text (``system_prompt``, a blank line, the prompt). Its tokens plus
    ``max_completion_length`` must fit the model's positions (``max_position_embeddings``, or
    ``n_positions``, ``max_seq_len``... in ``config.json``).

    Room for tool results: ``max_completion_length`` is the budget of the whole completion, so
    with tools it counts every turn, every tool call and every tool result with its chat-template
    framing together, as TRL and VeRL bound an episode (TRL drops a tool result that would pass
    either the budget or the positions). A prompt that fits with the whole budget therefore never
    loses a tool result to the positions; ``max_turns`` only shares the budget out.

    Finding the long prompts cheaply, a batch of rows at a time: every row gets an upper bound
    of its tokens without rendering it, the template's framing (measured once: system prompt,
    tool schemas, the markup of each message) plus the UTF-8 bytes of its text, read from the
    Arrow column, since a byte-level BPE tokenizer never makes more tokens than bytes. Rows whose
    bound fits are done. The rest get a tighter bound, their text tokenized in one batch without
    the template; only rows still in doubt are rendered, longest bound first, and the first that
    does not fit is reported. On data well within the model's positions nothing is tokenized.

    :param model: the model as :func:`preflight_model` returned it; a hub id is not checked.
    :param datasets: each dataset by the role messages name it by (``train_dataset``); a
        ``None`` dataset is skipped.
    :param tool_schemas: the agent's OpenAI-style tool schemas (empty without tools).
    :param max_completion_length: the completion budget in tokens; ``None`` checks the prompt
        alone (the engine's default is not known here).
    :param max_turns: the agent's most model turns, named in the message when there are tools.
    :param trust_remote_code: passed to the tokenizer.
    :raises ModelError: naming the dataset and row, the lengths and the config key; or the
        budget alone when it leaves no room for a prompt.
    """
    folder = Path(model)
    if not folder.is_dir() or not _transformers_available():
        return
    found = max_positions(folder)
    if found is None:
        return
    positions, key = found
    budget = max_completion_length or 0
    where = f"{key} in {folder / 'config.json'}"
    if budget >= positions:
        raise ModelError(f"max_completion_length {budget} leaves no room for a prompt within the "
                         f"model's {positions} positions ({where}): lower max_completion_length")
    renderer = _Renderer(_checked_tokenizer(folder, trust_remote_code), system_prompt,
                         tool_schemas, str(folder))
    for role, dataset in datasets.items():
        if dataset is None or "prompt" not in dataset.column_names or not len(dataset):
            continue
        too_long = _first_too_long(dataset, renderer, positions - budget, role)
        if too_long is None:
            continue
        row, tokens = too_long
        if budget:
            shared = " for every turn and tool result" if tool_schemas and max_turns > 1 else ""
            total = f"; with max_completion_length {budget}{shared} that is {tokens + budget}"
            fix = "shorten the prompt or max_completion_length"
        else:
            total, fix = "", "shorten the prompt"
        raise ModelError(f"{role} row {row}: the prompt ({renderer.describe()}) is {tokens} tokens"
                         f"{total}, past the model's {positions} positions ({where}): {fix}")


def max_positions(folder: Path) -> tuple[int, str] | None:
    """The longest sequence the model in ``folder`` takes, and the ``config.json`` key that
    says so (``text_config.max_position_embeddings`` for a multimodal model); ``None`` when
    the config names none."""
    config = _ModelFiles(folder).config()
    for section, prefix in ((config, ""), (config.get("text_config"), "text_config.")):
        if not isinstance(section, dict):
            continue
        for key in _POSITION_KEYS:
            value = section.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, prefix + key
    return None


# --- where the model is ----------------------------------------------------------------------


def _local_folder(model: str, base_dir: Path | None) -> Path | None:
    """The model's folder, absolute; ``None`` for a hub id.

    :raises ModelError: for a path that is not a folder, or one that looks local but is not
        there (with a did-you-mean), or a name that is neither.
    """
    path = Path(model).expanduser()
    roots = _roots(base_dir)
    candidates = [path] if path.is_absolute() else [root / path for root in roots]
    try:
        for candidate in candidates:
            if candidate.is_dir():
                return candidate.resolve()
            if candidate.exists():
                raise ModelError(f"model {model} is a file ({candidate}), not a model folder: "
                                 f"{_FIX}")
        local = path.is_absolute() or _looks_local(model, roots)
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise ModelError(f"model {model!r} cannot be looked up as a folder: "
                         f"{exc.strerror or exc}") from None
    if not local and _is_hub_id(model):
        return None
    if not local:
        raise ModelError(f"model {model!r} is neither a local folder nor a hub id "
                         f"'organisation/name': {_FIX}")
    places = " or ".join(str(root) for root in roots)
    where = "" if path.is_absolute() else f" in {places}"
    suggestion = _suggest(path, roots)
    if suggestion:
        hint = " (a hub id is written 'organisation/name')" if "/" not in model else ""
        raise ModelError(f"model folder {model} not found{where} (did you mean {suggestion}?)"
                         f"{hint}")
    raise ModelError(f"model folder {model} not found{where}: {_FIX}")


def _roots(base_dir: Path | None) -> list[Path]:
    """The folders a relative model path is looked up in: the job's, then the current one."""
    roots = [Path(base_dir).resolve()] if base_dir is not None else []
    cwd = Path.cwd().resolve()
    return roots if cwd in roots else [*roots, cwd]


def _looks_local(model: str, roots: list[Path]) -> bool:
    """Whether a name that is not there was meant as a local folder rather than a hub id."""
    if model.startswith(("./", "../", "~", ".\\", "..\\")) or model in (".", "..") or "\\" in model:
        return True
    if model.count("/") > 1 or any((root / model.split("/")[0]).is_dir() for root in roots):
        return True
    # A typo: each part close to a folder there (an organisation named like a local folder
    # alone does not make a hub id local).
    return _suggest(Path(model), roots, _TYPO_CUTOFF) is not None


def _is_hub_id(model: str) -> bool:
    return bool(_HUB_ID.match(model)) and "--" not in model and ".." not in model \
        and not model.endswith(".git")


def _suggest(path: Path, roots: list[Path], cutoff: float = 0.6) -> str | None:
    """The existing folder ``path`` most likely meant, written as ``path`` is (relative or
    absolute), each missing part replaced by the closest folder there (by ``difflib``'s ratio,
    at least ``cutoff``); ``None`` if a part has none close enough."""
    starts = [Path(path.anchor)] if path.is_absolute() else roots
    parts = path.parts[1:] if path.is_absolute() else [p for p in path.parts if p != "."]
    for start in starts:
        current, fixed = start, []
        for part in parts:
            if part == ".." or (current / part).is_dir():
                current, name = current / part, part
            else:
                close = difflib.get_close_matches(part, _subfolders(current), n=1, cutoff=cutoff)
                if not close:
                    break
                current, name = current / close[0], close[0]
            fixed.append(name)
        else:
            if fixed:
                return str(Path(path.anchor, *fixed)) if path.is_absolute() else "/".join(fixed)
    return None


def _subfolders(folder: Path) -> list[str]:
    try:
        with os.scandir(folder) as entries:
            return [entry.name for entry in entries if entry.is_dir()]
    except OSError:
        return []


# --- what the folder holds -------------------------------------------------------------------


class _ModelFiles:
    """The JSON files of a model folder, each read once, as data."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._read: dict[str, dict[str, Any] | None] = {}

    def config(self) -> dict[str, Any]:
        """``config.json``, which must be an object with a ``model_type``."""
        config = self.json("config.json")
        if config is None:
            raise ModelError(f"model folder {self.folder} has no config.json: {_FIX}")
        if not isinstance(config.get("model_type"), str) or not config["model_type"]:
            raise ModelError(f"model {self.folder}: config.json has no model_type, so "
                             f"transformers cannot tell which model it is: {_RESAVE}")
        return config

    def json(self, name: str) -> dict[str, Any] | None:
        """The JSON object in ``name``, or ``None`` when the folder has no such file.

        :raises ModelError: for a file that is not a JSON object.
        """
        if name not in self._read:
            self._read[name] = self._parse(name)
        return self._read[name]

    def _parse(self, name: str) -> dict[str, Any] | None:
        from aworld_train.files import parse_json_text, read_text

        path = self.folder / name
        if not path.exists():
            return None
        try:
            data = parse_json_text(read_text(path, ModelError, "model file"), str(path), ModelError)
        except ModelError as exc:
            raise ModelError(f"model {self.folder}: {exc}; {_RESAVE}") from None
        if not isinstance(data, dict):
            raise ModelError(f"model {self.folder}: {name} holds a JSON {type(data).__name__}, "
                             f"not an object: {_RESAVE}")
        return data


def _check_weights(folder: Path, files: _ModelFiles) -> None:
    """Weights transformers can load: a complete single file, or an index and all its shards.

    :raises ModelError: naming the missing, truncated or placeholder file.
    """
    for index_name in _WEIGHT_INDEXES:
        index = files.json(index_name)
        if index is None:
            continue
        weight_map = index.get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelError(f"model {folder}: {index_name} has no weight_map: {_RESAVE}")
        shards = sorted({str(shard) for shard in weight_map.values()})
        missing = [shard for shard in shards if not (folder / shard).is_file()]
        if missing:
            raise ModelError(f"model {folder}: {index_name} names {len(shards)} weight files, "
                             f"{len(missing)} missing ({', '.join(missing[:3])}"
                             f"{', ...' if len(missing) > 3 else ''}): finish the download")
        _check_weight_files(folder, [folder / shard for shard in shards])
        return
    present = [folder / name for name in _WEIGHT_FILES if (folder / name).is_file()]
    if not present:
        raise ModelError(f"model folder {folder} has no weights (model.safetensors, "
                         f"pytorch_model.bin, or a *.index.json and its shards): {_RESAVE}")
    _check_weight_files(folder, present)


# What tokenizer.save_pretrained writes, for the tokenizer kinds transformers loads.
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "vocab.txt",
                    "tokenizer.model", "spiece.model")


def _check_tokenizer_files(folder: Path) -> None:
    """A tokenizer saved in the folder: without one, transformers 5 builds an empty tokenizer
    from ``model_type`` and loads it without a word, and training then fails or learns nothing.

    :raises ModelError: naming the folder and the files looked for.
    """
    if not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        raise ModelError(f"model folder {folder} has no tokenizer ({', '.join(_TOKENIZER_FILES)}): "
                         "save it there with tokenizer.save_pretrained")


def _check_weight_files(folder: Path, paths: Iterable[Path]) -> None:
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
            return f"is empty: {_RESAVE}"
        if path.suffix != ".safetensors":
            return None
        if len(head) < 8:
            return f"is truncated ({size} bytes): {_RESAVE}"
        (header_size,) = struct.unpack("<Q", head)
        if header_size > size - 8:
            return f"is truncated or not a safetensors file: {_RESAVE}"
        try:
            header = json.loads(handle.read(header_size))
            ends = [int(t["data_offsets"][1]) for k, t in header.items() if k != "__metadata__"]
        except (ValueError, TypeError, KeyError, IndexError, AttributeError):
            return f"has a damaged header: {_RESAVE}"
    expected = 8 + header_size + max(ends, default=0)
    if size < expected:
        return f"is truncated ({size:,} of {expected:,} bytes): {_RESAVE}"
    return None


def _check_remote_code(folder: Path, files: _ModelFiles, trust_remote_code: bool) -> bool:
    """Whether the folder brings its own code (an ``auto_map``), refused unless trusted.

    :raises ModelError: for an ``auto_map`` without ``trust_remote_code``, or, with it, one
        that names a module the folder lacks.
    """
    remote = False
    for name in REMOTE_CODE_FILES:
        auto_map = (files.json(name) or {}).get("auto_map")
        if not auto_map:
            continue
        if not trust_remote_code:
            raise ModelError(f"model {folder} needs code from its own folder (auto_map in {name}); "
                             "aworld-train does not run it unless you set config "
                             "trust_remote_code: true")
        remote = True
        for module in _modules(auto_map):
            if not (folder / f"{module}.py").is_file():
                raise ModelError(f"model {folder}: auto_map in {name} names {module}.py, which "
                                 f"the folder lacks: {_RESAVE}")
    return remote


def _modules(auto_map: Any) -> set[str]:
    """The folder's modules an ``auto_map`` names (``configuration_x.XConfig``, or a list of
    them for a tokenizer); references to another repository (``org/repo--module.Class``) are
    left to transformers."""
    values = auto_map.values() if isinstance(auto_map, dict) else [auto_map]
    references = [v for value in values for v in (value if isinstance(value, list) else [value])]
    return {reference.rsplit(".", 1)[0] for reference in references
            if isinstance(reference, str) and "." in reference and "--" not in reference}


def _check_model_type(folder: Path, config: dict[str, Any]) -> None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    model_type = config["model_type"]
    if model_type not in CONFIG_MAPPING_NAMES:
        import transformers

        raise ModelError(f"model {folder}: config.json has model_type '{model_type}', which "
                         f"transformers {transformers.__version__} does not know: upgrade "
                         "transformers, or fix model_type")


# The special-token ids config.json and generation_config.json may name, each an int or a list.
_SPECIAL_ID_KEYS = ("pad_token_id", "eos_token_id", "bos_token_id", "decoder_start_token_id")

# Tokens, ids or tensors named in one line; the rest are counted.
_FIRST_FEW = 3


def _check_config_ids(folder: Path, files: _ModelFiles, vocab_size: tuple[int, str]) -> None:
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
        shown = ", ".join(f"{name} {ids[0] if len(ids) == 1 else ids}"
                          for name, ids in beyond[:_FIRST_FEW])
        shown += f" and {len(beyond) - _FIRST_FEW} more" if len(beyond) > _FIRST_FEW else ""
        raise ModelError(f"model {folder}: config.json {key} {rows} leaves no row in the "
                         f"embeddings for {shown}: set {key} to the embeddings' rows (at least "
                         f"{needed}), or resize them (model.resize_token_embeddings(len("
                         "tokenizer))) and save the model again")


def _check_tokenizer_fits(folder: Path, tokenizer: Any, vocab_size: tuple[int, str] | None
                          ) -> None:
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
        raise ModelError(f"model {folder}: its tokenizer has no eos token{pad}, which the engines "
                         "stop generation at, end SFT completions with and pad with when there is "
                         f"no pad token: set eos_token in {folder / 'tokenizer_config.json'} to "
                         "the token that ends the model's turn")
    if vocab_size is None:
        return
    size, key = vocab_size
    rows = max(len(tokenizer), _largest_id(tokenizer) + 1)
    beyond = _tokens_beyond(tokenizer, size)
    if beyond:
        shown = ", ".join(beyond[:_FIRST_FEW]) + (", ..." if len(beyond) > _FIRST_FEW else "")
        raise ModelError(f"model {folder}: config.json {key} {size} is smaller than its "
                         f"tokenizer ({rows} token ids): these have no row in the embeddings: "
                         f"{shown}: set {key} to the embeddings' rows, at least {rows}, or resize "
                         "them (model.resize_token_embeddings(len(tokenizer))) and save the "
                         "model again")


def _vocab_size(config: dict[str, Any]) -> tuple[int, str] | None:
    """The rows of the model's embeddings and the ``config.json`` key that gives them
    (``text_config.vocab_size`` for a multimodal model); ``None`` when it names none."""
    for section, prefix in ((config, ""), (config.get("text_config"), "text_config.")):
        value = section.get("vocab_size") if isinstance(section, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value, prefix + "vocab_size"
    return None


def _largest_id(tokenizer: Any) -> int:
    """The tokenizer's largest token id: its added tokens may come after a gap."""
    added = getattr(tokenizer, "added_tokens_decoder", None) or {}
    return max([len(tokenizer) - 1, *(int(index) for index in added)])


def _tokens_beyond(tokenizer: Any, vocab_size: int) -> list[str]:
    """The tokenizer's ids from ``vocab_size`` on, described: its added tokens by name (the
    special tokens are usually the last ids), the rest of its vocabulary as a range."""
    added = {int(index): str(token) for index, token in
             (getattr(tokenizer, "added_tokens_decoder", None) or {}).items()}
    named = [f"{token} {index}" for index, token in sorted(added.items()) if index >= vocab_size]
    plain = [index for index in range(vocab_size, len(tokenizer)) if index not in added]
    if plain:
        span = f"{plain[0]}" if len(plain) == 1 else f"{plain[0]}-{plain[-1]}"
        named.insert(0, f"{len(plain)} vocabulary id{'s' if len(plain) > 1 else ''} {span}")
    return named


def _config_ids_beyond(files: _ModelFiles, vocab_size: int) -> list[tuple[str, list[int]]]:
    """The special-token ids ``config.json`` (and its ``text_config``) and
    ``generation_config.json`` give from ``vocab_size`` on, each under its file and key."""
    config = files.config()
    places = [("config.json ", config), ("config.json text_config.", config.get("text_config")),
              ("generation_config.json ", files.json("generation_config.json"))]
    beyond = []
    for place, section in places:
        if not isinstance(section, dict):
            continue
        for key in _SPECIAL_ID_KEYS:
            value = section.get(key)
            ids = [i for i in (value if isinstance(value, list) else [value])
                   if isinstance(i, int) and not isinstance(i, bool)]
            if any(i >= vocab_size for i in ids):
                beyond.append((f"{place}{key}", ids))
    return beyond


def _transformers_available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return (lines[0] if lines else type(exc).__name__)[:300]


# --- prompt lengths --------------------------------------------------------------------------


@dataclass
class _Renderer:
    """Counts a prompt's tokens as training renders it."""

    tokenizer: Any
    system_prompt: str | None
    tools: list[dict[str, Any]]
    folder: str

    @property
    def chat(self) -> bool:
        return bool(getattr(self.tokenizer, "chat_template", None))

    def describe(self) -> str:
        """What the count includes: ``system prompt, 3 tool schemas, chat template``."""
        parts = ["system prompt"] if self.system_prompt else []
        if self.tools:
            parts.append(f"{len(self.tools)} tool schema{'s' if len(self.tools) > 1 else ''}")
        parts.append("chat template" if self.chat else "plain text")
        return ", ".join(parts)

    def count(self, prompt: Any) -> int:
        """The prompt's tokens: chat messages (or a string) rendered with the system prompt,
        the tool schemas and the generation prompt."""
        if not self.chat:
            text = _text(prompt)
            return len(self.tokenizer(f"{self.system_prompt}\n\n{text}" if self.system_prompt
                                      else text)["input_ids"])
        return len(self.tokenizer.apply_chat_template(
            self._messages(prompt), tools=self.tools or None, add_generation_prompt=True,
            tokenize=True, return_dict=True)["input_ids"])

    def framing(self) -> tuple[int, int]:
        """The tokens a prompt has besides its text: those of a one-message prompt with empty
        text (system prompt, tool schemas, markup, generation prompt), and those each further
        message adds (the first message's, when the template renders no pair of messages)."""
        first = self.count("")
        try:
            pair = self.count([{"role": "user", "content": ""},
                               {"role": "assistant", "content": ""}])
        except Exception:  # a template that wants other roles or order: a generous figure
            return first, first
        return first, max(pair - first, 1)

    def content_tokens(self, prompts: list[Any]) -> list[int]:
        """Each prompt's text tokenized alone, in one batch."""
        encoded = self.tokenizer([_text(prompt) for prompt in prompts], add_special_tokens=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def _messages(self, prompt: Any) -> list[dict[str, Any]]:
        messages = ([{"role": "user", "content": prompt}] if isinstance(prompt, str)
                    else [{"role": m["role"], "content": m["content"]} for m in prompt])
        if self.system_prompt and (not messages or messages[0]["role"] != "system"):
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages


def _text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    return "\n\n".join(str(message.get("content") or "") for message in prompt)


# Rows are read, and those in doubt tokenized without the template, this many at a time.
_BATCH_ROWS = 8192


def _first_too_long(dataset: datasets.Dataset, renderer: _Renderer, room: int,
                    role: str) -> tuple[int, int] | None:
    """A row whose rendered prompt passes ``room`` tokens (the longest of the first batch of
    rows that has one), and its exact count; ``None`` when every prompt fits. See
    :func:`check_lengths`."""
    import numpy as np

    first, each = _rendered(lambda: renderer.framing(), renderer, f"{role}: the prompts")
    offset = 0
    for table in dataset.with_format("arrow").iter(batch_size=_BATCH_ROWS):
        column = table["prompt"]
        sizes, messages = _prompt_sizes(column)
        # A message's text may join its markup into fewer tokens, never more: one to spare each.
        frame = first + each * (messages - 1) + messages
        doubtful = np.flatnonzero(sizes + frame > room)
        if doubtful.size:
            prompts = column.take(doubtful).to_pylist()
            bounds = np.asarray(renderer.content_tokens(prompts)) + frame[doubtful]
            for at in np.argsort(-bounds, kind="stable"):
                if bounds[at] <= room:
                    break
                row = offset + int(doubtful[at])
                prompt = prompts[at]
                tokens = _rendered(lambda: renderer.count(prompt), renderer,  # noqa: B023 - called at once
                                   f"{role} row {row}: the prompt")
                if tokens > room:
                    return row, tokens
        offset += len(table)
    return None


def _rendered(count: Callable[[], Any], renderer: _Renderer, what: str) -> Any:
    """``count()``, with a failure of the chat template (the model's own Jinja code) as one
    line naming what was rendered."""
    try:
        return count()
    except Exception as exc:  # jinja2 and transformers raise many kinds
        raise ModelError(f"{what} cannot be rendered with the chat template of "
                         f"{renderer.folder}: {_first_line(exc)}") from None


def _prompt_sizes(column: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each prompt's text in UTF-8 bytes (every message's content; the messages joined by a
    blank line, as :func:`_text` joins them) and its number of messages, from an Arrow column
    of strings or of lists of messages."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        sizes = pc.fill_null(pc.binary_length(column), 0).to_numpy(zero_copy_only=False)
        return sizes.astype(np.int64), np.ones(len(column), dtype=np.int64)
    count = pc.fill_null(pc.list_value_length(column), 0).to_numpy(zero_copy_only=False)
    content = pc.list_flatten(column).field("content")
    length = pc.fill_null(pc.binary_length(content), 0).to_numpy(zero_copy_only=False)
    parents = pc.list_parent_indices(column).to_numpy(zero_copy_only=False)
    total = np.bincount(parents, weights=length, minlength=len(column)).astype(np.int64)
    count = count.astype(np.int64)
    return total + 2 * np.maximum(count - 1, 0), count


def check_lora_targets(folder: str | os.PathLike[str], target_modules: str | tuple[str, ...],
                       trust_remote_code: bool = False) -> str | None:
    """Check that LoRA's ``target_modules`` name modules of the model in ``folder``.

    The model is built from its ``config.json`` on torch's meta device: no weights are read and
    no memory is taken, and code from the folder runs only with ``trust_remote_code`` (a folder
    with an ``auto_map`` and no trust was refused by :func:`preflight_model`). A name matches as
    PEFT matches it: a module name that is the name, or ends with ``.<name>``; a single string
    other than ``all-linear`` is a regular expression that must match a whole module name.

    :returns: ``None`` when checked, or why it was not (torch or transformers are not installed
        here, or transformers cannot build the model from its config).
    :raises ConfigError: one line naming ``lora.target_modules``, the names that match no module
        and a few that do.
    """
    from aworld_train.errors import ConfigError
    from aworld_train.settings import ALL_LINEAR

    if target_modules == ALL_LINEAR:
        return None
    if importlib.util.find_spec("torch") is None or not _transformers_available():
        return "not checked: torch and transformers are not installed here"
    names = _module_names(str(folder), bool(trust_remote_code))
    if isinstance(names, str):
        return names
    modules, linear = names
    if isinstance(target_modules, str):
        bad = [] if any(re.fullmatch(target_modules, name) for name in modules) else [
            target_modules]
    else:
        bad = [target for target in target_modules
               if not any(name == target or name.endswith(f".{target}") for name in modules)]
    if bad:
        valid = ", ".join(linear[:8]) or "none"
        raise ConfigError(
            f"config lora.target_modules: {', '.join(bad)} match{'es' if len(bad) == 1 else ''} "
            f"no module of the model {folder}; its linear layers include {valid} "
            f"(or use {ALL_LINEAR})")
    return None


def _module_names(folder: str, trust_remote_code: bool) -> tuple[list[str], list[str]] | str:
    """The model's module names, and the distinct last components of its linear layers but the
    output head, from the model built on the meta device; or why it could not be built."""
    import torch

    model = _meta_model(folder, trust_remote_code)
    if isinstance(model, str):
        return f"not checked: {model}"
    modules = [name for name, _ in model.named_modules() if name]
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    linear = list(dict.fromkeys(
        name.rsplit(".", 1)[-1] for name, module in model.named_modules()
        if isinstance(module, torch.nn.Linear) and module is not output))
    return modules, linear


def _meta_model(folder: str, trust_remote_code: bool) -> Any:
    """The model ``AutoModelForCausalLM`` builds from the folder's ``config.json`` on torch's
    meta device (no weights read, no memory taken), or why transformers cannot build it."""
    import torch
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(
            folder, trust_remote_code=trust_remote_code, local_files_only=True)
        with torch.device("meta"):
            return transformers.AutoModelForCausalLM.from_config(
                config, trust_remote_code=trust_remote_code)
    except Exception as exc:  # noqa: BLE001 (the engine reports it when it loads the model)
        return f"transformers cannot build the model from its config: {_first_line(exc)}"


# --- the weights against the architecture ----------------------------------------------------


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

    :param folder: a model folder, as :func:`preflight_model` returns it.
    :returns: what was compared, or why nothing was.
    :raises ModelError: one line naming the folder and the first few tensors of another shape,
        missing, or unexpected, each with its file and both shapes.
    """
    folder = Path(folder)
    files = _ModelFiles(folder)
    config = files.config()
    if any((files.json(name) or {}).get("auto_map") for name in REMOTE_CODE_FILES):
        return "not compared: the model is built by code from its folder, not run in the checks"
    if config.get("quantization_config"):
        return "not compared: the weights are quantized (quantization_config in config.json)"
    stored = _stored_shapes(folder, files)
    if isinstance(stored, str):
        return stored
    if importlib.util.find_spec("torch") is None or not _transformers_available():
        return "not compared: torch and transformers are not installed here"
    model = _meta_model(str(folder), False)
    if isinstance(model, str):
        return f"not compared: {model}"
    mismatched, missing, unexpected = _compare_weights(model, stored)
    architecture = type(model).__name__
    if mismatched or missing or unexpected:
        found = [f"{len(items)} {what} ({'; '.join(items[:_FIRST_FEW])}"
                 f"{f'; {len(items) - _FIRST_FEW} more' if len(items) > _FIRST_FEW else ''})"
                 for items, what in ((mismatched, "of another shape"), (missing, "missing"),
                                     (unexpected, "unexpected")) if items]
        raise ModelError(f"model {folder}: its weights do not match the {architecture} that "
                         f"config.json describes: tensors {', '.join(found)}: fix config.json, "
                         "or write the folder again with save_pretrained")
    shards = {file for _, file in stored.values()}
    where = shards.pop() if len(shards) == 1 else f"{len(shards)} safetensors shards"
    return f"{len(stored)} tensors in {where} match the {architecture} of config.json"


def _stored_shapes(folder: Path, files: _ModelFiles
                   ) -> dict[str, tuple[tuple[int, ...], str]] | str:
    """Each stored tensor's shape and file, from the safetensors headers transformers would
    load; or why they are not read."""
    single = folder / "model.safetensors"
    if single.is_file():
        paths = [single]
    elif (index := files.json("model.safetensors.index.json")) is not None:
        weight_map = index.get("weight_map") or {}
        paths = [folder / shard for shard in sorted({str(s) for s in weight_map.values()})]
    else:
        present = [name for name in (*_WEIGHT_FILES, *_WEIGHT_INDEXES) if (folder / name).is_file()]
        return (f"not compared: the weights are {', '.join(present) or 'not safetensors'}, whose "
                "tensors are not listed without unpickling them")
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
        return {name: tuple(int(size) for size in entry["shape"])
                for name, entry in header.items() if name != "__metadata__"}
    except (OSError, ValueError, TypeError, KeyError, AttributeError, struct.error):
        raise ModelError(f"model {path.parent}: {path.name} has a damaged header: "
                         f"{_RESAVE}") from None


def _compare_weights(model: Any, stored: dict[str, tuple[tuple[int, ...], str]]
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
            mismatched.append(f"{key} is {list(shape)} in {file}, {list(expected[name])} by "
                              "config.json")
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
    ignore_unexpected = _any_of([*(getattr(model, "_keys_to_ignore_on_load_unexpected", None)
                                   or ()), r"rotary_emb\.inv_freq", r"(^|\.)position_ids$"])
    missing = [name for name in expected
               if name not in found and name not in buffers and not ignore_missing(name)]
    unexpected = [key for key in unexpected if not ignore_unexpected(key)]
    return mismatched, missing, unexpected


def _any_of(patterns: Iterable[str] | None) -> Callable[[str], bool]:
    """Whether a name matches one of a model class's regular expressions of names to ignore."""
    compiled = [re.compile(pattern) for pattern in patterns or ()]
    return lambda name: any(pattern.search(name) for pattern in compiled)


def _stored_name_in_model(model: Any, expected: dict[str, tuple[int, ...]]
                          ) -> Callable[[str], tuple[str, bool]]:
    """How transformers' loading names a stored tensor in the model, and whether a conversion
    (which may reshape it) applies: the model type's renamings and conversions (transformers
    5), then the base model's prefix (``model.``) added or taken away."""
    prefix = getattr(model, "base_model_prefix", "") or ""

    def by_prefix(key: str) -> str:
        if key in expected or not prefix:
            return key
        if key.startswith(f"{prefix}.") and key[len(prefix) + 1:] in expected:
            return key[len(prefix) + 1:]
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
