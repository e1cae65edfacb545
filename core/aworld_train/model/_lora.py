"""LoRA's ``target_modules`` checked against the modules of the model, built on the meta device
(:func:`check_lora_targets`).

torch is imported inside the functions.
"""

from __future__ import annotations

import importlib.util
import os
import re

from aworld_train.errors import ConfigError
from aworld_train.model._files import transformers_available
from aworld_train.model._meta import meta_model
from aworld_train.job.settings import ALL_LINEAR


def check_lora_targets(
    folder: str | os.PathLike[str],
    target_modules: str | tuple[str, ...],
    trust_remote_code: bool = False,
) -> str | None:
    """Check that LoRA's ``target_modules`` name modules of the model in ``folder``.

    The model is built from its ``config.json`` on torch's meta device: no weights are read and
    no memory is taken, and code from the folder runs only with ``trust_remote_code`` (a folder
    with an ``auto_map`` and no trust was refused by
    :func:`~aworld_train.model.preflight_model`). A name matches as PEFT matches it: a module
    name that is the name, or ends with ``.<name>``; a single string other than ``all-linear``
    is a regular expression that must match a whole module name.

    :returns: ``None`` when checked, or why it was not (torch or transformers are not installed
        here, or transformers cannot build the model from its config).
    :raises ConfigError: one line naming ``lora.target_modules``, the names that match no module
        and a few that do.
    """
    if target_modules == ALL_LINEAR:
        return None
    if importlib.util.find_spec("torch") is None or not transformers_available():
        return "not checked: torch and transformers are not installed here"
    names = _module_names(str(folder), bool(trust_remote_code))
    if isinstance(names, str):
        return names
    modules, linear = names
    if isinstance(target_modules, str):
        bad = (
            [] if any(re.fullmatch(target_modules, name) for name in modules) else [target_modules]
        )
    else:
        bad = [
            target
            for target in target_modules
            if not any(name == target or name.endswith(f".{target}") for name in modules)
        ]
    if bad:
        valid = ", ".join(linear[:8]) or "none"
        raise ConfigError(
            f"config lora.target_modules: {', '.join(bad)} match{'es' if len(bad) == 1 else ''} "
            f"no module of the model {folder}; its linear layers include {valid} "
            f"(or use {ALL_LINEAR})"
        )
    return None


def _module_names(folder: str, trust_remote_code: bool) -> tuple[list[str], list[str]] | str:
    """The model's module names, and the distinct last components of its linear layers but the
    output head, from the model built on the meta device; or why it could not be built."""
    import torch

    model = meta_model(folder, trust_remote_code)
    if isinstance(model, str):
        return f"not checked: {model}"
    modules = [name for name, _ in model.named_modules() if name]
    output = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    linear = list(
        dict.fromkeys(
            name.rsplit(".", 1)[-1]
            for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and module is not output
        )
    )
    return modules, linear
