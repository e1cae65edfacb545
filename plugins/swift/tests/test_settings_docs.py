"""docs/settings.md holds this engine's table as its settings declaration generates it."""

from __future__ import annotations

from pathlib import Path

from aworld_train.plugins import installed_declarations
from aworld_train.cli.settings_docs import REGENERATE, regenerate

ENGINE = "swift"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "settings.md"


def test_the_settings_guide_holds_the_declared_table() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert ENGINE in installed_declarations(), "the engine declares its settings"
    assert regenerate(text) == text, f"docs/settings.md is out of date: run {REGENERATE}"
