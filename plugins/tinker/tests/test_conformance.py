"""The core's engine conformance suite, run against the tinker engine and the test server.

The suite's tiny model is the model the server serves (a Qwen3: SkyRL tx loads no Qwen2), and
the service is found where a user's shell names it, ``TINKER_BASE_URL`` and ``TINKER_API_KEY``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from aworld_train.engine.testing import EngineConformance
from jobs import LOCAL_KEY


class TestTinkerConformance(EngineConformance):
    engine_name = "tinker"
    engine_section: ClassVar[dict[str, Any]] = {"lora_rank": 8}
    sft_section: ClassVar[dict[str, Any] | None] = {"lora_rank": 8}

    @pytest.fixture(scope="class")
    @classmethod
    def tiny_model(cls, served_model: Path, server: str) -> Iterator[Path]:
        # Class-scoped, as the suite's runs that several tests compare (the resume tests') are.
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TINKER_BASE_URL", server)
            patch.setenv("TINKER_API_KEY", LOCAL_KEY)
            yield served_model
