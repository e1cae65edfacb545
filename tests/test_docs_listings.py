"""The guides show the repository's files as they are: a code block introduced by "this is
[`path`]" holds that file (its comment lines aside)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHOWN = re.compile(r"this is\s+\[`(?P<path>[^`]+)`\]\([^)]*\):\s*\n\n```\w*\n(?P<body>.*?)```",
                   re.DOTALL)


def _listings() -> list[tuple[str, str, str]]:
    found = []
    for guide in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        text = guide.read_text(encoding="utf-8")
        found += [(guide.name, match["path"], match["body"]) for match in SHOWN.finditer(text)]
    return found


def test_the_guides_show_files() -> None:
    assert _listings(), "no guide shows a file: the pattern no longer matches the guides"


@pytest.mark.parametrize(("guide", "path", "body"), _listings())
def test_a_shown_file_is_the_file(guide: str, path: str, body: str) -> None:
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    assert body.splitlines() == [line for line in lines if not line.startswith("#")], (
        f"{guide} shows {path} as it no longer is")
