"""The optional packages an engine setting needs (DeepSpeed, flash-attn, ...): a setting whose
package is missing is refused in ``check``, in one line that names the ``pip install``, rather
than failing when training starts.
"""

from __future__ import annotations

import importlib.util

from aworld_train.errors import ConfigError

# Optional packages an engine setting makes the engine import when training starts: the module
# looked up, and the name pip installs it by.
OPTIONAL_PACKAGES = {
    "deepspeed": "deepspeed",
    "flash_attn": "flash-attn",
    "liger_kernel": "liger-kernel",
    "bitsandbytes": "bitsandbytes",
    "peft": "peft",
    "vllm": "vllm",
    "math_verify": "math_verify",
}


def require_package(module: str, key: str, why: str = "") -> None:
    """Refuse, in one line, a setting whose package is not installed here (found, not imported).

    :param module: the module the setting imports (``deepspeed``, ``flash_attn``).
    :param key: the config key that asks for it, as the error names it (``trl.deepspeed``).
    :param why: what the setting is, for the message (``ZeRO stage 2``).
    :raises ConfigError: naming the key and the ``pip install`` that fixes it.
    """
    if importlib.util.find_spec(module) is not None:
        return
    package = OPTIONAL_PACKAGES.get(module, module)
    what = f" ({why})" if why else ""
    raise ConfigError(
        f"config {key}{what} needs {package}, which is not installed here: "
        f"pip install {package}, or leave {key} out"
    )
