"""How an exception inside the engine ends ``train``: as ``check`` ends, in one line.

:func:`crash_line` names what raised, the exception's type and message, where it was raised
(:func:`raised_at`) and the run's log holding its traceback; :func:`write_traceback` writes that
log, secrets hidden as everywhere else.
"""

from __future__ import annotations

import os
import sysconfig
import traceback
from collections.abc import Collection
from pathlib import Path
from types import TracebackType

# A message longer than this (a tensor's repr, a whole config) is cut in the line; the log
# keeps it whole.
MESSAGE_LIMIT = 1000
_CORE_PACKAGE = __name__.partition(".")[0]


def crash_line(who: str, hook: str, error: BaseException, where: str, log: Path | None) -> str:
    """The one line for ``error`` raised by ``who``'s ``hook``, with secrets hidden.

    :param who: the engine's or plugin's label (``engine 'trl' (aworld-train-trl 0.1.0)``).
    :param where: :func:`raised_at`'s answer.
    :param log: the file holding the traceback; ``None`` when it could not be written.
    """
    found = f"traceback in {log}" if log is not None else "--debug shows the traceback"
    return one_line(f"{who} {hook} raised {_what(error)} at {where}; the run failed, {found}")


def check_crash_line(error: BaseException, where: str) -> str:
    """The one line for ``error``, raised during the checks by code that is not a hook (the
    core, a library it called): what it was and where, with the traceback under ``--debug``
    (from Python: the error's ``__cause__``)."""
    return one_line(f"the checks raised {_what(error)} at {where}; --debug shows the traceback")


def one_line(text: str) -> str:
    """``text`` as the CLI prints an error: whitespace folded into one line, secrets hidden."""
    from aworld_train.run.redaction import redact_text

    return redact_text(" ".join(text.split()))


def _what(error: BaseException) -> str:
    """``Type: message``, the message cut at :data:`MESSAGE_LIMIT`."""
    message = " ".join(str(error).split())
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


def write_traceback(path: Path, error: BaseException) -> None:
    """Write ``error``'s traceback (its causes included) to ``path``, secrets hidden."""
    from aworld_train.run.redaction import redact_text

    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    path.write_text(redact_text(text), encoding="utf-8")


def raised_at(error: BaseException, own_packages: Collection[str]) -> str:
    """Where ``error`` was raised, as ``file.py:line``: the innermost frame of its traceback,
    followed by ``(from file.py:line)``, the innermost frame of the engine's, a plugin's or
    the user's own code, when the first lies in a library (TRL, torch, ...) or the core.

    :param own_packages: the top-level packages of the engine and the extension plugins, which
        count as their code wherever they are installed.
    """
    frames = list(_frames(error.__traceback__))
    if not frames:
        return "an unknown place"
    innermost = frames[-1]
    own = next((f for f in reversed(frames) if _is_own(f, own_packages)), None)
    if own is None or own is innermost:
        return _label(*innermost)
    return f"{_label(*innermost)} (from {_label(*own)})"


_Frame = tuple[str, int, str]  # file, line, module name


def _frames(tb: TracebackType | None) -> list[_Frame]:
    frames = []
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno, module))
        tb = tb.tb_next
    return frames


def _is_own(frame: _Frame, own_packages: Collection[str]) -> bool:
    """Whether a frame is the engine's, a plugin's or the user's code: a plugin's package, or
    a file outside the core, the standard library and the installed libraries."""
    filename, _line, module = frame
    package = module.partition(".")[0]
    if package in own_packages:
        return True
    if package == _CORE_PACKAGE or filename.startswith("<"):  # "<frozen ...>", "<string>"
        return False
    path = os.path.realpath(filename)
    return not any(path.startswith(root + os.sep) for root in _library_roots())


def _library_roots() -> set[str]:
    """The folders of the standard library and of installed packages."""
    paths = sysconfig.get_paths()
    return {
        os.path.realpath(paths[key])
        for key in ("stdlib", "platstdlib", "purelib", "platlib")
        if key in paths
    }


def _label(filename: str, line: int, module: str) -> str:
    """``package/module.py:line`` for a module's file (as it reads wherever it is installed,
    frozen into Python included), else the file's path, relative to the working folder when it
    lies inside it."""
    parts = module.split(".") if module and module != "__main__" else []
    if filename.startswith("<frozen ") and parts:  # "<frozen os>": the module os.py, frozen
        return f"{'/'.join(parts)}.py:{line}"
    path = Path(filename)
    if path.name == "__init__.py":
        parts.append("__init__")
    tail = path.with_suffix("").parts[-len(parts) :] if parts else ()
    if parts and list(tail) == parts:
        return f"{'/'.join(path.parts[-len(parts) :])}:{line}"
    return f"{short_path(filename)}:{line}"


def short_path(filename: str) -> str:
    """A file as messages show it: inside the standard library or installed packages, its path
    there (``trl/trainer/grpo_trainer.py``); else its path, relative to the working folder
    when it lies inside it."""
    if filename.startswith("<frozen ") and filename.endswith(">"):  # a module frozen in Python
        return filename[len("<frozen ") : -1].replace(".", "/") + ".py"
    path = os.path.realpath(filename)
    roots = [root for root in _library_roots() if path.startswith(root + os.sep)]
    if roots:
        return os.path.relpath(path, max(roots, key=len))
    try:
        return str(Path(path).relative_to(Path.cwd().resolve()))
    except ValueError:
        return filename
