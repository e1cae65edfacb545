"""The common settings through ``aworld-train check``: the effective-settings table, the
trackers check and the warnings for other engines' sections."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ARITHMETIC, ENV_VARS, lay_out_engine, write_jsonl, write_model_folder

EXECUTABLE = Path(sys.executable).with_name("aworld-train")
HUB_TOKEN = "hf_planted_settings_8888"

# The toy engine, reporting its settings; one of them shows the token in the environment.
REPORTING = """
import os

from aworld_train.engine import Setting, hookimpl
from aworld_train.engine.settings import describe_device, resolve_precision
from aworld_train_toy.engine import check_agent, check_config, check_dataset, check_reward, train


@hookimpl
def effective_settings(ctx):
    common = ctx.config
    return [
        Setting("device", describe_device(False), "use_cpu", True, "default"),
        Setting("precision", resolve_precision(common.precision, False), "dtype", "float32",
                "default"),
        Setting("kl_coef", common.kl_coef, "beta", common.kl_coef, "job"),
        Setting("lora", common.lora.to_dict(), "peft", "[LoraConfig]", "job"),
        Setting("hub", None, "hub_token", os.environ["HF_TOKEN"], "default"),
    ]
"""


def write_job(folder: Path, config: dict[str, Any], engine: str = "toy") -> Path:
    """A valid job on ``engine`` with ``config``."""
    write_jsonl(folder / "train.jsonl", ARITHMETIC)
    job = {
        "engine": engine,
        "agent": {"name": "adder"},
        "train_dataset": "train.jsonl",
        "reward": "exact_match",
        "config": {"max_steps": 2, "batch_size": 4, **config},
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def aworld_train(
    *args: str | Path, site: Path | None = None, **extra: str
) -> subprocess.CompletedProcess[str]:
    # Wide enough that rich keeps each table row on one line.
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS} | {"COLUMNS": "200"} | extra
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(site), env.get("PYTHONPATH"))))
    return subprocess.run(
        [str(EXECUTABLE), *map(str, args)], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.slow
def test_check_prints_the_effective_settings_after_the_checks(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    lay_out_engine(site, "reporting", REPORTING)
    job = write_job(tmp_path, {"kl_coef": 0.0, "lora": {"rank": 8}}, engine="reporting")
    result = aworld_train("check", job, site=site, HF_TOKEN=HUB_TOKEN)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("checks") < out.index("effective settings") < out.index("all checks passed")
    table = out[out.index("effective settings") :]
    for header in ("setting", "value", "reporting key", "reporting value", "from"):
        assert header in table
    lines = {line.split()[1]: line for line in table.splitlines() if line.startswith("│")}
    assert [cell.strip() for cell in lines["device"].split("│")[1:6]] == [
        "device",
        "cpu",
        "use_cpu",
        "True",
        "default",
    ]
    assert "rank 8, alpha 16, dropout 0, target_modules all-linear" in lines["lora"]
    assert "[LoraConfig]" in lines["lora"], "values are text, not rich markup"
    assert " 0 " in lines["kl_coef"] and " beta " in lines["kl_coef"]
    assert HUB_TOKEN not in out + result.stderr, "a secret in a setting is redacted"
    assert "hub_token" in lines["hub"]


@pytest.mark.slow
def test_an_engine_that_reports_no_settings_prints_no_table(tmp_path: Path) -> None:
    result = aworld_train("check", write_job(tmp_path, {"kl_coef": 0.0}))
    assert result.returncode == 0, result.stderr
    assert "effective settings" not in result.stdout
    assert result.stderr == ""


# Engines beside the toy one that declare their settings, as an installed engine does: "flat"
# names its keys at the top of its section, "nested" under dotted paths.
DECLARING = """
from aworld_train.engine import EngineKey, SettingsDeclaration
from aworld_train_toy.engine import check_agent, check_config, check_dataset, check_reward, train

