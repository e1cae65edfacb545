"""The adapter's state on the service and its records in the run directory.

A checkpoint is ``save_state`` on the service (weights and optimizer state) and
``<run>/checkpoints/checkpoint-N/trainer_state.json`` here, naming its ``tinker://`` path; that
file is written last, so a folder without it is a save an interrupt cut short. ``--resume``
opens a training client on the same base model and rank and loads that state with its optimizer.
The final adapter is saved for sampling and its archive downloaded into ``<run>/adapter``.
"""

from __future__ import annotations

import io
import json
import logging
import tarfile
import urllib.request
from pathlib import Path
from typing import Any

from aworld_train.engine import (
    ADAPTER_DIR,
    CHECKPOINTS,
    MODEL_DIR,
    TrainingError,
    merge_adapter,
    resume_checkpoint,
)

from aworld_train_tinker.calls import wait
from aworld_train_tinker.config import TinkerJob

STATE_FILE = "trainer_state.json"
logger = logging.getLogger("aworld_train")


def open_training_client(
    service: Any, job: TinkerJob, resume_from: Path | None, url: str
) -> tuple[Any, int]:
    """A LoRA training client, and the steps already done (those of the run resumed)."""
    # Creating the client has no timeout of its own; `check` reached the service just before.
    client = service.create_lora_training_client(
        base_model=job.base_model, rank=job.lora_rank, seed=job.seed
    )
    if resume_from is None:
        return client, 0
    state = json.loads((resume_checkpoint(resume_from) / STATE_FILE).read_text())
    if (state["base_model"], state["lora_rank"]) != (job.base_model, job.lora_rank):
        raise TrainingError(
            f"run {resume_from} trained {state['base_model']} at rank {state['lora_rank']}; "
            f"this job trains {job.base_model} at rank {job.lora_rank}: resume it with its own job"
        )
    wait(client.load_state_with_optimizer(state["tinker_path"]),
         f"loading {state['tinker_path']}", url, job.request_timeout)  # fmt: skip
    return client, int(state["global_step"])


def save_checkpoint(client: Any, job: TinkerJob, run_dir: Path, step: int, url: str) -> None:
    name = f"checkpoint-{step}"
    saved = wait(client.save_state(name), f"saving {name}", url, job.request_timeout)
    folder = run_dir / CHECKPOINTS / name
    folder.mkdir(parents=True, exist_ok=True)
    state = {
        "global_step": step,
        "tinker_path": saved.path,
        "base_model": job.base_model,
        "lora_rank": job.lora_rank,
    }
    (folder / STATE_FILE).write_text(json.dumps(state, indent=2) + "\n")


def download_adapter(service: Any, client: Any, job: TinkerJob, run_dir: Path, url: str) -> None:
    """The final adapter into ``<run>/adapter`` and, when the base weights are a local folder,
    merged into a loadable ``<run>/model``."""
    saved = wait(client.save_weights_for_sampler("final"), "saving the final adapter", url,
                 job.request_timeout)  # fmt: skip
    rest = service.create_rest_client()
    # The SDK parses tinker://<run>/sampler_weights/<name>; SkyRL tx 0.3 answers
    # tinker://<run>/<name>, which its archive route takes by run and name.
    if "/sampler_weights/" in saved.path:
        archive = rest.get_checkpoint_archive_url_from_tinker_path(saved.path)
    else:
        archive = rest.get_checkpoint_archive_url(client.model_id, saved.path.rsplit("/", 1)[-1])
    link = wait(archive, "asking for the adapter's download link", url, job.request_timeout)
    with urllib.request.urlopen(link.url, timeout=job.request_timeout) as answer:
        payload = answer.read()
    adapter = run_dir / ADAPTER_DIR
    adapter.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:gz") as archive_file:
        archive_file.extractall(adapter, filter="data")
    base = Path(job.base_model)
    if base.is_dir():
        merge_adapter(str(base), adapter, run_dir / MODEL_DIR)
    else:
        logger.info("the base model %s is not a local folder: %s holds the adapter only",
                    job.base_model, adapter)  # fmt: skip
