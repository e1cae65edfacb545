"""The run's model as a Hugging Face folder, converted from VeRL's actor checkpoint.

VeRL saves its actor as FSDP shards: ``<run>/checkpoints/global_step_N/actor/`` holds
``model_world_size_W_rank_R.pt`` for each rank, ``fsdp_config.json`` (the world size) and a
``huggingface/`` folder with the model's config, tokenizer and chat template, but no weights.
:func:`export_model` hands the last complete checkpoint to VeRL's own model merger
(``python -m verl.model_merger merge --backend fsdp``, in a child process), which joins the
shards into ``model.safetensors`` (in bf16, as VeRL's merger always writes) beside the tokenizer.
With LoRA (VeRL's ``lora_rank``) the merger writes the base weights and the adapter apart; the
adapter becomes ``<run>/adapter/`` and ``<run>/model/`` gets the model with it merged in, so it
loads without peft.

The engine calls it when VeRL's training returns; for a run that stopped after its last
checkpoint, call it by hand: ``python -m aworld_train_verl.export RUN_DIR``, the command the
run's export note names (:func:`note_last_checkpoint`), which ``eval`` and ``show`` print.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aworld_train.engine import ADAPTER_DIR, CHECKPOINTS, MODEL_DIR, TrainingError, merge_adapter
from aworld_train.engine.launch import note_export, run_process

from aworld_train_verl.config import SAVED_CONFIG_NAME

# Where the engine points trainer.default_local_dir (config.job_overrides), and the file in it
# that VeRL's trainer writes once a checkpoint is complete.
TRACKER = "latest_checkpointed_iteration.txt"
MERGER_LOG = "verl_model_merger.log"
# VeRL's key that saves the actor's LoRA weights alone, without the model they adapt.
LORA_ONLY_KEY = "actor_rollout_ref.actor.checkpoint.save_lora_only"
# The merger's folder for the adapter it splits off a LoRA model's weights.
_MERGER_ADAPTER = "lora_adapter"
#: The command the run's export note gives for a run that stopped before its export.
EXPORT_COMMAND = "python -m aworld_train_verl.export {run}"


def export_model(run_dir: Path) -> Path:
    """Convert the last complete actor checkpoint of the VeRL run ``run_dir`` into
    ``<run>/model/`` (and, for LoRA, ``<run>/adapter/``), replacing what is there only once the
    new folder is whole.

    Code from the model's folder runs only when the run's config allowed it (the job's
    ``trust_remote_code``, saved as ``actor_rollout_ref.model.trust_remote_code``).

    :returns: the model folder.
    :raises TrainingError: when ``run_dir`` is no VeRL run, saved no checkpoint or its last one
        is incomplete or holds the LoRA adapter alone, or when VeRL's merger fails (naming its log).
    """
    from omegaconf import OmegaConf

    run_dir = Path(run_dir).expanduser().resolve()
    config = _saved_config(run_dir)
    if OmegaConf.select(config, LORA_ONLY_KEY) is True:
        raise TrainingError(
            f"{run_dir}: its checkpoints hold the LoRA adapter alone ({LORA_ONLY_KEY} is true), "
            f"which VeRL's model merger cannot make a model of; train without that key"
        )
    trust_remote_code = (
        OmegaConf.select(config, "actor_rollout_ref.model.trust_remote_code") is True
    )
    actor = last_actor_checkpoint(run_dir)
    with _staging(run_dir) as staging:
        merged = staging / "merged"
        run_process(
            [
                sys.executable,
                "-m",
                "verl.model_merger",
                "merge",
                "--backend",
                "fsdp",
                "--local_dir",
                str(actor),
                "--target_dir",
                str(merged),
                *(["--trust-remote-code"] if trust_remote_code else []),
            ],
            what=f"VeRL's model merger on {actor}",
            log_path=run_dir / MERGER_LOG,
        )
        model = merged
        adapter = merged / _MERGER_ADAPTER
        if adapter.is_dir():
            adapter = adapter.rename(staging / ADAPTER_DIR)
            model = staging / MODEL_DIR
            merge_adapter(str(merged), adapter, model, trust_remote_code=trust_remote_code)
        _add_missing_files(actor / "huggingface", model)
        if adapter.parent == staging:
            _replace(run_dir / ADAPTER_DIR, adapter, staging)
        _replace(run_dir / MODEL_DIR, model, staging)
    return run_dir / MODEL_DIR


def note_last_checkpoint(run_dir: Path) -> None:
    """Name VeRL's last completed checkpoint of ``run_dir`` (``checkpoints/global_step_N``, the
    step its tracker file names) in the run's export note, with :data:`EXPORT_COMMAND`: ``eval``
    and ``show`` then tell a run that stopped before its export how to convert it, in any
    environment. Nothing while VeRL has completed none."""
    tracker = run_dir / CHECKPOINTS / TRACKER
    try:
        step = tracker.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return
    checkpoint = run_dir / CHECKPOINTS / f"global_step_{step}"
    if step.isdigit() and checkpoint.is_dir():
        note_export(run_dir, checkpoint, EXPORT_COMMAND)


def last_actor_checkpoint(run_dir: Path) -> Path:
    """The ``actor`` folder of the last checkpoint VeRL completed in ``run_dir``, checked whole.

    VeRL's trainer names that checkpoint's step in ``checkpoints/latest_checkpointed_iteration.txt``
    after all of it is written, so a save cut short by a crash is never taken for the last one.

    :raises TrainingError: naming the missing file: no checkpoint, or shards missing.
    """
    checkpoints = run_dir / CHECKPOINTS
    tracker = checkpoints / TRACKER
    if not tracker.is_file():
        raise TrainingError(
            f"{run_dir}: VeRL completed no checkpoint ({tracker} is missing), so there is no "
            f"model to convert; VeRL saves one every 'save_steps' steps and at the last step"
        )
    step = tracker.read_text(encoding="utf-8").strip()
    actor = checkpoints / f"global_step_{step}" / "actor"
    if not step.isdigit() or not actor.is_dir():
        raise TrainingError(f"{tracker} names step {step!r}, but {actor} does not exist")
    _check_complete(actor)
    return actor


def _check_complete(actor: Path) -> None:
    """Every file VeRL's FSDP merger reads: the world size, one model shard per rank, and the
    model's config.

    :raises TrainingError: naming the first file that is missing or empty.
    """
    fsdp_config = actor / "fsdp_config.json"
    try:
        world_size = int(json.loads(fsdp_config.read_text(encoding="utf-8"))["world_size"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise TrainingError(
            f"{actor}: incomplete VeRL FSDP checkpoint: {fsdp_config.name} is missing or has no "
            f"world_size ({type(error).__name__})"
        ) from error
    needed = [actor / f"model_world_size_{world_size}_rank_{rank}.pt" for rank in range(world_size)]
    needed.append(actor / "huggingface" / "config.json")
    for path in needed:
        if not path.is_file() or path.stat().st_size == 0:
            hint = (
                "; VeRL saves the model only when actor.checkpoint.save_contents names 'model'"
                if path.suffix == ".pt"
                else ""
            )
            raise TrainingError(
                f"{actor}: incomplete VeRL checkpoint: {path.name} is missing or empty{hint}"
            )


def _saved_config(run_dir: Path) -> Any:
    """The run's saved VeRL config, unresolved (only plain values are read from it).

    :raises TrainingError: when ``run_dir`` has no saved VeRL config.
    """
    from omegaconf import OmegaConf

    path = run_dir / f"{SAVED_CONFIG_NAME}.yaml"
    if not path.is_file():
        raise TrainingError(f"{run_dir}: not a run of the verl engine ({path.name} is missing)")
    return OmegaConf.load(path)


def _add_missing_files(source: Path, model: Path) -> None:
    """Copy what the checkpoint keeps beside the model's config (tokenizer files, chat template,
    generation config, a model's own code) and the new folder lacks, so the model is used as it
    was trained whatever the merger re-saves."""
    for path in source.iterdir():
        if path.is_file() and not (model / path.name).exists():
            shutil.copy2(path, model / path.name)


@contextmanager
def _staging(run_dir: Path) -> Iterator[Path]:
    """A scratch folder in ``run_dir`` (so a rename into place stays on one file system),
    removed on every way out."""
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=run_dir))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _replace(target: Path, new: Path, staging: Path) -> None:
    """Put ``new`` at ``target``: a folder already there moves into ``staging`` first (where it
    is removed with it), since a rename cannot replace a folder that holds files."""
    if target.exists():
        target.rename(staging / f"previous-{target.name}")
    new.rename(target)


def main(argv: list[str] | None = None) -> int:
    """``python -m aworld_train_verl.export RUN_DIR``: convert a VeRL run's last checkpoint."""
    from aworld_train.engine import AWorldTrainError

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m aworld_train_verl.export RUN_DIR", file=sys.stderr)
        return 2
    try:
        print(export_model(Path(args[0])))
    except AWorldTrainError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
