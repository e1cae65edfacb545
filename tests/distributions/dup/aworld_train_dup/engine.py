"""Hooks of the second `twin` engine; discovery must refuse the name before importing this."""

from __future__ import annotations

from typing import Any

from aworld_train import hookimpl


@hookimpl
def train(ctx: Any) -> dict[str, Any]:
    return {"trained_by": 1.0}
