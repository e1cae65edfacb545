"""The common settings through ``aworld-train check``: the effective-settings table, the
trackers check and the warnings for other engines' sections."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from helpers import ARITHMETIC, ENV_VARS, lay_out_engine, write_jsonl

EXECUTABLE = Path(sys.executable).with_name("aworld-train")
HUB_TOKEN = "hf_planted_settings_8888"

# The toy engine, reporting its settings; one of them shows the token in the environment.
REPORTING = '''
import os

from aworld_train.engine import Setting, describe_device, hookimpl, resolve_precision
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
'''


def write_job(folder: Path, config: dict[str, Any], engine: str = "toy") -> Path:
    """A valid job on ``engine`` with ``config``."""
    write_jsonl(folder / "train.jsonl", ARITHMETIC)
    job = {"engine": engine, "agent": {"name": "adder"}, "train_dataset": "train.jsonl",
           "reward": "exact_match", "config": {"max_steps": 2, "batch_size": 4, **config}}
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def aworld_train(*args: str | Path, site: Path | None = None,
                 **extra: str) -> subprocess.CompletedProcess[str]:
    # Wide enough that rich keeps each table row on one line.
    env = {k: v for k, v in os.environ.items() if k not in ENV_VARS} | {"COLUMNS": "200"} | extra
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([str(EXECUTABLE), *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=120)


def test_check_prints_the_effective_settings_after_the_checks(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    lay_out_engine(site, "reporting", REPORTING)
    job = write_job(tmp_path, {"kl_coef": 0.0, "lora": {"rank": 8}}, engine="reporting")
    result = aworld_train("check", job, site=site, HF_TOKEN=HUB_TOKEN)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert out.index("checks") < out.index("effective settings") < out.index("all checks passed")
    table = out[out.index("effective settings"):]
    for header in ("setting", "value", "reporting key", "reporting value", "from"):
        assert header in table
    lines = {line.split()[1]: line for line in table.splitlines() if line.startswith("│")}
    assert [cell.strip() for cell in lines["device"].split("│")[1:6]] == [
        "device", "cpu", "use_cpu", "True", "default"]
    assert "rank 8, alpha 16, dropout 0, target_modules all-linear" in lines["lora"]
    assert "[LoraConfig]" in lines["lora"], "values are text, not rich markup"
    assert " 0 " in lines["kl_coef"] and " beta " in lines["kl_coef"]
    assert HUB_TOKEN not in out + result.stderr, "a secret in a setting is redacted"
    assert "hub_token" in lines["hub"]


def test_an_engine_that_reports_no_settings_prints_no_table(tmp_path: Path) -> None:
    result = aworld_train("check", write_job(tmp_path, {"kl_coef": 0.0}))
    assert result.returncode == 0, result.stderr
    assert "effective settings" not in result.stdout
    assert result.stderr == ""


def test_other_engines_sections_warn_one_line_per_key(tmp_path: Path) -> None:
    job = write_job(tmp_path, {
        "trl": {"beta": 0.0, "fp16": True, "num_generations": 4},
        "verl": {"actor_rollout_ref": {"actor": {"kl_loss_coef": 0.0, "ppo_epochs": 2}},
                 "trainer.test_freq": 5},
        "toy": {"temperature": 1.0},
    })
    result = aworld_train("check", job)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "config trl.beta: no effect on engine toy (only the trl engine reads the trl section); "
        "the common key kl_coef carries it to every engine",
        "config trl.fp16: no effect on engine toy (only the trl engine reads the trl section); "
        "the common key precision carries it to every engine",
        "config trl.num_generations: no effect on engine toy (only the trl engine reads the trl "
        "section)",
        "config verl.actor_rollout_ref.actor.kl_loss_coef: no effect on engine toy (only the "
        "verl engine reads the verl section); the common key kl_coef carries it to every engine",
        "config verl.actor_rollout_ref.actor.ppo_epochs: no effect on engine toy (only the verl "
        "engine reads the verl section)",
        "config verl.trainer.test_freq: no effect on engine toy (only the verl engine reads the "
        "verl section); the common key eval_steps carries it to every engine",
    ]
    assert "all checks passed" in result.stdout


def test_a_missing_tracker_fails_check_in_one_line(tmp_path: Path) -> None:
    result = aworld_train("check", write_job(tmp_path, {"report_to": ["swanlab"]}))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "error: config report_to: swanlab is not installed: pip install swanlab"]


def test_an_installed_tracker_passes_check(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "tensorboard").mkdir(parents=True)
    (site / "tensorboard" / "__init__.py").write_text("")
    result = aworld_train("check", write_job(tmp_path, {"report_to": "tensorboard"}), site=site)
    assert result.returncode == 0, result.stderr
    assert "tensorboard: installed" in result.stdout
