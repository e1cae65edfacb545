"""check_reward: every reward form wired into reward.custom_reward_function, loaded back by
VeRL's own loader and scored by VeRL's reward manager on sample rows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from aworld_train.agent import AgentSpec
from aworld_train.errors import RewardError
from aworld_train.reward import RewardFunction, RewardSpec
from aworld_train_verl.overrides import preview
from aworld_train_verl.reward import MODULE_NAME, score_with_reward_manager
from conftest import Checks, dataset, make_ctx, repeat_rows


def load(reward_file: Path) -> Any:
    spec = importlib.util.spec_from_file_location("user_rewards", reward_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def checks(tmp_path: Path, tiny_model: Path) -> Checks:
    """The agent and dataset checks of a job, done."""
    checks = Checks(make_ctx(tmp_path / "run", tiny_model))
    checks.check_agent(AgentSpec())
    checks.check_dataset(dataset(repeat_rows(6)))
    return checks


def scores(checks: Checks, wired: Any) -> list[dict[str, Any]]:
    """Score the sample rows again through VeRL's reward manager, as the check did."""
    from aworld_train_verl.agent import load_tokenizer

    config = preview(checks.ctx.config, checks.ctx.run_dir, inputs=wired.overrides)
    return score_with_reward_manager(
        config, load_tokenizer(checks.agent.model), checks.dataset.samples
    )


def test_a_file_function_is_wired_as_it_is(checks: Checks, reward_file: Path) -> None:
    fn = load(reward_file).exact
    wired = checks.check_reward(
        RewardSpec([RewardFunction("rewards.py:exact", fn, 1.0, f"{reward_file}:exact")])
    )
    assert (wired.path, wired.name) == (str(reward_file), "exact")
    assert [s["reward_score"] for s in scores(checks, wired)] == [1.0] * 4


def module_reward(reward_file: Path, monkeypatch: pytest.MonkeyPatch) -> RewardSpec:
    """``rewards:with_metrics``, its module imported from the reward file's folder, as a
    script's own folder makes ``from rewards import with_metrics`` work."""
    monkeypatch.syspath_prepend(str(reward_file.parent))
    monkeypatch.delitem(sys.modules, "rewards", raising=False)
    fn = load(reward_file).with_metrics
    return RewardSpec([RewardFunction("rewards:with_metrics", fn, 1.0, "rewards:with_metrics")])


def test_a_module_function_a_new_process_finds_is_wired_by_package_path(
    checks: Checks, reward_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aworld_train_verl.reward import _new_process_path

    monkeypatch.setenv("PYTHONPATH", str(reward_file.parent))
    _new_process_path.cache_clear()
    try:
        wired = checks.check_reward(module_reward(reward_file, monkeypatch))
    finally:
        _new_process_path.cache_clear()
    assert (wired.path, wired.name) == ("pkg://rewards", "with_metrics")
    result = scores(checks, wired)[0]
    assert result["reward_score"] == 0.5
    assert result["reward_extra_info"]["length"] == 1.0


def test_a_module_found_only_beside_the_users_script_is_loaded_from_its_folder(
    checks: Checks, reward_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reward imported from a module beside the user's script (AWorld's main.py does
    ``from reward.gaia_reward_function import gaia_reward_func``) is found by VeRL's processes,
    which start in the run directory without that folder on their path."""
    import subprocess

    wired = checks.check_reward(module_reward(reward_file, monkeypatch))
    assert wired.path == str(checks.ctx.run_dir / MODULE_NAME)
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('verl_reward', {wired.path!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        f"print(module.{wired.name}('repeat', '7', '7')['score'])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=checks.ctx.run_dir,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "0.5"


def test_weighted_functions_get_a_combining_module(checks: Checks, reward_file: Path) -> None:
    module = load(reward_file)
    spec = RewardSpec(
        [
            RewardFunction("exact", module.exact, 2.0, f"{reward_file}:exact"),
            RewardFunction("with_metrics", module.with_metrics, 1.0, f"{reward_file}:with_metrics"),
        ]
    )
    wired = checks.check_reward(spec)
    assert wired.path == str(checks.ctx.run_dir / MODULE_NAME)
    result = scores(checks, wired)[0]
    assert result["reward_score"] == 2.5
    assert result["reward_extra_info"]["rewards/exact"] == 1.0
    assert result["reward_extra_info"]["rewards/with_metrics"] == 0.5


def test_a_lambda_is_shipped_with_cloudpickle(checks: Checks) -> None:
    offset = 0.25
    spec = RewardSpec(
        [
            RewardFunction(
                "<lambda>", lambda ds, sol, gt, extra=None: offset + (sol.strip() == gt), 1.0, None
            )
        ]
    )
    wired = checks.check_reward(spec)
    assert wired.path == str(checks.ctx.run_dir / MODULE_NAME)
    assert [s["reward_score"] for s in scores(checks, wired)] == [1.25] * 4


def test_a_builtin_reward_is_wired_by_its_module(checks: Checks) -> None:
    from aworld_train import reward as core_reward

    builtin = core_reward.resolve_reward("exact_match").functions[0]
    assert builtin.ref is not None and not builtin.ref.endswith(".py")
    wired = checks.check_reward(RewardSpec([builtin]))
    assert wired.path.startswith("pkg://aworld_train")
    assert [s["reward_score"] for s in scores(checks, wired)] == [1.0] * 4


def test_a_reward_that_raises_names_the_row(checks: Checks, reward_file: Path) -> None:
    fn = load(reward_file).broken
    spec = RewardSpec([RewardFunction("rewards.py:broken", fn, 1.0, f"{reward_file}:broken")])
    with pytest.raises(
        RewardError,
        match=r"rewards.py:broken fails in VeRL's NaiveRewardManager on row 0: ZeroDivisionError: planted failure",
    ):
        checks.check_reward(spec)


def test_a_reward_that_returns_text_is_rejected(checks: Checks, reward_file: Path) -> None:
    fn = load(reward_file).wordy
    spec = RewardSpec([RewardFunction("rewards.py:wordy", fn, 1.0, f"{reward_file}:wordy")])
    with pytest.raises(RewardError, match=r"returns 'great' on row 0"):
        checks.check_reward(spec)


def test_a_missing_function_is_reported_by_verls_loader(checks: Checks, reward_file: Path) -> None:
    spec = RewardSpec(
        [RewardFunction("rewards.py:gone", lambda *a: 0.0, 1.0, f"{reward_file}:gone")]
    )
    with pytest.raises(RewardError, match=r"VeRL cannot load the reward .*rewards.py:gone.*gone"):
        checks.check_reward(spec)


@pytest.mark.parametrize("name", ["exits", "hard_exit"])
def test_a_reward_that_ends_its_process_in_verls_manager_fails_the_check(
    checks: Checks, reward_file: Path, name: str
) -> None:
    """VeRL's reward manager calls the user's reward in a child process: sys.exit or os._exit
    there fails the check in one line and leaves this process running."""
    fn = getattr(load(reward_file), name)
    spec = RewardSpec([RewardFunction(f"rewards.py:{name}", fn, 1.0, f"{reward_file}:{name}")])
    with pytest.raises(
        RewardError, match=rf"^reward .*rewards.py:{name} in VeRL's reward manager on row 0 "
    ):
        checks.check_reward(spec)
