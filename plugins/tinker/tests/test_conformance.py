"""The core's engine conformance suite, run against the tinker engine and the test server.

The suite's tiny model is the model the server serves (a Qwen3: SkyRL tx loads no Qwen2), and
the service is found where a user's shell names it, ``TINKER_BASE_URL`` and ``TINKER_API_KEY``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from aworld_train.testing.conformance import EngineConformance


class TestTinkerConformance(EngineConformance):
    engine_name = "tinker"
    engine_section: ClassVar[dict[str, Any]] = {"lora_rank": 8}
    sft_section: ClassVar[dict[str, Any] | None] = {"lora_rank": 8}

    @pytest.fixture
    def tiny_model(self, served_model: Path, service: str) -> Path:
        return served_model
