"""The common settings module: devices, precision, trackers and the engines' own keys."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from aworld_train.config import COMMON_KEYS
from aworld_train.engine_keys import ENGINE_KEYS, common_name
from aworld_train.errors import ConfigError
from aworld_train.run.trackers import check_trackers, tracker_environment
from aworld_train.settings import Lora, describe_device, resolve_precision


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


def test_engine_keys_name_common_keys_only() -> None:
    assert set(ENGINE_KEYS) == {"trl", "swift", "verl"}
    for engine, keys in ENGINE_KEYS.items():
        assert set(keys) <= set(COMMON_KEYS), engine
        assert all(isinstance(own, tuple) and own and all(own) for own in keys.values()), engine


def test_an_engine_key_is_named_by_its_common_key() -> None:
    assert common_name("trl", "beta") == "kl_coef"
    assert common_name("trl", "fp16") == "precision", "a second own key of one setting"
    assert common_name("verl", "actor_rollout_ref.actor.kl_loss_coef") == "kl_coef"
    assert common_name("trl", "num_iterations") is None
    assert common_name("trl", "num_generations") == "num_generations", "an older common key"
    assert common_name("swift", "max_length") == "max_prompt_length"
    assert common_name("verl", "critic.ppo_mini_batch_size") == "batch_size"
    assert common_name("verl", "actor_rollout_ref.model.path") == "model"
    assert common_name("verl", "actor_rollout_ref.actor.kl_loss_coef_extra") is None
    mixed = "actor_rollout_ref.actor.fsdp_config.mixed_precision"
    assert common_name("verl", f"{ENGINE_KEYS['verl']['precision'][0]}.inner") == "precision"
    assert common_name("verl", f"{mixed}x") != "precision", "a longer name is another key"
    assert common_name("mine", "beta") is None


def test_the_settings_guide_explains_every_common_key() -> None:
    from aworld_train.config import COMMON_KEYS

    readme = (Path(__file__).parent.parent / "docs" / "settings.md").read_text(encoding="utf-8")
    explained = re.findall(r"^\| `(\w+)`", readme, flags=re.MULTILINE)
    documented = {
        name
        for row in re.findall(r"^\| ((?:`\w+`(?:, )?)+) \|", readme, flags=re.MULTILINE)
        for name in re.findall(r"`(\w+)`", row)
    }
    missing = [key for key in COMMON_KEYS if key not in documented]
    assert not missing, f"docs/settings.md does not explain {missing}"
    table = readme[readme.index("The engines' own keys for each setting") :]
    table = table[: table.index("\n\n", table.index("| key | TRL"))]
    rows = re.findall(r"^\| `(\w+)`", table, flags=re.MULTILINE)
    mapped = [key for engine in ENGINE_KEYS.values() for key in engine if key not in rows]
    assert not mapped, f"docs/settings.md has no row of engine keys for {mapped}"
    assert all(explained.count(key) >= 2 for key in rows[:12]), "the new common keys' rows"
