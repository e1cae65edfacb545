"""The core names no engine: what it knows of an engine, it asks the installed ones."""

from __future__ import annotations

import ast
import re
from pathlib import Path

CORE = Path(__file__).resolve().parent.parent / "core" / "aworld_train"
# The shipped engines' names and import names, and keys only one engine has.
FORBIDDEN = re.compile(
    r"\b(aworld_train_(trl|swift|verl|tinker)|trl|swift|verl|tinker|ms-swift"
    r"|actor_rollout_ref|peft_config|tuner_type)\b",
    re.IGNORECASE,
)

# The one name the core may hold, by module: a module-level constant whose value names an engine.
# AWorld Train's ``AgentTrainer`` defaults ``train_engine_name`` to "verl", and its jobs rely on
# it, so the engine a job that names none trains on when several are installed stays "verl": a
# compatibility default, kept in one named constant and nowhere else.
CONSTANTS = {"plugins/__init__.py": "AWORLD_TRAIN_DEFAULT_ENGINE"}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of the module, its classes and its functions."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def _constant_values(tree: ast.Module, name: str | None) -> set[int]:
    """The ids of the values of the module-level assignments to ``name``."""
    return {
        id(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        and any(isinstance(target, ast.Name) and target.id == name for target in node.targets)
    }


def _code_words(path: Path, constant: str | None = None) -> list[str]:
    """What a module's code says: its imports, its names and attributes, its strings but the
    docstrings (prose that may name an engine as an example, as comments may) and the value of
    the module-level ``constant``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = _docstrings(tree) | _constant_values(tree, constant)
    words = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            words += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            words.append(node.module or "")
        elif isinstance(node, ast.Name):
            words.append(node.id)
        elif isinstance(node, ast.Attribute):
            words.append(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in prose:
                words.append(node.value)
    return words


def test_no_core_module_names_a_shipped_engine_in_its_code() -> None:
    """No module of the core (``core/aworld_train/**.py``, ``testing/`` included) imports a
    shipped engine's package, or holds in an import, a name, an attribute or a string (other
    than a docstring) a shipped engine's name (``trl``, ``swift``, ``ms-swift``, ``verl``,
    ``tinker``, their ``aworld_train_*`` packages) as a word, or a key only one engine has
    (``actor_rollout_ref``, ``peft_config``, ``tuner_type``). Docstrings and comments are prose,
    and may name an engine as an example."""
    found = {}
    for path in sorted(CORE.rglob("*.py")):
        name = str(path.relative_to(CORE))
        words = [word for word in _code_words(path, CONSTANTS.get(name)) if FORBIDDEN.search(word)]
        if words:
            found[name] = words
    assert not found, f"the core names an engine: {found}"


def test_the_one_exception_is_the_default_engine_constant() -> None:
    from aworld_train import plugins

    assert plugins.AWORLD_TRAIN_DEFAULT_ENGINE == "verl"
    # Without its exception the module names exactly that one engine, in that one constant.
    words = _code_words(CORE / "plugins" / "__init__.py")
    assert [word for word in words if FORBIDDEN.search(word)] == ["verl"]


def test_the_rule_catches_what_it_forbids(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Names trl in prose."""\nimport aworld_train_trl\nKEY = "actor_rollout_ref.x"\n'
        'DEFAULT = "verl"\n'
    )
    assert [w for w in _code_words(module) if FORBIDDEN.search(w)] == [
        "aworld_train_trl",
        "actor_rollout_ref.x",
        "verl",
    ]
    # The excepted constant's value is left out, and only it.
    assert [w for w in _code_words(module, "DEFAULT") if FORBIDDEN.search(w)] == [
        "aworld_train_trl",
        "actor_rollout_ref.x",
    ]
