"""check_reward: every reward form wired into reward.custom_reward_function, loaded back by
VeRL's own loader and scored by VeRL's reward manager on sample rows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import dataset, make_ctx, repeat_rows

from aworld_train.agent import AgentSpec
from aworld_train.errors import RewardError
from aworld_train.reward import RewardFunction, RewardSpec
from aworld_train_verl import engine
from aworld_train_verl.config import preview
from aworld_train_verl.reward import MODULE_NAME, score_with_reward_manager


def load(reward_file: Path) -> Any:
    spec = importlib.util.spec_from_file_location("user_rewards", reward_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def ctx(tmp_path: Path, tiny_model: Path) -> Any:
    ctx = make_ctx(tmp_path / "run", tiny_model)
    ctx.results["agent"] = engine.check_agent(AgentSpec(), ctx)
    ctx.results["dataset"] = engine.check_dataset(dataset(repeat_rows(6)), None, ctx)
    return ctx


def scores(ctx: Any, wired: Any) -> list[dict[str, Any]]:
    """Score the sample rows again through VeRL's reward manager, as the check did."""
    from aworld_train_verl.agent import load_tokenizer

    config = preview(ctx.config, ctx.run_dir, inputs=wired.overrides)
    return score_with_reward_manager(config, load_tokenizer(ctx.results["agent"].model), ctx.results["dataset"].samples)


def test_a_file_function_is_wired_as_it_is(ctx: Any, reward_file: Path) -> None:
    fn = load(reward_file).exact
    wired = engine.check_reward(RewardSpec([RewardFunction("rewards.py:exact", fn, 1.0, f"{reward_file}:exact")]), ctx)
    assert (wired.path, wired.name) == (str(reward_file), "exact")
    assert [s["reward_score"] for s in scores(ctx, wired)] == [1.0] * 4


def module_reward(reward_file: Path, monkeypatch: pytest.MonkeyPatch) -> RewardSpec:
    """``rewards:with_metrics``, its module imported from the reward file's folder, as a
    script's own folder makes ``from rewards import with_metrics`` work."""
    monkeypatch.syspath_prepend(str(reward_file.parent))
    monkeypatch.delitem(sys.modules, "rewards", raising=False)
    fn = load(reward_file).with_metrics
    return RewardSpec([RewardFunction("rewards:with_metrics", fn, 1.0, "rewards:with_metrics")])


def test_a_module_function_a_new_process_finds_is_wired_by_package_path(
    ctx: Any, reward_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aworld_train_verl.reward import _new_process_path

    monkeypatch.setenv("PYTHONPATH", str(reward_file.parent))
    _new_process_path.cache_clear()
    try:
        wired = engine.check_reward(module_reward(reward_file, monkeypatch), ctx)
    finally:
        _new_process_path.cache_clear()
    assert (wired.path, wired.name) == ("pkg://rewards", "with_metrics")
    result = scores(ctx, wired)[0]
    assert result["reward_score"] == 0.5
    assert result["reward_extra_info"]["length"] == 1.0


def test_a_module_found_only_beside_the_users_script_is_loaded_from_its_folder(
    ctx: Any, reward_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reward imported from a module beside the user's script (AWorld's main.py does
    ``from reward.gaia_reward_function import gaia_reward_func``) is found by VeRL's processes,
    which start in the run directory without that folder on their path."""
    import subprocess

    wired = engine.check_reward(module_reward(reward_file, monkeypatch), ctx)
    assert wired.path == str(ctx.run_dir / MODULE_NAME)
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('verl_reward', {wired.path!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        f"print(module.{wired.name}('repeat', '7', '7')['score'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ctx.run_dir, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0.5"


def test_weighted_functions_get_a_combining_module(ctx: Any, reward_file: Path) -> None:
    module = load(reward_file)
    spec = RewardSpec([
        RewardFunction("exact", module.exact, 2.0, f"{reward_file}:exact"),
        RewardFunction("with_metrics", module.with_metrics, 1.0, f"{reward_file}:with_metrics"),
    ])
    wired = engine.check_reward(spec, ctx)
    assert wired.path == str(ctx.run_dir / MODULE_NAME)
    result = scores(ctx, wired)[0]
    assert result["reward_score"] == 2.5
    assert result["reward_extra_info"]["rewards/exact"] == 1.0
    assert result["reward_extra_info"]["rewards/with_metrics"] == 0.5


def test_a_lambda_is_shipped_with_cloudpickle(ctx: Any) -> None:
    offset = 0.25
    spec = RewardSpec([RewardFunction("<lambda>", lambda ds, sol, gt, extra=None: offset + (sol.strip() == gt), 1.0, None)])
    wired = engine.check_reward(spec, ctx)
    assert wired.path == str(ctx.run_dir / MODULE_NAME)
    assert [s["reward_score"] for s in scores(ctx, wired)] == [1.25] * 4


def test_a_builtin_reward_is_wired_by_its_module(ctx: Any) -> None:
    from aworld_train import reward as core_reward

    builtin = core_reward.resolve_reward("exact_match").functions[0]
    assert builtin.ref is not None and not builtin.ref.endswith(".py")
    wired = engine.check_reward(RewardSpec([builtin]), ctx)
    assert wired.path.startswith("pkg://aworld_train")
    assert [s["reward_score"] for s in scores(ctx, wired)] == [1.0] * 4


def test_a_reward_that_raises_names_the_row(ctx: Any, reward_file: Path) -> None:
    fn = load(reward_file).broken
    spec = RewardSpec([RewardFunction("rewards.py:broken", fn, 1.0, f"{reward_file}:broken")])
    with pytest.raises(RewardError, match=r"rewards.py:broken fails in VeRL's NaiveRewardManager on row 0: ZeroDivisionError: planted failure"):
        engine.check_reward(spec, ctx)


def test_a_reward_that_returns_text_is_rejected(ctx: Any, reward_file: Path) -> None:
    fn = load(reward_file).wordy
    spec = RewardSpec([RewardFunction("rewards.py:wordy", fn, 1.0, f"{reward_file}:wordy")])
    with pytest.raises(RewardError, match=r"returns 'great' on row 0"):
        engine.check_reward(spec, ctx)


def test_a_missing_function_is_reported_by_verls_loader(ctx: Any, reward_file: Path) -> None:
    spec = RewardSpec([RewardFunction("rewards.py:gone", lambda *a: 0.0, 1.0, f"{reward_file}:gone")])
    with pytest.raises(RewardError, match=r"VeRL cannot load the reward .*rewards.py:gone.*gone"):
        engine.check_reward(spec, ctx)


@pytest.mark.parametrize("name", ["exits", "hard_exit"])
def test_a_reward_that_ends_its_process_in_verls_manager_fails_the_check(
    ctx: Any, reward_file: Path, name: str
) -> None:
    """VeRL's reward manager calls the user's reward in a child process: sys.exit or os._exit
    there fails the check in one line and leaves this process running."""
    fn = getattr(load(reward_file), name)
    spec = RewardSpec([RewardFunction(f"rewards.py:{name}", fn, 1.0, f"{reward_file}:{name}")])
    with pytest.raises(RewardError, match=rf"^reward .*rewards.py:{name} in VeRL's reward manager on row 0 "):
        engine.check_reward(spec, ctx)
