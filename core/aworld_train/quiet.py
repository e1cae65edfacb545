"""Other libraries' logging, kept off the terminal and out of the user's folder.

AWorld sets up its loggers when it is imported, from the environment: coloured INFO lines on
stderr (about 16 for one ``check``, and every request and response of every model call while
an agent trains), and log files under ``$AWORLD_LOG_PATH``, by default ``./logs`` in whatever
folder the command ran in. So before anything imports AWorld (the CLI's entry point, and the
agent runtime for the Python API), its console output is turned off and its files go to a
folder of this user's under the system's temporary folder. Every process aworld-train starts
inherits both. A variable the user set is never changed: ``AWORLD_DISABLE_CONSOLE_LOG=false``
brings AWorld's lines back.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import MutableMapping
from pathlib import Path


def aworld_log_folder() -> Path:
    """Where AWorld's log files go unless ``AWORLD_LOG_PATH`` says otherwise: a folder of this
    user's in the temporary folder (AWorld rotates and expires its files itself)."""
    user = os.getuid() if hasattr(os, "getuid") else os.getlogin()
    return Path(tempfile.gettempdir()) / f"aworld-train-{user}" / "aworld-logs"


def quiet_library_defaults() -> dict[str, str]:
    """The environment variables that keep AWorld's logging off the terminal and out of the
    current folder."""
    return {"AWORLD_DISABLE_CONSOLE_LOG": "true", "AWORLD_LOG_PATH": str(aworld_log_folder())}


def apply_quiet_libraries(environ: MutableMapping[str, str] | None = None) -> dict[str, str]:
    """Add :func:`quiet_library_defaults` that ``environ`` (default: this process's, which every
    child inherits) lacks; return what was added. AWorld reads them when it is imported, so
    this takes effect only before that."""
    environ = os.environ if environ is None else environ
    added = {name: value for name, value in quiet_library_defaults().items() if name not in environ}
    environ.update(added)
    return added
