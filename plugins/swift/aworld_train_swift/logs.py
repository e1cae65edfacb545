"""ms-swift's own output goes to the run's ``swift.log`` while it trains, not to the terminal.

The terminal shows aworld-train's progress. ms-swift logs its INFO lines and warnings (many of
them repeated at each step) through the ``swift`` logger, transformers, ModelScope and Python's
``warnings`` add theirs, and swift's printer callback prints every logged step's dict (or
writes it under a tqdm bar). For the duration of training all of these go to the log file;
``logging.jsonl`` in the output folder keeps receiving every step, as swift writes it.
"""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from aworld_train.engine.hf import quiet_progress_bars
from aworld_train.engine.launch import SecretFilter

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

# Where ms-swift's log lines go inside the run directory.
LOG_FILE = "swift.log"
# The loggers whose lines belong in swift.log: swift's, the libraries it drives, and the one
# logging.captureWarnings sends Python warnings to.
_LOGGERS = ("swift", "modelscope", "transformers", "py.warnings")


@contextmanager
def log_to_file(path: Path) -> Iterator[None]:
    """Send ms-swift's log lines and Python's warnings to ``path`` within the block."""
    import swift.utils.logger  # noqa: F401  (creates swift's logger with a terminal handler)

    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s:%(name)s] %(message)s"))
    handler.addFilter(SecretFilter())
    saved = []
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.handlers[:], logger.propagate, logger.level))
        logger.handlers, logger.propagate = [handler], False
    # swift's own rule: its INFO lines from the first process of a node, errors from the rest.
    logging.getLogger("swift").setLevel(logging.INFO if _main_process() else logging.ERROR)
    logging.captureWarnings(True)
    try:
        yield
    finally:
        logging.captureWarnings(False)
        for logger, handlers, propagate, level in saved:
            logger.handlers, logger.propagate = handlers, propagate
            logger.setLevel(level)
        handler.close()


def run_log(run_dir: Path) -> Any:
    """:func:`log_to_file` for the run's ``swift.log``."""
    return log_to_file(run_dir / LOG_FILE)


@contextmanager
def output_to_log(path: Path) -> Iterator[None]:
    """:func:`log_to_file`, and swift's per-step dicts too, for training; no progress bars of
    the libraries (model loading, dataset preparation, saving)."""
    from transformers import trainer as hf_trainer
    from transformers.utils import logging as hf_logging

    # The trainer adds one of these two by name when it is built; swift's patcher, imported by
    # steps_to_log, set both to its own.
    printer = steps_to_log()
    printers = hf_trainer.PrinterCallback, hf_trainer.DEFAULT_PROGRESS_CALLBACK
    hf_trainer.PrinterCallback = hf_trainer.DEFAULT_PROGRESS_CALLBACK = printer
    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        with quiet_progress_bars(), log_to_file(path):
            yield
    finally:
        hf_trainer.PrinterCallback, hf_trainer.DEFAULT_PROGRESS_CALLBACK = printers
        if bar:
            hf_logging.enable_progress_bar()


def steps_to_log() -> type:
    """swift's printer callback, logging each step's dict instead of printing it."""
    from swift.trainers.patcher import PrinterCallbackNew, add_train_message
    from swift.utils import append_to_jsonl

    class StepsToLog(PrinterCallbackNew):  # type: ignore[misc, valid-type]
        """Adds swift's speed and memory figures to each step, as its printer does, appends
        it to ``logging.jsonl`` and logs it to ``swift.log``."""

        def on_log(
            self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any
        ) -> None:
            if logs is None:
                return
            add_train_message(logs, state, self.start_time, self.start_step)
            if state.is_world_process_zero:
                append_to_jsonl(os.path.join(args.output_dir, "logging.jsonl"), logs)
                logging.getLogger("swift").info("%s", logs)

    return StepsToLog


def _main_process() -> bool:
    """Whether this is the first process of its node (or the only one), as swift tells it."""
    return os.environ.get("LOCAL_RANK", "0").strip() in ("", "-1", "0")
