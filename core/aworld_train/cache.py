"""A disk cache for what an engine reads from its training library's code: text that takes
seconds to make (importing the library) yet depends only on what is installed, such as VeRL's
composed config and schema or a trainer's argument names.

Each file lives under ``~/.cache/aworld-train/`` (``$XDG_CACHE_HOME`` when set), named by a
digest of the key the engine passes (the library's version, the engine's version, a format
number, ...), so installing another version makes a new file instead of reading a stale one.
A cache that cannot be read or written only makes the next check slower.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def _always(text: str) -> bool:
    return True


def cache_file(name: str, key: Sequence[Any]) -> Path:
    """Where ``name`` is kept for ``key``.

    :param name: the file's name, e.g. ``verl-schema.json``.
    :param key: JSON-serialisable values that decide when the text must be made again.
    :returns: ``<cache>/aworld-train/<digest of key>-<name>``.
    """
    digest = hashlib.sha256(json.dumps(list(key), sort_keys=True).encode()).hexdigest()[:16]
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "aworld-train" / f"{digest}-{name}"


def cached(
    name: str,
    make: Callable[[], str],
    valid: Callable[[str], bool] = _always,
    *,
    key: Sequence[Any],
) -> str:
    """The text cached as ``name`` for ``key``; made and cached when the file is missing, cannot
    be read, or is not ``valid``.

    :param name: the file's name (see :func:`cache_file`).
    :param make: makes the text (the slow part).
    :param valid: whether a cached text is whole and of the expected shape.
    :param key: what the text depends on (see :func:`cache_file`).
    :returns: the cached or newly made text.
    """
    path = cache_file(name, key)
    try:
        text = path.read_text(encoding="utf-8")
        if valid(text):
            return text
    except (OSError, UnicodeDecodeError):
        pass
    text = make()
    _write_quietly(path, text)
    return text


def _write_quietly(path: Path, text: str) -> None:
    """Write the cache atomically (a reader never sees half a file); a cache that cannot be
    written is only slower next time."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
    except OSError:
        pass
