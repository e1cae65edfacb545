"""The model folder checked before any engine loads it: :func:`preflight_model`.

It tells a local model folder from a hub id and checks the folder the way a reviewer would,
without running anything from it: ``config.json`` and the other JSON files are parsed as data,
weights are found by name and their headers read (:mod:`aworld_train.model._weights`), and a
folder whose ``auto_map`` names its own Python code is refused unless the job sets
``trust_remote_code``. Only then is the tokenizer loaded, when ``transformers`` is installed,
and checked against the model (:mod:`aworld_train.model._tokenizer`). A hub id is returned as
given: nothing here contacts a hub.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any

from aworld_train.errors import ModelError
from aworld_train.job.spelling import one_edit
from aworld_train.model._files import (
    FIX,
    REMOTE_CODE_FILES,
    RESAVE,
    ModelFiles,
    transformers_available,
    vocab_size_of,
)
from aworld_train.model._tokenizer import check_config_ids, check_tokenizer_fits, checked_tokenizer
from aworld_train.model._weights import check_weight_files

# A hub repository id as huggingface_hub accepts one: an optional namespace and a name, each of
# word characters, '-' and '.' (a trailing '.git', '--' and '..' are refused below).
_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")


# A folder close to a missing one by this much is taken for a typo of it, not for a hub id.
_TYPO_CUTOFF = 0.8


def preflight_model(
    model: str | os.PathLike[str] | None,
    base_dir: Path | None = None,
    trust_remote_code: bool = False,
) -> str | None:
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
        raise ModelError(
            f"model must be a local folder or a hub id 'organisation/name', not "
            f"{type(model).__name__} {model!r}"
        )
    given = os.fspath(model)
    folder = _local_folder(given, base_dir)
    if folder is None:
        return given
    files = ModelFiles(folder)
    config = files.config()
    remote_code = _check_remote_code(folder, files, trust_remote_code)
    check_weight_files(folder, files)
    _check_tokenizer_files(folder)
    vocab_size = vocab_size_of(config)
    if vocab_size is not None:
        check_config_ids(folder, files, vocab_size)
    if transformers_available():
        if not remote_code:
            _check_model_type(folder, config)
        check_tokenizer_fits(folder, checked_tokenizer(folder, trust_remote_code), vocab_size)
    return str(folder)


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
                raise ModelError(
                    f"model {model} is a file ({candidate}), not a model folder: {FIX}"
                )
        local = path.is_absolute() or _looks_local(model, roots)
    except OSError as exc:  # a name too long for the file system, a loop of links
        raise ModelError(
            f"model {model!r} cannot be looked up as a folder: {exc.strerror or exc}"
        ) from None
    if not local and _is_hub_id(model):
        return None
    if not local:
        raise ModelError(
            f"model {model!r} is neither a local folder nor a hub id 'organisation/name': {FIX}"
        )
    places = " or ".join(str(root) for root in roots)
    where = "" if path.is_absolute() else f" in {places}"
    suggestion = _one_edit_folder(model, roots) or _suggest(path, roots)
    if suggestion:
        hint = " (a hub id is written 'organisation/name')" if "/" not in model else ""
        raise ModelError(
            f"model folder {model} not found{where} (did you mean {suggestion}?){hint}"
        )
    raise ModelError(f"model folder {model} not found{where}: {FIX}")


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
    # alone does not make a hub id local), or a bare name one edit from one, however short
    # (a short name's ratio stays under the cutoff: `Qwne` beside `Qwen/`).
    return (
        _suggest(Path(model), roots, _TYPO_CUTOFF) is not None
        or _one_edit_folder(model, roots) is not None
    )


def _one_edit_folder(model: str, roots: list[Path]) -> str | None:
    """The folder in ``roots`` that a bare name (no ``/``) is one edit from, or ``None``."""
    if "/" in model:
        return None
    return next(
        (name for root in roots for name in sorted(_subfolders(root)) if one_edit(model, name)),
        None,
    )


def _is_hub_id(model: str) -> bool:
    return (
        bool(_HUB_ID.match(model))
        and "--" not in model
        and ".." not in model
        and not model.endswith(".git")
    )


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


# What tokenizer.save_pretrained writes, for the tokenizer kinds transformers loads.
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "vocab.txt",
    "tokenizer.model",
    "spiece.model",
)


def _check_tokenizer_files(folder: Path) -> None:
    """A tokenizer saved in the folder: without one, transformers 5 builds an empty tokenizer
    from ``model_type`` and loads it without a word, and training then fails or learns nothing.

    :raises ModelError: naming the folder and the files looked for.
    """
    if not any((folder / name).is_file() for name in _TOKENIZER_FILES):
        raise ModelError(
            f"model folder {folder} has no tokenizer ({', '.join(_TOKENIZER_FILES)}): "
            "save it there with tokenizer.save_pretrained"
        )


def _check_remote_code(folder: Path, files: ModelFiles, trust_remote_code: bool) -> bool:
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
            raise ModelError(
                f"model {folder} needs code from its own folder (auto_map in {name}); "
                "aworld-train does not run it unless you set config "
                "trust_remote_code: true"
            )
        remote = True
        for module in _modules(auto_map):
            if not (folder / f"{module}.py").is_file():
                raise ModelError(
                    f"model {folder}: auto_map in {name} names {module}.py, which "
                    f"the folder lacks: {RESAVE}"
                )
    return remote


def _modules(auto_map: Any) -> set[str]:
    """The folder's modules an ``auto_map`` names (``configuration_x.XConfig``, or a list of
    them for a tokenizer); references to another repository (``org/repo--module.Class``) are
    left to transformers."""
    values = auto_map.values() if isinstance(auto_map, dict) else [auto_map]
    references = [v for value in values for v in (value if isinstance(value, list) else [value])]
    return {
        reference.rsplit(".", 1)[0]
        for reference in references
        if isinstance(reference, str) and "." in reference and "--" not in reference
    }


def _check_model_type(folder: Path, config: dict[str, Any]) -> None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    model_type = config["model_type"]
    if model_type not in CONFIG_MAPPING_NAMES:
        import transformers

        raise ModelError(
            f"model {folder}: config.json has model_type '{model_type}', which "
            f"transformers {transformers.__version__} does not know: upgrade "
            "transformers, or fix model_type"
        )
