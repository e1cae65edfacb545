"""Functions stay short: none in the core, the engines or the examples is over
:data:`MAX_FUNCTION_LINES` lines (tests and benchmarks aside), so each reads as named steps.

The source is read, not imported, so the test runs in the core's venv without the engines'
libraries. Its sibling rule, ruff's C901 (``max-complexity`` in pyproject.toml), bounds the
paths through a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The most lines a function (its decorators aside, its docstring included) has.
MAX_FUNCTION_LINES = 60
#: Where the rule holds: the core, each engine's package and the examples.
SOURCES = [
    ROOT / "core" / "aworld_train",
    *sorted(ROOT.glob("plugins/*/aworld_train_*")),
    ROOT / "examples",
]
#: Allowlist, as ``path:function``: functions allowed over the limit. Empty: every function is
#: within it, and the list never grows.
ALLOWED: set[str] = set()


def function_lengths(source: str) -> dict[str, int]:
    """Each function and method of a module by its name, with its length in lines."""
    return {
        node.name: node.end_lineno - node.lineno + 1
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno
    }


def long_functions() -> dict[str, int]:
    """Every function over :data:`MAX_FUNCTION_LINES` lines, as ``path:function``, with its length."""
    found = {}
    for folder in SOURCES:
        for path in sorted(folder.rglob("*.py")):
            relative = path.relative_to(ROOT)
            if {"tests", "bench", "build"} & set(relative.parts):
                continue
            for name, lines in function_lengths(path.read_text(encoding="utf-8")).items():
                if lines > MAX_FUNCTION_LINES:
                    found[f"{relative.as_posix()}:{name}"] = lines
    return found


def test_function_lengths_are_measured() -> None:
    """The walk sees nested functions and methods, and counts from ``def`` to the last line."""
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = f"class Box:\n    def method(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n"
    source += "def outer():\n    def inner():\n        pass\n    return inner\n"
    lengths = function_lengths(source)
    assert lengths["method"] == MAX_FUNCTION_LINES + 1
    assert lengths["outer"] == 4 and lengths["inner"] == 2


def test_no_function_over_the_limit() -> None:
    """Outside the allowlist, no function is over the limit: split it into named helpers."""
    over = {name: lines for name, lines in long_functions().items() if name not in ALLOWED}
    assert not over, f"over {MAX_FUNCTION_LINES} lines: {over}"


def test_allowlist_names_only_long_functions() -> None:
    """An allowlisted function that got short (or was renamed) leaves the list."""
    assert ALLOWED <= set(long_functions()), sorted(ALLOWED - set(long_functions()))