SETTINGS = SettingsDeclaration("{name}", ({keys},))
"""
FLAT = DECLARING.format(
    name="Flat",
    keys="""EngineKey("precision", ("bf16", "fp16")), EngineKey("kl_coef", ("beta",)),
    EngineKey("learning_rate", ("learning_rate",)), EngineKey("max_steps", ("max_steps",))""",
)
NESTED = DECLARING.format(
    name="Nested",
    keys="""EngineKey("kl_coef", ("actor.kl_loss_coef", "actor.use_kl_loss")),
    EngineKey("eval_steps", ("trainer.test_freq",)),
    EngineKey("num_epochs", ("trainer.total_epochs",))""",
)


def declaring_engines(tmp_path: Path) -> Path:
    """A site with the engines ``flat`` and ``nested`` installed."""
    site = tmp_path / "site"
    site.mkdir()
    lay_out_engine(site, "flat", FLAT)
    lay_out_engine(site, "nested", NESTED)
    return site


@pytest.mark.slow
def test_other_engines_sections_warn_one_line_per_key(tmp_path: Path) -> None:
    job = write_job(
        tmp_path,
        {
            "flat": {"beta": 0.0, "fp16": True, "num_iterations": 4},
            "nested": {
                "actor": {"kl_loss_coef": 0.0, "ppo_epochs": 2},
                "trainer.test_freq": 5,
            },
            "toy": {"temperature": 1.0},
        },
    )
    result = aworld_train("check", job, site=declaring_engines(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "config flat.beta: no effect on engine toy (only the flat engine reads the flat "
        "section); the common key kl_coef carries it to every engine",
        "config flat.fp16: no effect on engine toy (only the flat engine reads the flat "
        "section); the common key precision carries it to every engine",
        "config flat.num_iterations: no effect on engine toy (only the flat engine reads the "
        "flat section)",
        "config nested.actor.kl_loss_coef: no effect on engine toy (only the nested engine "
        "reads the nested section); the common key kl_coef carries it to every engine",
        "config nested.actor.ppo_epochs: no effect on engine toy (only the nested engine reads "
        "the nested section)",
        "config nested.trainer.test_freq: no effect on engine toy (only the nested engine "
        "reads the nested section); the common key eval_steps carries it to every engine",
    ]
    assert "all checks passed" in result.stdout


@pytest.mark.slow
def test_a_section_of_an_engine_not_installed_names_no_common_key(tmp_path: Path) -> None:
    # Without the engine, nothing says which of its keys a common key carries.
    result = aworld_train("check", write_job(tmp_path, {"flat": {"beta": 0.0}}))
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "config flat.beta: no effect on engine toy (only the flat engine reads the flat section)"
    ]


def test_a_missing_tracker_fails_check_in_one_line(tmp_path: Path) -> None:
    result = aworld_train("check", write_job(tmp_path, {"report_to": ["swanlab"]}))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: config report_to: swanlab is not installed: pip install swanlab"
    ]


@pytest.mark.slow
def test_an_installed_tracker_passes_check(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "tensorboard").mkdir(parents=True)
    (site / "tensorboard" / "__init__.py").write_text("")
    result = aworld_train("check", write_job(tmp_path, {"report_to": "tensorboard"}), site=site)
    assert result.returncode == 0, result.stderr
    assert "tensorboard: installed" in result.stdout


# An engine whose own section chooses its trackers, reported as the engines do: TRL and
# ms-swift list them under report_to, VeRL lists the trackers it knows and keeps its console
# and file loggers in its own key's value.
SECTION_TRACKERS = """
from aworld_train.engine import Setting, hookimpl
from aworld_train.engine.settings import describe_device, resolve_precision
from aworld_train_toy.engine import check_agent, check_dataset, check_reward, train


@hookimpl
def check_config(config, agent, dataset, reward, ctx):
    return config  # its section is its own trackers only


@hookimpl
def effective_settings(ctx):
    own = ctx.config.sections.get("tracking", {})
    loggers = own.get("logger")
    if loggers is not None:  # VeRL's way
        row = Setting("report_to", [n for n in loggers if n in ("tensorboard", "wandb")],
                      "trainer.logger", loggers, "section")
    else:
        names = own.get("report_to", [])
        row = Setting("report_to", names, "report_to", names or "none",
                      "section" if names else "default")
    return [Setting("device", describe_device(False), "use_cpu", True, "default"),
            Setting("precision", resolve_precision(ctx.config.precision, False), "dtype",
                    "float32", "default"), row]
