"""The core's engine conformance suite, run against the trl engine."""

from __future__ import annotations

from typing import Any, ClassVar

from aworld_train.engine.testing import EngineConformance


class TestTrlConformance(EngineConformance):
    engine_name = "trl"
    engine_section: ClassVar[dict[str, Any]] = {"beta": 0.0}
    sft_section: ClassVar[dict[str, Any] | None] = {}
