"""The per-engine tables of ``docs/settings.md``, generated from the installed engines'
settings declarations (:mod:`aworld_train.job.declaration`).

Each engine's table sits between ``<!-- settings: NAME -->`` and ``<!-- /settings -->``;
:func:`regenerate` rewrites the tables of the engines installed here and leaves the others as
they are, so that each engine's virtual environment checks and writes its own.
"""

from __future__ import annotations

import re
from pathlib import Path

from aworld_train.plugins import installed_declarations

REGENERATE = "python -m aworld_train.cli.settings_docs docs/settings.md"


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- settings: {re.escape(name)} -->\n)[^<]*(<!-- /settings -->)")


def _escaped(table: str) -> str:
    """``table`` as a replacement template writes it literally."""
    return table.replace("\\", "\\\\")


def regenerate(text: str) -> str:
    """``text`` with each installed engine's table written from its declaration.

    :raises ValueError: for an installed engine whose table has no place in ``text``.
    """
    for name, declared in installed_declarations().items():
        block = _block(name)
        if not block.search(text):
            raise ValueError(f"docs/settings.md has no '<!-- settings: {name} -->' block")
        text = block.sub(rf"\g<1>{_escaped(declared.markdown())}\n\g<2>", text)
    return text


def main(argv: list[str] | None = None) -> None:
    import sys

    path = Path((argv if argv is not None else sys.argv[1:])[0])
    path.write_text(regenerate(path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main()
