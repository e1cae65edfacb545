"""The core's layout holds: no module imports itself back through others (a circle), no module
imports the package it lives in (an import that runs back up), and the core's wings (its
sub-packages and top-level modules) import each other one way only, so that they stand in
floors. The engines' packages are held to the first two rules too.

Every import counts, those inside functions and under ``TYPE_CHECKING`` included: each is a
dependency a reader has to follow.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = [
    ROOT / "core" / "aworld_train",
    *sorted(p.parent for p in ROOT.glob("plugins/*/aworld_train_*/__init__.py")),
]


def module_name(path: Path, package: Path) -> str:
    """``aworld_train.job.config`` for ``core/aworld_train/job/config.py`` (a package's
    ``__main__``, which runs the package, is ``aworld_train.cli.__main__``)."""
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, package: str, modules: Collection[str]) -> Iterator[str]:
    """Every module of ``package`` that the module at ``path`` imports: ``from a.b import c``
    imports the module ``a.b.c`` where there is one, else ``a.b``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split(".")[0] == package)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == package:
                for alias in node.names:
                    name = f"{node.module}.{alias.name}"
                    yield name if name in modules else node.module


def import_graph(package: Path) -> dict[str, set[str]]:
    """Each module of ``package`` with the modules of the package it imports."""
    modules = {module_name(p, package): p for p in package.rglob("*.py")}
    return {
        name: {m for m in imported(path, package.name, modules) if m in modules and m != name}
        for name, path in modules.items()
    }


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph`` (each as the path that closes it), by depth-first
    search: an edge back to a module still on the stack closes one."""
    found, state = [], dict.fromkeys(graph, 0)  # 0 unseen, 1 on the stack, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append([*stack[stack.index(nxt) :], nxt])
            elif state.get(nxt) == 0:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for node in sorted(graph):
        if state[node] == 0:
            visit(node, [node])
    return found


def wing(module: str) -> str:
    """The wing of a core module: its sub-package, or the top-level module itself."""
    return ".".join(module.split(".")[:2])


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_no_module_imports_itself_back(package: Path) -> None:
    assert circles(import_graph(package)) == []


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_no_module_imports_the_package_it_lives_in(package: Path) -> None:
    upward = [
        (module, target)
        for module, targets in import_graph(package).items()
        for target in targets
        if module.startswith(f"{target}.") and not module.endswith(".__main__")
    ]
    assert upward == []


def test_the_core_wings_import_each_other_one_way() -> None:
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph(PACKAGES[0]).items():
        if module == "aworld_train":  # the package's face: it hands names on
            continue
        graph.setdefault(wing(module), set()).update(
            wing(t) for t in targets if wing(t) != wing(module) and t != "aworld_train"
        )
    assert circles(graph) == []


def test_the_rules_find_what_they_forbid(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "wing").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "wing" / "__init__.py").write_text("from pkg.wing.a import x\n")
    (package / "wing" / "a.py").write_text("def f():\n    from pkg.b import y\n")
    (package / "b.py").write_text("from pkg.wing import a\n")
    graph = import_graph(package)
    assert graph["pkg.b"] == {"pkg.wing.a"}
    assert graph["pkg.wing"] == {"pkg.wing.a"}
    assert circles(graph) == [["pkg.b", "pkg.wing.a", "pkg.b"]]
    assert circles({"x": {"y"}, "y": set()}) == []
