"""VeRL's own configs (``real_configs/``: its example scripts and docs, models and data swapped
for local ones): ``aworld-train check`` accepts each config VeRL's own code accepts, and refuses
the rest with VeRL's reason.

VeRL's verdict is what its code says of the same config before and as training starts: Hydra's
compose of ``ppo_trainer`` with the config's overrides (after the engine's own defaults for what
VeRL leaves mandatory), ``validate_config`` as ``main_ppo`` runs it, the config dataclasses, and
each name VeRL looks up when it starts (advantage estimator, policy loss, rollout backend, KL
estimators, trackers).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from aworld_train.testing.real_configs import (
    assert_a_dozen_configs,
    assert_same_verdict,
    verdict_of_check,
)

HERE = Path(__file__).parent / "real_configs"
CONFIGS = sorted(path.name for path in HERE.iterdir() if path.suffix in (".args", ".yaml"))

# Each refusal, with the words of the reason both verdicts give (VeRL's and check's). Every
# other config is accepted by both.
EXPECTED: dict[str, str] = {
    # Written for VeRL before 0.9: the keys are gone, as Hydra's compose says.
    "grpo_qwen2_7b.args": "grad_offload",
    "ppo_seq_balance.args": "grad_offload",
    "ppo_deepseek7b_llm.args": "grad_offload",
    # The rollout backend is named sglang in VeRL 0.9.1.
    "multiturn_tool_agent.args": "sglang_async",
}

TRAIN_ROWS = 8


def config_lines(name: str, model: Path) -> list[str]:
    """A config's ``key=value`` overrides as the shell hands them to ``main_ppo`` (quotes
    removed), ``MODEL`` replaced by ``model``; a YAML config flattened to the same form."""
    import yaml
    from aworld_train_verl.composition import flatten

    text = (HERE / name).read_text().replace("MODEL", str(model))
    if name.endswith(".yaml"):
        return [
            f"{key}={json.dumps(value)}" for key, value in flatten(yaml.safe_load(text)).items()
        ]
    lines = [
        line.split(" #", 1)[0].strip()
        for line in text.splitlines()
        if not line.lstrip().startswith("#")
    ]
    return [shlex.split(line)[0] for line in lines if line]


def verls_verdict(lines: list[str]) -> str | None:
    """VeRL's own verdict on the overrides: ``None`` when its code accepts them, else its reason."""
    import copy
    import importlib.util

    import torch
    from aworld_train_verl.composition import config_dir
    from aworld_train_verl.overrides import engine_defaults
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn, kl_penalty
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config
    from verl.utils.tracking import Tracking
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    given = {line.partition("=")[0].lstrip("+"): line.partition("=")[2] for line in lines}
    defaults = [
        f"{key}={json.dumps(value)}"
        for key, value in engine_defaults(given).items()
        if key not in given
    ]
    try:
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=str(config_dir()), version_base=None):
            cfg = compose("ppo_trainer", overrides=[*defaults, *lines])
        validated = cfg
        if cfg.actor_rollout_ref.model.lora_rank and importlib.util.find_spec("vllm") is None:
            # validate_config looks vLLM's largest LoRA rank up in vLLM; without it, VeRL's fallback.
            assert cfg.actor_rollout_ref.model.lora_rank <= 512, "LoRA rank past vLLM's largest"
            validated = copy.deepcopy(cfg)
            validated.actor_rollout_ref.model.lora_rank = 0
        validate_config(
            validated, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg)
        )
        omega_conf_to_dataclass(cfg.algorithm)
        omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
        if cfg.algorithm.adv_estimator != "gae":
            get_adv_estimator_fn(cfg.algorithm.adv_estimator)
        get_policy_loss_fn(cfg.actor_rollout_ref.actor.policy_loss.loss_mode)
        # The backend's class loads only with vLLM or SGLang installed: the name is what is looked up.
        name = cfg.actor_rollout_ref.rollout.name
        assert name in RolloutReplicaRegistry._registry, f"Unknown rollout mode: {name}"
        zero = torch.zeros(1)
        if cfg.actor_rollout_ref.actor.use_kl_loss:
            kl_penalty(zero, zero, cfg.actor_rollout_ref.actor.kl_loss_type)
        if cfg.algorithm.use_kl_in_reward:
            kl_penalty(zero, zero, cfg.algorithm.kl_penalty)
        logger = (
            OmegaConf.to_container(cfg.trainer.logger)
            if not isinstance(cfg.trainer.logger, str)
            else [cfg.trainer.logger]
        )
        for backend in logger:
            assert backend in Tracking.supported_backend, f"{backend} is not supported"
    except Exception as error:  # noqa: BLE001 - VeRL raises asserts, ValueError, KeyError, Hydra's errors
        return f"{type(error).__name__}: {' '.join(str(error).split())}"
    return None


