"""Reading the user's YAML and JSON safely, with errors that name the file.

A job file is input nobody reviewed, so reading it is bounded: a file over :data:`MAX_BYTES`,
nesting deeper than :data:`MAX_DEPTH`, YAML aliases that expand past :data:`MAX_VALUES`
values (a "billion laughs" file is a few hundred bytes), a key given twice in one YAML mapping
and a YAML key that is not a string are each refused in one line. YAML is read with safe
loading only.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

from aworld_train.errors import AWorldTrainError

MAX_BYTES = 10 * 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 1_000_000


class _Refused(ValueError):
    """A guard refused the YAML being composed; ``line`` is 1-based, or None."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


def read_mapping(path: Path, error: type[AWorldTrainError], what: str) -> dict[str, Any]:
    """Read a YAML or JSON file (``.json`` is JSON) that must hold a mapping.

    :param error: the error class to raise (``JobError``, ``ConfigError``, ``AgentError``).
    :param what: what the file is, for the message (``"job file"``, ``"agent file"``).
    :raises error: for a missing, unreadable, oversized or malformed file, or one that does not
        hold a mapping; one line naming the file.
    """
    text = read_text(path, error, what)
    if path.suffix == ".json":
        data = parse_json_text(text, str(path), error)
    else:
        data = load_yaml_text(text, str(path), error)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise error(f"{path}: {what} must hold a mapping, not a {type(data).__name__}")
    return data


def read_text(
    path: Path, error: type[AWorldTrainError], what: str, max_bytes: int = MAX_BYTES
) -> str:
    """A regular file's UTF-8 text (a leading byte-order mark dropped), at most ``max_bytes``.

    :raises error: for a missing file, a folder, a device or pipe (reading one may never end),
        a symlink loop, an oversized file or text that is not UTF-8.
    """
    try:
        with open_regular(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise error(
                    f"{path}: the {what} is {_size(size)}, over the {_size(max_bytes)} limit"
                )
            raw = handle.read(max_bytes + 1)  # the file may have grown since
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise error(f"{what} {path} is a folder; give the file inside it") from None
    except NotRegularFile:
        raise error(f"{what} {path} is not a regular file") from None
    except OSError as exc:  # a symlink loop (ELOOP), a path through a file, no permission
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise error(f"{path}: the {what} is over the {_size(max_bytes)} limit")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(f"cannot read {what} {path}: not UTF-8 text (byte {exc.start})") from None


class NotRegularFile(OSError):
    """A path that is there but is neither a regular file nor a folder: a FIFO, a device."""


def open_regular(path: Path) -> BinaryIO:
    """``path`` open for reading bytes, only if it is a regular file.

    Checked before it is opened, so that a device is never opened (opening some has effects),
    and again once open, without blocking, so that a FIFO put in its place meanwhile cannot
    block the reader until something writes to it.

    :raises FileNotFoundError: when nothing is there.
    :raises IsADirectoryError: for a folder.
    :raises NotRegularFile: for anything else but a regular file.
    :raises OSError: as :func:`open` does otherwise.
    """
    _refuse_irregular(os.stat(path).st_mode, path)
    handle = open(path, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK))
    try:
        _refuse_irregular(os.fstat(handle.fileno()).st_mode, path)
    except OSError:
        handle.close()
        raise
    os.set_blocking(handle.fileno(), True)
    return handle


def read_regular(path: Path) -> str:
    """The whole text of ``path``, a regular file (:func:`open_regular`), without a size limit;
    bytes that are not UTF-8 replaced. What reads a run's own files, which may be large."""
    with open_regular(path) as handle:
        return handle.read().decode("utf-8", errors="replace")


def _refuse_irregular(mode: int, path: Path) -> None:
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder", str(path))
    if not stat.S_ISREG(mode):
        raise NotRegularFile(f"{path} is not a regular file")


