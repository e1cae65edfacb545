"""The common settings module: devices, precision, trackers and the engines' own keys."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from aworld_train.job.config import COMMON_KEYS
from aworld_train.errors import ConfigError
from aworld_train.job.declaration import EngineKey, SettingsDeclaration
from aworld_train.job.settings import Lora, describe_device, resolve_precision
from aworld_train.run.trackers import check_trackers, tracker_environment


def test_lora_fills_alpha_and_writes_plain_data() -> None:
    lora = Lora(rank=4)
    assert lora.alpha == 8.0 and lora.dropout == 0.0 and lora.target_modules == "all-linear"
    assert Lora(rank=4, alpha=4.0, target_modules=("q_proj", "v_proj")).to_dict() == {
        "rank": 4,
        "alpha": 4.0,
        "dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"],
    }


def test_the_cpu_needs_no_torch() -> None:
    # The core's environment has no torch: asking for the CPU must not import it.
    assert "torch" not in sys.modules
    assert describe_device(False) == "cpu"
    assert resolve_precision("auto", use_gpu=False) == "fp32"
    assert resolve_precision("bf16", use_gpu=False) == "bf16"
    assert "torch" not in sys.modules


@pytest.fixture
def no_wandb_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An environment with a ``wandb`` package and no key anywhere; returns the netrc path."""
    package = tmp_path / "site" / "wandb"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    for name in ("WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(name, raising=False)
    netrc = tmp_path / "netrc"
    netrc.write_text("machine example.com login me password secret\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    return netrc


def test_a_missing_tracker_names_the_package_to_install() -> None:
    with pytest.raises(ConfigError) as error:
        check_trackers(("swanlab",))
    assert str(error.value) == "config report_to: swanlab is not installed: pip install swanlab"
    check_trackers(())


def test_wandb_without_a_key_says_how_to_give_one(
    no_wandb_key: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ConfigError, match="wandb has no API key.*WANDB_MODE=offline"):
        check_trackers(("wandb",))
    monkeypatch.setenv("WANDB_MODE", "offline")
    check_trackers(("wandb",))
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    check_trackers(("wandb",))


def test_a_wandb_login_counts_as_a_key(no_wandb_key: Path) -> None:
    no_wandb_key.write_text("machine api.wandb.ai login user password " + "k" * 40 + "\n")
    check_trackers(("wandb",))


def test_tracker_files_stay_in_the_run_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    run = tmp_path / "run"
    environment = tracker_environment(("wandb", "mlflow", "swanlab"), run)
    assert environment == {
        "WANDB_DIR": str(run),
        "MLFLOW_TRACKING_URI": f"file:{run}/mlruns",
        "SWANLAB_LOG_DIR": str(run / "swanlog"),
    }
    assert tracker_environment(("tensorboard",), run) == {}
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    assert tracker_environment(["mlflow"], run) == {
        "MLFLOW_TRACKING_URI": "http://mlflow.example:5000"
    }, "the user's server is kept"


MIXED = "actor.fsdp.mixed_precision"
DECLARED = SettingsDeclaration(
    "Mine",
    (
        EngineKey("precision", (f"{MIXED}.param_dtype", "fp16")),
        EngineKey("kl_coef", ("beta",), float, float, 0.04),
        EngineKey("eval_limit"),
    ),
)


def test_an_engine_key_is_named_by_its_common_key() -> None:
    assert DECLARED.common_name("beta") == "kl_coef"
    assert DECLARED.common_name("fp16") == "precision", "a second own key of one setting"
    assert DECLARED.common_name(f"{MIXED}.param_dtype.inner") == "precision"
    assert DECLARED.common_name(f"{MIXED}.param_dtypex") is None, "a longer name is another key"
    assert DECLARED.common_name("num_iterations") is None
    assert DECLARED.dotted and not SettingsDeclaration("x", (EngineKey("a", ("b",)),)).dotted


def test_a_row_says_where_its_value_came_from() -> None:
    from aworld_train.job.common_keys import CommonKeys

    job = DECLARED.row(CommonKeys("mine", {}), "kl_coef", 0)
    assert (job.value, job.engine_key, job.engine_value, job.source) == (0, "beta", 0.0, "job")
    section = DECLARED.row(CommonKeys("mine", {"beta": 0.1}), "kl_coef", None)
    assert (section.value, section.source) == (0.1, "section")
    default = DECLARED.row(CommonKeys("mine", {}), "kl_coef", None)
    assert (default.value, default.engine_value, default.source) == (0.04, 0.04, "default")
    with pytest.raises(ConfigError, match=r"^config kl_coef: 0.0 and mine.beta: 0.1 disagree"):
        DECLARED.row(CommonKeys("mine", {"beta": 0.1}), "kl_coef", 0.0)


def test_the_settings_guide_explains_every_common_key() -> None:

    readme = (Path(__file__).parent.parent / "docs" / "settings.md").read_text(encoding="utf-8")
    explained = re.findall(r"^\| `(\w+)`", readme, flags=re.MULTILINE)
    documented = {
        name
        for row in re.findall(r"^\| ((?:`\w+`(?:, )?)+) \|", readme, flags=re.MULTILINE)
        for name in re.findall(r"`(\w+)`", row)
    }
    missing = [key for key in COMMON_KEYS if key not in documented]
    assert not missing, f"docs/settings.md does not explain {missing}"
    tables = re.findall(r"<!-- settings: \w+ -->\n(.*?)<!-- /settings -->", readme, flags=re.S)
    assert len(tables) == 4, "one generated table per shipped engine"
    rows = re.findall(r"^\| `(\w+)`", tables[0], flags=re.MULTILINE)
    assert all(explained.count(key) >= 2 for key in rows[:12]), "the new common keys' rows"