"""


def tracking_check(
    tmp_path: Path, section: dict[str, Any], **extra: str
) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    (site / "tensorboard").mkdir(parents=True)
    (site / "tensorboard" / "__init__.py").write_text("")
    lay_out_engine(site, "tracking", SECTION_TRACKERS)
    job = write_job(tmp_path, {"tracking": section}, engine="tracking")
    return aworld_train("check", job, site=site, **extra)


@pytest.mark.slow
def test_trackers_an_engine_section_names_are_checked_like_report_to(tmp_path: Path) -> None:
    result = tracking_check(tmp_path, {"report_to": ["comet_ml"]})
    assert result.returncode == 2, result.stdout
    assert result.stderr.strip().splitlines() == [
        "error: config tracking.report_to: comet_ml is not a tracker AWorld Train supports: "
        "name the trackers among tensorboard, wandb, mlflow, swanlab, trackio"
    ]


@pytest.mark.slow
def test_report_to_all_is_refused_naming_the_section_key(tmp_path: Path) -> None:
    result = tracking_check(tmp_path, {"report_to": ["all"]})
    assert result.returncode == 2, result.stdout
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: config tracking.report_to: 'all' ")
    assert "name the trackers" in line


@pytest.mark.slow
def test_a_wandb_chosen_in_a_section_needs_a_key(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "wandb").mkdir(parents=True)
    (site / "wandb" / "__init__.py").write_text("")
    result = tracking_check(
        tmp_path, {"report_to": ["wandb"]}, NETRC=str(tmp_path / "none"), HOME=str(tmp_path)
    )
    assert result.returncode == 2, result.stdout
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: config tracking.report_to: wandb has no API key")


@pytest.mark.slow
def test_an_engine_s_own_loggers_are_checked_without_console_and_file(tmp_path: Path) -> None:
    result = tracking_check(tmp_path, {"logger": ["console", "comet"]})
    assert result.returncode == 2, result.stdout
    assert result.stderr.strip().splitlines() == [
        "error: config tracking.trainer.logger: comet is not a tracker AWorld Train supports: "
        "name the trackers among tensorboard, wandb, mlflow, swanlab, trackio"
    ]
    again = tracking_check(tmp_path / "again", {"logger": ["console", "file", "tensorboard"]})
    assert again.returncode == 0, again.stderr
    assert "tensorboard (from tracking.trainer.logger): installed" in again.stdout
    quiet = tracking_check(tmp_path / "quiet", {"logger": ["console", "file"]})
    assert quiet.returncode == 0, quiet.stderr


def test_eval_keys_without_a_test_dataset_fail_check_in_one_line(tmp_path: Path) -> None:
    for key in ("eval_steps", "eval_limit"):
        result = aworld_train("check", write_job(tmp_path, {key: 2}))
        assert result.returncode == 2, result.stdout
        assert result.stderr.strip().splitlines() == [
            f"error: config {key}: the job has no test_dataset to evaluate; add one or remove {key}"
        ]


@pytest.mark.slow
def test_eval_steps_with_a_test_dataset_passes(tmp_path: Path) -> None:
    job = write_job(tmp_path, {"eval_steps": 2})
    result = aworld_train("check", job, "--test-dataset", tmp_path / "train.jsonl")
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_older_common_keys_in_another_section_are_named(tmp_path: Path) -> None:
    job = write_job(tmp_path, {})
    result = aworld_train(
        "check",
        job,
        "-o",
        "flat.learning_rate=0.1",
        "-o",
        "flat.max_steps=3",
        "-o",
        "nested.trainer.total_epochs=2",
        site=declaring_engines(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "config flat.learning_rate: no effect on engine toy (only the flat engine reads the "
        "flat section); the common key learning_rate carries it to every engine",
        "config flat.max_steps: no effect on engine toy (only the flat engine reads the flat "
        "section); the common key max_steps carries it to every engine",
        "config nested.trainer.total_epochs: no effect on engine toy (only the nested engine "
        "reads the nested section); the common key num_epochs carries it to every engine",
    ]


LONG_KEY = "actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype.and_then_some_more"
WIDE = """
from aworld_train.engine import Setting, hookimpl
from aworld_train.engine.settings import describe_device, resolve_precision
from aworld_train_toy.engine import check_agent, check_config, check_dataset, check_reward, train


@hookimpl
def effective_settings(ctx):
    return [Setting("device", describe_device(False), "use_cpu", True, "default"),
            Setting("precision", "fp32", "{key}", "float32_and_a_long_value_too", "default")]
""".replace("{key}", LONG_KEY)


@pytest.mark.slow
def test_the_tables_are_not_cut_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    lay_out_engine(site, "wide", WIDE)
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS and k != "COLUMNS"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))
    result = subprocess.run(
        [str(EXECUTABLE), "check", write_job(tmp_path, {}, engine="wide")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    [row] = [line for line in result.stdout.splitlines() if line.startswith("│ precision")]
    assert LONG_KEY in row and "float32_and_a_long_value_too" in row, result.stdout
    assert "…" not in result.stdout


@pytest.mark.slow
def test_lora_target_modules_are_not_compared_without_torch(tmp_path: Path) -> None:
    # The core's environment has no torch: the row says the check was skipped (tests/test_model.py
    # runs it where torch is installed).
    model = write_model_folder(tmp_path / "model")
    job = write_job(
        tmp_path,
        {"model": str(model), "lora": {"rank": 8, "target_modules": ["nonexistent_module"]}},
    )
    result = aworld_train("check", job)
    assert result.returncode == 0, result.stderr
    [row] = [line for line in result.stdout.splitlines() if line.startswith("│ lora")]
    assert "not checked: torch and transformers are not installed here" in row
