"""``check_agent`` asks for ``tokenizer``, an argument the spec does not have."""

from __future__ import annotations

from typing import Any

from aworld_train import hookimpl


@hookimpl
def check_agent(agent: Any, ctx: Any, tokenizer: Any) -> None:
    return None


@hookimpl
def train(ctx: Any) -> None:
    return None
