"""ms-swift's DeepSpeed configs, found without importing swift."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

# swift's own DeepSpeed configs, named by the ``deepspeed`` argument (zero2, zero3_offload...).
_NAMED_DEEPSPEED = re.compile(r"zero\d(_offload)?")


def swift_deepspeed(value: Any) -> Any:
    """The DeepSpeed config swift trains with: one of swift's own named configs (``zero3``,
    ``zero2_offload``, the JSON files in its ``config`` folder), found without importing swift,
    else the value as given (a path or a dict)."""
    if isinstance(value, str) and _NAMED_DEEPSPEED.fullmatch(value):
        spec = importlib.util.find_spec("swift")
        for root in (spec and spec.submodule_search_locations) or ():
            named = Path(root) / "config" / f"{value}.json"
            if named.is_file():
                return named
    return value
