"""The engine conformance suite, run against the swift engine."""

from __future__ import annotations

from aworld_train.engine.testing import EngineConformance


class TestSwiftConformance(EngineConformance):
    engine_name = "swift"
    # The tiny model's Qwen2 type fits several ChatML templates; the job picks one.
    engine_section = {"template": "qwen"}
    sft_section = {"template": "qwen"}
