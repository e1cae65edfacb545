"""Helpers for testing engines: a tiny offline model every engine can train.

Importing this package is cheap; torch, transformers and tokenizers are imported only when
:func:`build_tiny_model` runs. The names below are looked up on first use, so that
``python -m aworld_train.testing.tiny_model`` runs its module once, not after importing it.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["TOOL_CHAT_TEMPLATE", "build_tiny_model"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("aworld_train.testing.tiny_model"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
