"""The README reads from a job to a trained model before any reference table: install, a job,
check, train, look at the run and evaluate it, then where to read on. The tables of keys live in
docs/settings.md, which the README links."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
FIRST_STEPS = [
    "Install",
    "A job",
    "Check",
    "Train",
    "Look at the run and evaluate it",
    "Look at your runs",
    "Python",
    "Where next",
]


def test_the_readme_goes_from_a_job_to_a_trained_model() -> None:
    sections = re.findall(r"^## (.+)$", README, flags=re.MULTILINE)
    assert sections[: len(FIRST_STEPS)] == FIRST_STEPS


def test_no_table_comes_before_where_to_read_on() -> None:
    first_steps = README[: README.index("\n## Where next\n")]
    tables = re.findall(r"^\| .* \|$", first_steps, flags=re.MULTILINE)
    assert not tables, f"README.md has a table before 'Where next': {tables[0]}"


def test_the_readme_links_every_guide() -> None:
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)\)", README))
    guides = {f"docs/{guide.name}" for guide in (ROOT / "docs").glob("*.md")}
    assert guides <= linked, f"README.md links no {sorted(guides - linked)}"
