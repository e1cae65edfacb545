"""The model built from its ``config.json`` on torch's meta device: its architecture without a
weight read or memory taken, which the weights and LoRA checks and the memory estimate inspect.

torch and transformers are imported inside the function.
"""

from __future__ import annotations

from typing import Any

from aworld_train.model._files import first_line


def meta_model(folder: str, trust_remote_code: bool) -> Any:
    """The model ``AutoModelForCausalLM`` builds from the folder's ``config.json`` on torch's
    meta device (no weights read, no memory taken), or why transformers cannot build it."""
    import torch
    import transformers

    try:
        config = transformers.AutoConfig.from_pretrained(
            folder, trust_remote_code=trust_remote_code, local_files_only=True
        )
        with torch.device("meta"):
            return transformers.AutoModelForCausalLM.from_config(
                config, trust_remote_code=trust_remote_code
            )
    except Exception as exc:  # noqa: BLE001 (the engine reports it when it loads the model)
        return f"transformers cannot build the model from its config: {first_line(exc)}"
