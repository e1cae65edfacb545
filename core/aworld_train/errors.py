"""The one error family every user mistake raises.

Each error says what is wrong, where (file, row, key, plugin) and how to fix it, in one line:
the CLI prints ``str(error)`` alone and exits 2 (1 for a :class:`TrainingCrash`, an engine that
failed while it trained).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AWorldTrainError(Exception):
    """Base of every error aworld-train raises for bad input or a broken plugin.

    Not a ``ValueError``: an ``except ValueError`` around a library call must not swallow a bad
    job or a missing GPU. The surface shared with AWorld Train (``AgentTrainer(...)``,
    ``train()``, ``inference()``, ``register_processor``, ``unregister_processor``) raises its
    refusals as ``ValueError`` subclasses of these types, as AWorld Train does."""


class JobError(AWorldTrainError):
    """The job file or a CLI flag is wrong."""


class AgentError(AWorldTrainError):
    """The agent cannot be read or is not supported by the engine."""


class ModelError(AgentError):
    """The model folder is missing, damaged or needs code from its folder, or the prompts do not
    fit its positions."""


class DatasetError(AWorldTrainError):
    """A dataset is missing, unreadable, empty, or has a bad row."""


class RewardError(AWorldTrainError):
    """A reward function cannot be found, has the wrong signature, or fails on a sample row."""


class ConfigError(AWorldTrainError):
    """A config key is unknown or has a value of the wrong type."""


class PluginError(AWorldTrainError):
    """An engine or extension plugin is unknown, fails to load, or breaks its contract."""


class RunDirectoryError(AWorldTrainError):
    """The run path cannot be used, or a run to resume does not exist."""


class TrainingError(AWorldTrainError):
    """The engine could not train (no GPU where one is needed, a failed launch, ...)."""


class TrainingCrash(TrainingError):
    """An exception inside the engine (or a plugin wrapping it) ended training: not a mistake
    the checks could name, so the CLI exits 1, not 2.

    Its message is the one line the CLI prints: what raised, the exception's type and message,
    where it was raised, and the run's log holding the traceback. The exception itself is its
    ``__cause__``.
    """


class CheckCrash(AWorldTrainError):
    """An exception that is not an ``AWorldTrainError`` ended the checks outside any hook (a
    hook's is a :class:`PluginError` naming the plugin): one line naming the exception and
    where it was raised, the exception itself its ``__cause__``."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped by SIGINT or SIGTERM.

    Not a user mistake, so not an ``AWorldTrainError``: a ``KeyboardInterrupt``, which engine or
    reward code that catches ``Exception`` cannot swallow.
    """


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest choice, or ``""`` when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
