"""The engine SDK, ``aworld_train.engine``: the one module an engine imports."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import aworld_train.engine
from helpers import run_python

HEAVY = ("torch", "transformers", "datasets", "ray", "verl", "swift", "trl", "aworld")


def test_importing_the_sdk_imports_nothing_heavy() -> None:
    # A finder placed first sees every import attempt, also of libraries this environment
    # lacks (the core's has no torch): an attempt is what makes listing engines slow elsewhere.
    code = (
        "import json, sys\n"
        f"HEAVY = {HEAVY!r}\n"
        "tried = []\n"
        "class Recorder:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in HEAVY:\n"
        "            tried.append(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Recorder())\n"
        "import aworld_train.engine.settings, aworld_train.engine.hf\n"
        "import aworld_train.engine.runtime, aworld_train.engine.launch\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in HEAVY)\n"
        "print(json.dumps({'tried': sorted(set(tried)), 'loaded': loaded}))\n"
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found == {"tried": [], "loaded": []}


#: The SDK's tiers beside ``aworld_train.engine`` (docs/engines.md, "The SDK").
TIERS = ("settings", "hf", "runtime", "launch", "testing")


def tier_names() -> dict[str, list[str]]:
    """Each module of the SDK, ``aworld_train.engine`` and its tiers, with its ``__all__``."""
    import importlib

    modules = ["aworld_train.engine", *(f"aworld_train.engine.{tier}" for tier in TIERS)]
    return {module: list(importlib.import_module(module).__all__) for module in modules}


def test_every_name_in_all_resolves_and_each_is_in_one_tier() -> None:
    import importlib

    every = [name for names in tier_names().values() for name in names]
    assert len(every) == len(set(every)), "a name listed twice"
    for module, names in tier_names().items():
        loaded = importlib.import_module(module)
        assert [name for name in names if not hasattr(loaded, name)] == [], module
        assert loaded.__doc__, module
    assert "hookimpl" in (aworld_train.engine.__doc__ or "")


def test_what_every_engine_needs_is_thirty_names_at_most() -> None:
    assert len(aworld_train.engine.__all__) <= 30


def engine_uses(module: str, folders: str) -> set[str]:
    """The names the engines' files under ``folders`` take from ``module``: imported from it,
    or read as an attribute of it imported under a name (``import aworld_train.engine as sdk``)."""
    used = set()
    for path in PLUGINS.glob(folders):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = {
            alias.asname or alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
            if alias.name == module
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == module:
                used |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Attribute) and ast.unparse(node.value) in aliases:
                used.add(node.attr)
    return used


def test_every_name_of_the_sdk_is_used_by_an_engine() -> None:
    unused = {
        module: sorted(
            set(names)
            - engine_uses(
                module,
                "*/tests/*.py" if module.endswith(".testing") else "*/aworld_train_*/**/*.py",
            )
        )
        for module, names in tier_names().items()
    }
    assert {module: names for module, names in unused.items() if names} == {}


PLUGINS = Path(__file__).parent.parent / "plugins"


def core_imports(path: Path) -> list[str]:
    """Every ``aworld_train`` module ``path`` imports, anywhere in it (inside functions and
    ``TYPE_CHECKING`` blocks too), as ``line: module``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        found += [
            f"{node.lineno}: {module}"
            for module in modules
            if module == "aworld_train" or module.startswith("aworld_train.")
        ]
    return found


def test_core_imports_finds_every_form(tmp_path: Path) -> None:
    source = tmp_path / "engine.py"
    source.write_text(
        "from typing import TYPE_CHECKING\nimport aworld_train.engine\n"
        "from aworld_train import hookimpl\nfrom . import agent\n"
        "import aworld_train_trl.agent\nif TYPE_CHECKING:\n"
        "    from aworld_train.plugins.context import RunContext\n"
        "def f():\n    import aworld_train.launch.workers as w\n"
    )
    assert core_imports(source) == [
        "2: aworld_train.engine",
        "3: aworld_train",
        "7: aworld_train.plugins.context",
        "9: aworld_train.launch.workers",
    ]


SDK_MODULES = {"aworld_train.engine", *(f"aworld_train.engine.{tier}" for tier in TIERS)}


def test_engines_import_only_the_sdk_from_the_core() -> None:
    modules = sorted(PLUGINS.glob("*/aworld_train_*/**/*.py"))
    assert modules, "no engine modules found"
    outside = [
        f"{path.relative_to(PLUGINS)}:{line}"
        for path in modules
        for line in core_imports(path)
        if line.split(": ")[1] not in SDK_MODULES
    ]
    assert not outside, "engine modules import core modules besides aworld_train.engine:\n" + (
        "\n".join(outside)
    )


def code_lines(path: Path) -> list[str]:
    """The lines of ``path`` that are neither blank nor comments."""
    return [
        line
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def test_the_scaffolded_engine_is_small_laid_out_as_the_engines_and_uses_only_the_sdk(
    tmp_path: Path,
) -> None:
    from aworld_train.plugins.scaffold import MAX_LINES, scaffold_engine

    package = scaffold_engine("tiny", tmp_path / "aworld-train-tiny") / "aworld_train_tiny"
    modules = sorted(package.glob("*.py"))
    assert [path.name for path in modules] == [
        "__init__.py",
        "config.py",
        "engine.py",
        "training.py",
    ]
    assert sum(len(code_lines(path)) for path in modules) <= MAX_LINES == 70
    imported = [line for path in modules for line in core_imports(path)]
    assert imported and all(line.split(": ")[1] in SDK_MODULES for line in imported)

    code = (
        "import json, sys\n"
        "import aworld_train_tiny.engine\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))\n"
    )
    result = run_python(code, env={"PYTHONPATH": str(package.parent)})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [], "the hooks module imports nothing heavy"


def test_the_authors_guide_names_every_sdk_name() -> None:
    guide = (Path(__file__).parent.parent / "docs" / "engines.md").read_text(encoding="utf-8")
    missing = [name for name in aworld_train.engine.__all__ if f"`{name}`" not in guide]
    assert not missing, f"docs/engines.md does not name {missing}"
