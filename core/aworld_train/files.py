"""Reading the user's YAML and JSON files safely, with errors that name the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aworld_train.errors import AWorldTrainError


def read_mapping(path: Path, error: type[AWorldTrainError], what: str) -> dict[str, Any]:
    """Read a YAML or JSON file that must hold a mapping.

    YAML is read with safe loading only.

    :param error: the error class to raise (``JobError``, ``ConfigError``, ``AgentError``).
    :param what: what the file is, for the message (``"job file"``, ``"agent file"``).
    """
    import yaml

    if not path.is_file():
        raise error(f"{what} not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error(f"cannot read {what} {path}: {exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise error(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"{path}{line}: invalid YAML: {problem}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise error(f"{path}: {what} must hold a mapping, not a {type(data).__name__}")
    return data
