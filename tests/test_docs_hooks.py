"""docs/hooks.md describes the hooks ``core/aworld_train/plugins/hookspecs.py`` declares: the same
names in the same order, each with the spec's signature, arguments and calling convention; the
``ctx`` it documents is :class:`~aworld_train.plugins.context.RunContext` as it is; and the README
counts and names the same hooks."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aworld_train.plugins import hookspecs
from aworld_train.plugins.context import RunContext

ROOT = Path(__file__).resolve().parents[1]
HOOKS_DOC = (ROOT / "docs" / "hooks.md").read_text(encoding="utf-8")
NUMBERS = {"eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13}


def _specs() -> dict[str, Callable[..., Any]]:
    """Every hook spec, in the order the module declares them."""
    marker = f"{hookspecs.PROJECT_NAME}_spec"
    return {
        name: value
        for name, value in vars(hookspecs).items()
        if callable(value) and hasattr(value, marker)
    }


def _firstresult(spec: Callable[..., Any]) -> bool:
    return bool(getattr(spec, f"{hookspecs.PROJECT_NAME}_spec")["firstresult"])


def _signature(name: str, spec: Callable[..., Any]) -> str:
    """The spec as docs/hooks.md writes it: ``name(arg: Type, ...) -> Return``, the annotations
    as the source spells them."""
    signature = inspect.signature(spec)
    arguments = ", ".join(
        f"{parameter.name}: {parameter.annotation}" for parameter in signature.parameters.values()
    )
    return f"{name}({arguments}) -> {signature.return_annotation}"


def _table(after: str) -> list[list[str]]:
    """The rows of the Markdown table whose header line starts with ``after``, as cells."""
    start = HOOKS_DOC.index(after)
    rows = []
    for line in HOOKS_DOC[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def _name(cell: str) -> str:
    match = re.fullmatch(r"`(\w+)`", cell)
    assert match, f"docs/hooks.md: a table row names no hook or field: {cell!r}"
    return match[1]


def test_the_guide_has_a_section_per_hook_in_the_specs_order() -> None:
    sections = re.findall(r"^## `(\w+)`$", HOOKS_DOC, flags=re.MULTILINE)
    assert sections == list(_specs())


@pytest.mark.parametrize(("name", "spec"), list(_specs().items()))
def test_a_section_shows_the_specs_signature(name: str, spec: Callable[..., Any]) -> None:
    section = HOOKS_DOC.split(f"## `{name}`\n", 1)[1]
    shown = re.match(r"\s*```\n(.*?)\n```", section, flags=re.DOTALL)
    assert shown, f"docs/hooks.md: the section on {name} does not open with its signature"
    assert shown[1] == _signature(name, spec)


def test_the_overview_lists_every_hook_and_how_its_answers_are_taken() -> None:
    rows = _table("| hook | called | answer |")
    assert [_name(row[0]) for row in rows] == list(_specs())
    for row in rows:
        spec = _specs()[_name(row[0])]
        assert ("every implementation" in row[2]) == (not _firstresult(spec)), row


def test_the_arguments_table_names_each_hooks_arguments() -> None:
    specs = _specs()
    taking = [name for name, spec in specs.items() if inspect.signature(spec).parameters]
    rows = _table("| hook | receives |")
    assert [_name(row[0]) for row in rows] == taking
    every_argument = {
        parameter for spec in specs.values() for parameter in inspect.signature(spec).parameters
    }
    for row in rows:
        arguments = set(inspect.signature(specs[_name(row[0])]).parameters)
        named = set(re.findall(r"`(\w+)`", row[1])) & every_argument
        assert named == arguments, f"docs/hooks.md: the {row[0]} row names {sorted(named)}"


def test_the_ctx_table_is_the_run_context() -> None:
    rows = _table("| `ctx.` | what it holds |")
    assert sorted(_name(row[0]) for row in rows) == sorted(
        field.name for field in dataclasses.fields(RunContext)
    )


def test_the_guides_read_only_what_the_run_context_holds() -> None:
    fields = {field.name for field in dataclasses.fields(RunContext)}
    for guide in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        read = set(re.findall(r"\bctx\.(\w+)", guide.read_text(encoding="utf-8")))
        assert read <= fields, f"{guide.name} reads ctx.{sorted(read - fields)}"


def test_the_readme_counts_and_names_the_hooks() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    sentence = re.search(r"through (\w+) pluggy hooks(.*?)\n\n", readme, flags=re.DOTALL)
    assert sentence, "README.md no longer says how many pluggy hooks drive an engine"
    assert NUMBERS.get(sentence[1]) == len(_specs()), f"README.md: '{sentence[1]}' hooks"
    named = re.findall(r"`(\w+)`", sentence[2])
    assert [name for name in dict.fromkeys(named) if name in _specs()] == list(_specs())
