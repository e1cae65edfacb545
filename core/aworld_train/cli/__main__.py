"""``python -m aworld_train.cli``: the ``aworld-train`` command."""

from aworld_train.cli import main

main()
