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

# What the core still names, by module, to be moved to the engines' declarations: each count may
# only fall. The default engine of the contract (plugins.py), VeRL's sharded checkpoints that
# eval exports (evaluation/target.py), the chat templates of hf.py and testing/tool_caller.py,
# and messages that name an engine to install as an example (cli.py, cli_eval.py,
# dataset_rows.py, testing/bad_job_cases.py).
REMAINING = {
    "evaluation/_target.py": 9,
    "engine/hf.py": 1,
    "plugins/__init__.py": 3,
    "testing/bad_job_cases.py": 2,
    "testing/tool_caller.py": 2,
}


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of the module, its classes and its functions."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                found.add(id(body[0].value))
    return found


def _code_words(path: Path) -> list[str]:
    """What a module's code says: its imports, its names and attributes, its strings but the
    docstrings (prose that may name an engine as an example, as comments may)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    prose = _docstrings(tree)
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
        words = [word for word in _code_words(path) if FORBIDDEN.search(word)]
        if len(words) > REMAINING.get(str(path.relative_to(CORE)), 0):
            found[str(path.relative_to(CORE))] = words
    assert not found, f"the core names an engine: {found}"


def test_the_rule_catches_what_it_forbids(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Names trl in prose."""\nimport aworld_train_trl\nKEY = "actor_rollout_ref.x"\n'
    )
    assert [w for w in _code_words(module) if FORBIDDEN.search(w)] == [
        "aworld_train_trl",
        "actor_rollout_ref.x",
    ]
