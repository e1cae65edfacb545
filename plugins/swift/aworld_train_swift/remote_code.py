"""Code shipped with a model (``auto_map``) runs only when the job sets ``trust_remote_code``.

ms-swift 4.6 has no ``trust_remote_code`` argument: it passes ``trust_remote_code=True`` to
transformers wherever it reads a model's config, tokenizer or weights, and some of its model
types import classes from the model folder directly. Every one of these paths fetches the
folder's module through transformers' ``get_cached_module_file`` and imports it with
``get_class_in_module``; while the job does not trust the model, both refuse.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from aworld_train.engine import ModelError

if TYPE_CHECKING:
    from collections.abc import Iterator

# The two functions of transformers.dynamic_module_utils through which a model's own code is
# copied and imported (looked up as module globals at each call, so replacing them holds).
_LOADERS = ("get_cached_module_file", "get_class_in_module")


@contextmanager
def model_code(trusted: bool, model: str) -> Iterator[None]:
    """Within the block, refuse to run Python files from a model unless ``trusted``.

    swift catches some loading errors and falls back to reading ``config.json`` as data, then
    may fail later for want of the model's code, or not at all: a refusal it swallowed is
    raised when the block ends, in place of any error it led to.

    :param model: the job's model, named in the error.
    :raises ModelError: naming the model and the ``trust_remote_code`` key.
    """
    if trusted:
        yield
        return
    from transformers import dynamic_module_utils

    refusal = ModelError(
        f"model {model} needs code from its own folder, which aworld-train does not run "
        "unless you set config trust_remote_code: true"
    )
    refused = False

    def refuse(*args: Any, **kwargs: Any) -> NoReturn:
        nonlocal refused
        refused = True
        raise refusal

    originals = {name: getattr(dynamic_module_utils, name) for name in _LOADERS}
    for name in _LOADERS:
        setattr(dynamic_module_utils, name, refuse)
    try:
        yield
    except Exception:
        if refused:
            raise refusal from None
        raise
    finally:
        for name, original in originals.items():
            setattr(dynamic_module_utils, name, original)
    if refused:
        raise refusal
