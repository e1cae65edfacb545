"""Helpers for testing engines: a tiny offline model every engine can train.

Importing this package is cheap; torch, transformers and tokenizers are imported only when
:func:`build_tiny_model` runs.
"""

from aworld_train.testing.tiny_model import TOOL_CHAT_TEMPLATE, build_tiny_model

__all__ = ["TOOL_CHAT_TEMPLATE", "build_tiny_model"]