def load_yaml_text(
    text: str, where: str, error: type[AWorldTrainError], max_chars: int | None = MAX_BYTES
) -> Any:
    """Parse YAML text with the guards of :func:`read_mapping`.

    :param where: how messages name the text (a file name, ``data.jsonl:3``).
    :param max_chars: the longest text accepted; None for no limit.
    :raises error: for invalid YAML or a guard, one line starting with ``where`` (and the line).
    """
    import yaml

    _check_length(text, where, error, max_chars)
    try:
        return yaml.load(text, Loader=guarded_yaml_loader())  # noqa: S506 - a SafeLoader
    except _Refused as exc:
        line = f":{exc.line}" if exc.line is not None else ""
        raise error(f"{where}{line}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"{where}{line}: invalid YAML: {problem}") from None


def parse_json_text(
    text: str, where: str, error: type[AWorldTrainError], max_chars: int | None = MAX_BYTES
) -> Any:
    """Parse JSON text, refusing nesting deeper than :data:`MAX_DEPTH`.

    :param where: how messages name the text (a file name, ``data.jsonl:3``).
    :param max_chars: the longest text accepted; None for no limit.
    :raises error: for invalid or too deeply nested JSON, or a key given twice in one object,
        one line starting with ``where``.
    """
    _check_length(text, where, error, max_chars)
    text = text.removeprefix("\ufeff")
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except _GivenTwice as exc:  # json would keep the last silently
        raise error(f"{where}: key '{exc.args[0]}' is given twice") from None
    except json.JSONDecodeError as exc:
        line = f":{exc.lineno}" if "\n" in text.strip() else ""
        raise error(f"{where}{line}: invalid JSON: {exc.msg}") from None
    except RecursionError:  # the C parser recurses once per level
        raise error(_too_deep(where)) from None
    # Only text with more brackets than the limit can be nested past it; most never is walked.
    if text.count("[") + text.count("{") > MAX_DEPTH and deeper_than(data, MAX_DEPTH):
        raise error(_too_deep(where))
    return data


class _GivenTwice(Exception):
    """A JSON object names one key twice."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for key, value in pairs:
        if key in data:
            raise _GivenTwice(key)
        data[key] = value
    return data


@functools.cache
def guarded_yaml_loader() -> type:
    """A PyYAML ``SafeLoader`` with this module's guards (depth, alias expansion, duplicate and
    non-string keys), which raise ``ValueError`` subclasses; YAML errors stay ``YAMLError``."""
    import yaml

    class GuardedLoader(yaml.SafeLoader):
        def __init__(self, stream: Any) -> None:
            super().__init__(stream)
            self.depth = 0
            self.aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
            return super().compose_node(parent, index)

        # The composer recurses once per level: count containers before Python's stack runs out.
        def compose_sequence_node(self, anchor: Any) -> Any:
            return self._nested(super().compose_sequence_node, anchor)

        def compose_mapping_node(self, anchor: Any) -> Any:
            return self._nested(super().compose_mapping_node, anchor)

        def _nested(self, compose: Any, anchor: Any) -> Any:
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise _Refused(_NESTING, self.peek_event().start_mark.line + 1)
                return compose(anchor)
            finally:
                self.depth -= 1

        def compose_document(self) -> Any:
            node = super().compose_document()
            if self.aliases:  # aliases share nodes: count what they would expand to
                _expanded_size(node, 1, {})
            return node

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            _check_keys(self, node)
            return super().construct_mapping(node, deep=deep)

    # YAML 1.1, which PyYAML follows, reads 1e-4 (an exponent without a dot) as a string; YAML
    # 1.2 and every user read it as a number, and an engine's float field would refuse the text.
    GuardedLoader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
        list("-+0123456789"),
    )
    return GuardedLoader


def _check_keys(loader: Any, node: Any) -> None:
    """Refuse a mapping node's key that is not a string or is given twice, on its line."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # "<<: *base": keys given after it override the base's on purpose
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            raise _Refused(_not_a_string(key), line)
        if key in seen:
            raise _Refused(f"key '{key}' is given twice", line)
        seen.add(key)


_NESTING = f"nested deeper than {MAX_DEPTH} levels"
_ALIAS_NESTING = f"{_NESTING} once its aliases are expanded (or an alias contains itself)"


def _too_deep(where: str) -> str:
    return f"{where}: {_NESTING}"


def _not_a_string(key: Any) -> str:
    if isinstance(key, bool) or key is None:  # YAML 1.1 reads yes/no/on/off/~ as these
        return (
            f"key {key!r} is not a string (YAML reads yes, no, on, off and ~ as "
            "true, false or null); put the key in quotes"
        )
    return f"key {key!r} is not a string; put the key in quotes"


def _expanded_size(node: Any, depth: int, seen: dict[int, tuple[int, int]]) -> tuple[int, int]:
    """How many values ``node`` stands for once every alias is expanded, and how many containers
    deep it goes; memoised per node, so shared nodes are counted without being expanded.

    :param depth: the containers on the path from the document's root, this one included.
    :raises _Refused: past :data:`MAX_DEPTH` (an alias that contains itself never ends) or
        :data:`MAX_VALUES`.
    """
    import yaml

    if isinstance(node, yaml.ScalarNode):
        return 1, 0
    if id(node) not in seen:
        if depth > MAX_DEPTH:
            raise _Refused(_ALIAS_NESTING, node.start_mark.line + 1)
        children = (
            node.value
            if isinstance(node, yaml.SequenceNode)
            else [child for pair in node.value for child in pair]
        )
        size, height = 1, 1
        for child in children:
            child_size, child_height = _expanded_size(child, depth + 1, seen)
            size, height = size + child_size, max(height, child_height + 1)
        if size > MAX_VALUES:
            raise _Refused(
                f"its aliases expand to more than {MAX_VALUES:,} values; write the "
                "values out or use fewer aliases",
                node.start_mark.line + 1,
            )
        seen[id(node)] = size, height
    size, height = seen[id(node)]
    if depth - 1 + height > MAX_DEPTH:  # a shared node reached deeper than where it was counted
        raise _Refused(_ALIAS_NESTING, node.start_mark.line + 1)
    return size, height


def deeper_than(data: Any, limit: int) -> bool:
    """Whether lists, tuples and dicts in ``data`` nest more than ``limit`` levels (a walk
    without recursion, which the deep value it looks for would exhaust)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if not isinstance(value, (dict, list, tuple)):
            continue
        if depth > limit:
            return True
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children)
    return False


def _check_length(
    text: str, where: str, error: type[AWorldTrainError], max_chars: int | None
) -> None:
    if max_chars is not None and len(text) > max_chars:
        raise error(f"{where}: {len(text):,} characters, over the {max_chars:,} limit")


def _size(count: int) -> str:
    return f"{count / 2**20:.1f} MB" if count >= 2**20 else f"{count:,} bytes"
