"""The engine SDK's testing tier: the conformance suite an engine's tests subclass (each test
of the suite then runs against the engine: checks, a tiny training run, resume), and the tiny
model built in code that they train. Imported by tests only: it needs pytest.
"""

from __future__ import annotations

from aworld_train.testing.conformance import EngineConformance
from aworld_train.testing.tiny_model import build_tiny_model

__all__ = ["EngineConformance", "build_tiny_model"]
