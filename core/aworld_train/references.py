"""Resolving the user's ``path/to/file.py:name`` and ``package.module:name`` references."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from aworld_train.errors import AWorldTrainError


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
        raise error(f"{what} '{reference}' must look like path/to/file.py:name or package.module:name")
    if target.endswith(".py"):
        module = load_file(resolve_path(target, base_dir), error, what)
    else:
        try:
            module = importlib.import_module(target)
        except ImportError as exc:
            raise error(f"{what} '{reference}': cannot import module '{target}': {exc}") from None
        except Exception as exc:  # importing user code can raise anything
            raise error(f"{what} '{reference}': importing '{target}' raised {type(exc).__name__}: {exc}") from exc
    try:
        return getattr(module, name)
    except AttributeError:
        raise error(f"{what} '{reference}': '{name}' not found in {target}") from None


def resolve_path(path: str | Path, base_dir: Path | None) -> Path:
    """``path`` relative to ``base_dir`` (when given and the path is relative), made absolute."""
    path = Path(path).expanduser()
    if base_dir is not None and not path.is_absolute():
        path = base_dir / path
    return path.resolve()


def load_file(path: Path, error: type[AWorldTrainError], what: str) -> Any:
    """Import a Python file as a module of its own."""
    if not path.is_file():
        raise error(f"{what} file not found: {path}")
    module_name = f"aworld_train_user_{abs(hash(str(path)))}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's file: report it in one line
        raise error(f"{what} file {path} raised {type(exc).__name__} on import: {exc}") from exc
    sys.modules[module_name] = module
    return module
