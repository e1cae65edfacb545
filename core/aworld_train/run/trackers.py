"""The trackers a run logs to (the common ``report_to``): whether each can log here, which ones
an engine's settings row names, and the environment that keeps each tracker's files inside the
run directory. Packages are found here, never imported.
"""

from __future__ import annotations

import importlib.util
import netrc
import os
from pathlib import Path
from typing import TYPE_CHECKING

from aworld_train.errors import ConfigError
from aworld_train.job.settings import TRACKERS

if TYPE_CHECKING:
    from aworld_train.job.settings import Setting

# The package each tracker needs, as pip names it.
_TRACKER_PACKAGES = {
    "tensorboard": "tensorboard",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "swanlab": "swanlab",
    "trackio": "trackio",
}
_WANDB_HOST = "api.wandb.ai"


def check_trackers(report_to: tuple[str, ...] | list[str], key: str = "report_to") -> None:
    """Each tracker in ``report_to`` can log: it is one of :data:`TRACKERS`, its package is
    installed and, for wandb, a key or an offline mode is set. Cheap: packages are found, not
    imported.

    :param key: the config key the names came from, as the error names it (``report_to``,
        ``trl.report_to``, ``verl.trainer.logger``).
    :raises ConfigError: one line naming the key, the tracker and the package to install, how
        to give wandb a key, or, for ``all`` or a name AWorld Train does not know, the trackers
        to name instead.
    """
    for tracker in report_to:
        package = _TRACKER_PACKAGES.get(tracker)
        if tracker == "all":
            raise ConfigError(
                f"config {key}: 'all' turns on every tracker installed here, with their files "
                f"outside the run directory: name the trackers ({', '.join(TRACKERS)})"
            )
        if package is None:
            raise ConfigError(
                f"config {key}: {tracker} is not a tracker AWorld Train supports: name the "
                f"trackers among {', '.join(TRACKERS)}"
            )
        if importlib.util.find_spec(package) is None:
            raise ConfigError(f"config {key}: {tracker} is not installed: pip install {package}")
        if tracker == "wandb" and not _wandb_can_log():
            raise ConfigError(
                f"config {key}: wandb has no API key: set WANDB_API_KEY, run `wandb login`, "
                "or set WANDB_MODE=offline to keep the logs in the run directory only"
            )


# The names an engine's own logger key takes that are not trackers (VeRL's trainer.logger),
# and the name that means none.
NOT_TRACKERS = ("console", "file", "none")


def effective_trackers(setting: Setting) -> tuple[str, ...]:
    """The trackers the engine will log to, from its ``report_to`` row: the names in its value
    and in its own key's value (VeRL's row lists only the trackers it knows, its
    ``trainer.logger`` all it will use), without VeRL's ``console`` and ``file`` and ``none``;
    repeats dropped."""
    names: list[str] = []
    for value in (setting.value, setting.engine_value):
        items = (
            [value]
            if isinstance(value, str)
            else (value if isinstance(value, (list, tuple)) else [])
        )
        names += [str(item) for item in items if str(item) not in NOT_TRACKERS]
    return tuple(dict.fromkeys(names))


def _wandb_can_log() -> bool:
    """A key in the environment or in ``~/.netrc`` (where ``wandb login`` writes it), or a mode
    that needs none."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_MODE") in ("offline", "disabled"):
        return True
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(_WANDB_HOST) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def tracker_environment(report_to: tuple[str, ...] | list[str], run_dir: Path) -> dict[str, str]:
    """The environment variables that keep each tracker's files inside the run directory.

    An MLflow tracking URI the user set is kept (a tracking server); otherwise MLflow writes to
    ``<run>/mlruns``. TensorBoard needs none: engines point their logging folder at
    ``<run>/tensorboard``.
    """
    run_dir = Path(run_dir).absolute()
    environment: dict[str, str] = {}
    if "wandb" in report_to:
        environment["WANDB_DIR"] = str(run_dir)
    if "mlflow" in report_to:
        environment["MLFLOW_TRACKING_URI"] = os.environ.get(
            "MLFLOW_TRACKING_URI", f"file:{run_dir / 'mlruns'}"
        )
    if "swanlab" in report_to:
        environment["SWANLAB_LOG_DIR"] = str(run_dir / "swanlog")
    if "trackio" in report_to:
        environment["TRACKIO_DIR"] = str(run_dir / "trackio")
    return environment
