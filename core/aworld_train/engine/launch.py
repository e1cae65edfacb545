"""The engine SDK's launch tier: for engines that start processes — the worker-side protocol
(rendezvous, the rewards loaded in each worker, what a worker reports), a command run in a
process group of its own, a disk cache for what is read from the training library's code, the
secrets redacted from what those processes print, and the export note of a library that saves
checkpoints eval cannot load as they are.
"""

from __future__ import annotations

from aworld_train.cache import cached
from aworld_train.isolation import call_isolated
from aworld_train.launch.launcher import run_process
from aworld_train.launch.workers import (
    emit,
    finish_distributed,
    join_timeout,
    load_rewards,
    rendezvous,
    reward_references,
    run_workers,
    scoped_environment,
)
from aworld_train.run.export import note_export
from aworld_train.run.redaction import SecretFilter, redact_text, remember_secrets

__all__ = [
    "call_isolated",
    "run_workers",
    "rendezvous",
    "emit",
    "finish_distributed",
    "join_timeout",
    "load_rewards",
    "reward_references",
    "scoped_environment",
    "run_process",
    "cached",
    "remember_secrets",
    "redact_text",
    "SecretFilter",
    "note_export",
]