def write_job(folder: Path, model: Path, name: str) -> Path:
    """A job beside the config: the tiny model, a few parquet rows, an exact-match reward; a
    YAML config is the job's ``config:`` file, an ``.args`` config comes as ``-o`` options."""
    import datasets
    import yaml

    rows = [{"prompt": f"Repeat: {i % 10}", "ground_truth": str(i % 10)} for i in range(TRAIN_ROWS)]
    datasets.Dataset.from_list(rows).to_parquet(str(folder / "train.parquet"))
    (folder / "rewards.py").write_text(
        "def exact(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return float(solution_str.strip() == ground_truth)\n"
    )
    job: dict[str, Any] = {
        "engine": "verl",
        "agent": {"name": "solver", "model": str(model)},
        "train_dataset": "train.parquet",
        "reward": "rewards.py:exact",
    }
    if name.endswith(".yaml"):
        (folder / name).write_text((HERE / name).read_text().replace("MODEL", str(model)))
        job["config"] = name
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def checks_verdict(
    capsys: pytest.CaptureFixture[str], folder: Path, model: Path, name: str
) -> str | None:
    """``aworld-train check`` on the config: ``None`` when it passes, else its one error line."""
    job = write_job(folder, model, name)
    options = (
        []
        if name.endswith(".yaml")
        else [item for line in config_lines(name, model) for item in ("-o", line)]
    )
    return verdict_of_check(capsys, job, *options)


@pytest.fixture(autouse=True)
def offline_trackers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The configs log to wandb: offline, as a machine without a key would."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.mark.parametrize("name", CONFIGS)
def test_check_gives_verls_own_verdict(
    name: str, long_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verl = verls_verdict(config_lines(name, long_model))
    check = checks_verdict(capsys, tmp_path, long_model, name)
    assert_same_verdict("VeRL", verl, check, EXPECTED.get(name))


def test_the_suite_holds_a_dozen_of_verls_configs() -> None:
    assert_a_dozen_configs(CONFIGS, EXPECTED)


def test_verls_quickstart_as_a_whole_config_file_trains_ppo_with_its_critic(
    long_model: Path, tmp_path: Path
) -> None:
    """VeRL's quickstart configures a critic and leaves the estimator to VeRL (gae): given whole
    as the job's config, with no common ``algorithm``, the saved config trains what VeRL would."""
    from aworld_train import AgentTrainer
    from aworld_train_verl.composition import base_config
    from omegaconf import OmegaConf

    write_job(tmp_path, long_model, "quickstart_ppo.yaml")
    trainer = AgentTrainer(
        agent={"name": "solver"},
        config="quickstart_ppo.yaml",
        reward_func="rewards.py:exact",
        train_dataset="train.parquet",
        train_engine_name="verl",
        run_path=tmp_path / "runs",
        base_dir=tmp_path,
        show_progress=False,
    )
    saved = OmegaConf.load(trainer.run_dir.path / "verl_config.yaml")
    assert saved.algorithm.adv_estimator == base_config().algorithm.adv_estimator == "gae"
    assert saved.critic.optim.lr == 1e-5 and saved.trainer.logger == "console"
    assert Path(saved.critic.model.path) == long_model.resolve()
