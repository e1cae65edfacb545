"""Resolving the user's ``path/to/file.py:name`` and ``package.module:name`` references."""

from __future__ import annotations

import errno
import importlib
import importlib.util
import os
import stat
import sys
from pathlib import Path
from typing import Any

from aworld_train.errors import AWorldTrainError, Interrupted


def split_reference(reference: str) -> tuple[str, str]:
    """Split ``"target:name"`` at its last colon; ``name`` is empty when there is none."""
    target, sep, name = reference.rpartition(":")
    return (target, name) if sep else (reference, "")


def import_object(
    reference: str,
    error: type[AWorldTrainError],
    what: str,
    base_dir: Path | None = None,
) -> Any:
    """Import ``name`` from ``path/to/file.py:name`` (relative to ``base_dir``) or
    ``package.module:name``.

    :param error: the error class to raise; :param what: what is imported, for the message.
    """
    target, name = split_reference(reference)
    if not target or not name:
        raise error(
            f"{what} '{reference}' must look like path/to/file.py:name or package.module:name"
        )
    if target.endswith(".py"):
        module = load_file(resolve_path(target, base_dir), error, what)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise error(f"{what} '{reference}': cannot import module '{target}': {exc}") from None
        except Interrupted:
            raise
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # user code can raise anything
            raise error(f"{what} '{reference}': importing '{target}' {_failed(exc)}") from exc
    try:
        return getattr(module, name)
    except AttributeError:
        raise error(f"{what} '{reference}': '{name}' not found in {target}") from None


def resolve_path(path: str | Path, base_dir: Path | None) -> Path:
    """``path`` relative to ``base_dir`` (when given and the path is relative), made absolute."""
    path = Path(path).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    try:
        return path.resolve()
    except (RuntimeError, OSError):  # a symlink loop: require_file names it
        return Path(os.path.abspath(path))


def absolute_reference(reference: str, base_dir: Path | None) -> str:
    """``path/to/file.py:name``, or a bare ``path/to/file.py`` (a reward file with one reward
    function), with the file made absolute (relative to ``base_dir``); anything else (a
    built-in name, ``package.module:name``) as it is."""
    target, name = split_reference(reference)
    if not target.endswith(".py"):
        return reference
    path = resolve_path(target, base_dir)
    return f"{path}:{name}" if name else str(path)


def require_file(path: Path, error: type[AWorldTrainError], what: str) -> None:
    """Raise ``error`` unless ``path`` is a regular file (not missing, not a directory, a
    symlink loop, a FIFO or a device, which would fail later or block on read).

    :param what: what the file is, for the message (``"reward file"``, ``"train_dataset"``).
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{what} {path} is a symlink loop; point it at a file") from None
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    if stat.S_ISDIR(mode):
        raise error(f"{what} {path} is a directory; name a file in it") from None
    if not stat.S_ISREG(mode):
        raise error(f"{what} {path} is not a regular file (a FIFO, socket or device)")


#: Seconds a user's file may take to import (a reward file may import torch) before check
#: gives up on it.
IMPORT_SECONDS = 60.0


def load_file(path: Path, error: type[AWorldTrainError], what: str) -> Any:
    """Import a Python file as a module of its own.

    The file is imported first in a child process with a time limit: a file that ends the
    process (``os._exit``) or never finishes on import would otherwise end or stall the check
    without a word. Only once that import returned is the file imported here.

    The file's folder comes first on ``sys.path`` while the file runs, so it imports the
    modules beside it as ``python file.py`` would. The folder then stays on ``sys.path``, at
    the end: reward functions often import such a module lazily, at their first call, and
    at the end the user's file names cannot shadow the libraries imported after it.
    """
    from aworld_train.isolation import call_isolated

    require_file(path, error, f"{what} file")
    module_name = f"aworld_train_user_{abs(hash(str(path)))}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    call_isolated(
        lambda: bool(_execute(path, module_name, error, what)),
        timeout=IMPORT_SECONDS,
        what=f"{what} file {path}, on import,",
        error=error,
    )
    return _execute(path, module_name, error, what)


def _execute(path: Path, module_name: str, error: type[AWorldTrainError], what: str) -> Any:
    """Run the file as the module ``module_name`` in this process."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: dataclasses and pickle look it up.
    sys.modules[module_name] = module
    folder = str(path.parent)
    sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Interrupted:
        del sys.modules[module_name]
        raise
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # the user's file: one line
        del sys.modules[module_name]
        raise error(f"{what} file {path} {_failed(exc, ' on import')}") from exc
    finally:
        if folder in sys.path:  # the file may have taken it off itself
            sys.path.remove(folder)
        if folder not in sys.path:
            sys.path.append(folder)
    return module


def _failed(exc: BaseException, when: str = "") -> str:
    """What importing user code did instead of finishing, for the message:
    ``raised ValueError{when}: message`` or ``called sys.exit(3){when}``."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({'' if exc.code is None else repr(exc.code)}){when}"
    message = " ".join(str(exc).split())
    return f"raised {type(exc).__name__}{when}" + (f": {message}" if message else "")
