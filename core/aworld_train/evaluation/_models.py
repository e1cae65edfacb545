"""Finding the model to evaluate: a model folder checked as the checks check it (nothing runs
from it), a LoRA adapter folder told from a full model, a hub id asked of the hub once.

huggingface_hub is imported inside the functions.
"""

from __future__ import annotations

from pathlib import Path

from aworld_train.errors import ModelError
from aworld_train.model import preflight_model

# A full model's weights; a folder with adapter_config.json and none of these is an adapter.
_FULL_WEIGHTS = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def adapter_folder(path: Path) -> Path | None:
    """``path``, absolute, when it is a PEFT adapter folder (``adapter_config.json`` and no full
    model's weights), else ``None``."""
    if (
        path.is_dir()
        and (path / "adapter_config.json").is_file()
        and not any((path / name).exists() for name in _FULL_WEIGHTS)
    ):
        return path.resolve()
    return None


def model_path(
    model: str, base_dir: Path | None, trust_remote_code: bool, given: bool = False
) -> str:
    """A model folder as an absolute path (a relative one looked up in ``base_dir``, then the
    current folder, as the checks do), checked by :func:`~aworld_train.model.preflight_model`
    unless it is an adapter folder; or a hub id as written.

    :param given: the name came from ``--model``: one without a '/' that is no folder here is a
        missing folder, not a hub id.
    :raises ModelError: for a folder that is not there or is refused.
    """
    path = Path(model).expanduser()
    roots = (
        [path]
        if path.is_absolute()
        else [root / path for root in [*([base_dir] if base_dir is not None else []), Path.cwd()]]
    )
    for candidate in roots:
        adapter = adapter_folder(candidate)
        if adapter is not None:
            return str(adapter)
    checked = str(preflight_model(model, base_dir, trust_remote_code))
    if Path(checked).is_dir():
        return checked
    if given and "/" not in model:
        raise ModelError(
            f"model folder {model} not found in {Path.cwd()} (a hub id is written "
            "'organisation/name')"
        )
    _check_hub_model(checked, base_dir)
    return checked


def _check_hub_model(repo: str, base_dir: Path | None) -> None:
    """A hub id not in the local cache is asked of the hub once (no retries): a name that is
    neither there nor reachable is one line, not a minute of retried downloads.

    :raises ModelError: when the hub does not give the model.
    """
    if in_hub_cache(repo):
        return
    try:
        from huggingface_hub import model_info

        model_info(repo, timeout=10)
    except Exception as exc:  # offline, unreachable, not found, gated
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        places = " or ".join(
            str(place) for place in [*([base_dir] if base_dir is not None else []), Path.cwd()]
        )
        raise ModelError(
            f"model {repo} is neither a folder in {places} nor in the local hub "
            f"cache, and the hub does not give it: "
            f"{(lines[0] if lines else type(exc).__name__)[:200]}"
        ) from None


def in_hub_cache(repo: str) -> bool:
    """Whether a hub id's model is in the local cache (then it loads without the network)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo, "config.json"), str)
    except Exception:  # not a valid id, no huggingface_hub
        return False
