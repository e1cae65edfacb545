"""The core package and each engine package import in one direction: no module imports, even
from inside a function, a module that imports it back, nor the package it lives in (an import
that runs back up); the core's wings (its sub-packages and top-level modules) import each other
one way only, so that they stand in floors; and no module is over :data:`MAX_LINES` lines.

The imports are read from the source (nothing is imported here), so the test runs in the core's
venv without the engines' libraries. An import under ``if TYPE_CHECKING:`` never runs and is left
out; ``from package import name`` counts as importing the module ``package.name`` when there is
one, else ``package`` itself; importing ``pkg.sub.module`` from outside ``pkg.sub`` imports
``pkg.sub`` (its ``__init__``) too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The core package and each engine's, by their top-level name.
PACKAGES = {
    "aworld_train": ROOT / "core" / "aworld_train",
    **{
        folder.name: folder
        for folder in sorted(ROOT.glob("plugins/*/aworld_train_*"))
        if (folder / "__init__.py").is_file()
    },
}
#: The most lines a module of those packages has.
MAX_LINES = 500


def _modules(package: str, folder: Path) -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its own name)."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = [package, *path.relative_to(folder).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that runs, at the top or inside a function or class."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _targets(
    module: str, path: Path, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]
) -> set[str]:
    """The package's own modules one import statement loads (the deepest module each name
    reaches)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        if node.level:
            base = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            base = base[: len(base) - node.level + 1]
            prefix = ".".join([*base, *([node.module] if node.module else [])])
        else:
            prefix = node.module or ""
        names = [
            f"{prefix}.{alias.name}" if f"{prefix}.{alias.name}" in modules else prefix
            for alias in node.names
        ]
    targets = set()
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if not name:
            continue
        targets.add(name)
        # Importing a.b.c runs a/b/__init__.py first, unless the importer is inside a.b already
        # (the top-level package's own __init__ runs before anything, so it only counts when
        # something is imported from it by name).
        parts = name.split(".")
        targets.update(
            parent
            for parent in (".".join(parts[:end]) for end in range(2, len(parts)))
            if not (module == parent or module.startswith(f"{parent}."))
        )
    targets.discard(module)
    return targets


def import_graph(package: str, folder: Path) -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports."""
    modules = _modules(package, folder)
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[name] = set().union(*(_targets(name, path, node, modules) for node in _imports(tree)))
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle of each strongly connected group of modules (Tarjan's algorithm), each as
    the modules in import order, the first repeated at the end."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return [_cycle_in(graph, group) for group in groups]


def _cycle_in(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest cycle through the group's first module (breadth first)."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & group):
            if target == start:
                return [*paths[node], start]
            if target not in paths:
                paths[target] = [*paths[node], target]
                queue.append(target)
    raise AssertionError(f"no cycle in {sorted(group)}")


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_import_cycle(package: str) -> None:
    cycles = find_cycles(import_graph(package, PACKAGES[package]))
    assert not cycles, f"{package} imports in a circle: " + "; ".join(
        " -> ".join(cycle) for cycle in cycles
    )


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_no_module_imports_the_package_it_lives_in(package: str) -> None:
    upward = [
        f"{module} -> {target}"
        for module, targets in import_graph(package, PACKAGES[package]).items()
        for target in targets
        if module.startswith(f"{target}.") and not module.endswith(".__main__")
    ]
    assert not upward, "imports that run back up: " + "; ".join(upward)


def _wing(module: str) -> str:
    """The wing of a core module: its sub-package, or the top-level module itself."""
    return ".".join(module.split(".")[:2])


def test_the_core_wings_import_each_other_one_way() -> None:
    wings: dict[str, set[str]] = {}
    for module, targets in import_graph("aworld_train", PACKAGES["aworld_train"]).items():
        if module != "aworld_train":  # the package's face hands names on
            wings.setdefault(_wing(module), set()).update(
                _wing(t) for t in targets if t != "aworld_train" and _wing(t) != _wing(module)
            )
    for targets in wings.values():
        targets &= set(wings)
    cycles = find_cycles(wings)
    assert not cycles, "wings import in a circle: " + "; ".join(" -> ".join(c) for c in cycles)


def test_a_cycle_through_a_function_is_found(tmp_path: Path) -> None:
    """The finder sees a cycle closed by an import inside a function, and a relative one, and
    none through an import only the type checker reads."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from . import c\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from pkg.b import f\nelse:\n    import pkg.a\n"
    )
    (package / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n"
    )
    graph = import_graph("pkg", package)
    assert graph["pkg.d"] == set()
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.c", "pkg.a"]]


def test_a_cycle_through_a_subpackage_init_is_found(tmp_path: Path) -> None:
    """Importing a module of a subpackage runs the subpackage's ``__init__``: a module it
    re-exports from that imports the importer back closes a cycle; its own modules importing
    each other do not."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from pkg.sub.one import f\n")
    (package / "sub" / "one.py").write_text("from pkg.sub.two import g\n")
    (package / "sub" / "two.py").write_text("def g():\n    from pkg import user\n")
    (package / "user.py").write_text("from pkg.sub.two import g\n")
    graph = import_graph("pkg", package)
    assert graph["pkg.sub.one"] == {"pkg.sub.two"}
    assert find_cycles(graph) == [["pkg.sub", "pkg.sub.one", "pkg.sub.two", "pkg.user", "pkg.sub"]]


def long_modules() -> list[str]:
    """Every module of the core and the engines over :data:`MAX_LINES` lines, with its count."""
    found = []
    for package, folder in sorted(PACKAGES.items()):
        for path in _modules(package, folder).values():
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                found.append(f"{path.relative_to(ROOT)} ({lines})")
    return found


def test_no_module_is_long() -> None:
    """A module of one concern fits in :data:`MAX_LINES` lines."""
    assert not long_modules(), f"over {MAX_LINES} lines (formatted): split by concern"
