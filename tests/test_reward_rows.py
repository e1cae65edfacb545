"""``check`` scores the reward on many rows (each row's ground truth as the completion) in one
child process, and ``check``'s paths: the run path it probes and a model name one edit from a
folder beside the job."""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from aworld_train.checks import _reward as reward_check
from aworld_train.errors import RewardError
from aworld_train.reward import NONE_REFUSED, RewardSpec, resolve_reward
from aworld_train.checks._reward import check_reward_on_rows, sample_rows
from aworld_train.testing.bad_job_cases import LATE_ROW_REWARDS
from aworld_train.testing.fixtures import one_error_line
from helpers import run_cli, write_jsonl

# none_late, nan_late and text_late come from LATE_ROW_REWARDS.
REWARDS = (
    LATE_ROW_REWARDS
    + '''
import os, time
from pathlib import Path


def exact(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if solution_str == ground_truth else 0.0


def raises_late(data_source, solution_str, ground_truth, extra_info=None):
    if ground_truth == "5":
        raise ValueError("cannot parse the answer " + ground_truth)
    return 1.0


def dict_none_late(data_source, solution_str, ground_truth, extra_info=None):
    return {"score": None if ground_truth == "5" else 1.0}


def hangs_late(data_source, solution_str, ground_truth, extra_info=None):
    if ground_truth == "5":
        time.sleep(60)
    return 1.0


def exits_late(data_source, solution_str, ground_truth, extra_info=None):
    if ground_truth == "5":
        os._exit(0)
    return 1.0


def misreads_odd(data_source, solution_str, ground_truth, extra_info=None):
    """The right answer scores 1, except on odd answers (a parsing bug)."""
    return 0.25 if int(ground_truth) % 2 else 1.0


def records_pid(data_source, solution_str, ground_truth, extra_info=None):
    with Path(__file__).with_name("pids.txt").open("a") as pids:
        pids.write(f"{os.getpid()} {ground_truth}\\n")
    return 1.0


def slow(data_source, solution_str, ground_truth, extra_info=None):
    time.sleep(0.05)
    return 1.0
'''
)

ROWS = [{"prompt": f"Repeat: {d}", "ground_truth": str(d)} for d in range(8)]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "rewards.py").write_text(REWARDS)
    return tmp_path


def spec_of(folder: Path, name: str) -> RewardSpec:
    return resolve_reward(f"rewards.py:{name}", base_dir=folder)


# --- which rows -------------------------------------------------------------------------------


def test_a_small_dataset_is_scored_whole_row_0_first() -> None:
    assert sample_rows(8, budget=1000) == [0, 4, 2, 6, 1, 3, 5, 7]
    assert sorted(sample_rows(37)) == list(range(37))
    assert sample_rows(1) == [0]
    assert sample_rows(0) == []


def test_a_large_dataset_is_sampled_evenly_from_first_to_last_row() -> None:
    order = sample_rows(1_000_000, budget=1000)
    assert len(order) == len(set(order)) == 1000
    assert order[0] == 0 and max(order) == 999_999
    gaps = {b - a for a, b in zip(sorted(order), sorted(order)[1:])}
    assert gaps <= {1000, 1001}
    # The first rows scored already span the dataset: a time budget that stops early still
    # checks its start, middle and end.
    assert 500_000 < order[1] < 520_000 and 750_000 < order[3] < 780_000


# --- what check_reward_on_rows finds ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("none_late", f"on row 5 returned None; {NONE_REFUSED}"),
        ("dict_none_late", f"on row 5 returned a dict whose 'score' is None; {NONE_REFUSED}"),
        (
            "nan_late",
            "on row 5 returned float nan; expected a finite number or a dict with a "
            "numeric 'score'",
        ),
        (
            "text_late",
            "on row 5 returned str 'high'; expected a finite number or a dict "
            "with a numeric 'score'",
        ),
        ("raises_late", "on row 5 raised ValueError: cannot parse the answer 5"),
        ("exits_late", "on row 5 ended the process (exit 0) without returning"),
    ],
)
def test_a_reward_failing_on_a_late_row_is_named_with_its_row(
    folder: Path, name: str, message: str
) -> None:
    with pytest.raises(RewardError) as raised:
        check_reward_on_rows(spec_of(folder, name), ROWS)
    assert str(raised.value) == f"reward '{folder / 'rewards.py'}:{name}' {message}"


def test_a_reward_hanging_on_a_late_row_has_the_timeout_per_row(folder: Path) -> None:
    started = time.monotonic()
    with pytest.raises(RewardError) as raised:
        check_reward_on_rows(spec_of(folder, "hangs_late"), ROWS, timeout=0.5)
    assert str(raised.value) == (
        f"reward '{folder / 'rewards.py'}:hangs_late' on row 5 did not "
        "return within 0.5 s (set config reward_timeout to allow more)"
    )
    assert time.monotonic() - started < 10


def test_each_function_of_a_weighted_list_is_named_on_its_row(folder: Path) -> None:
    spec = resolve_reward(
        ["rewards.py:exact", {"name": "rewards.py:hangs_late", "weight": 2}], base_dir=folder
    )
    with pytest.raises(RewardError, match=r"rewards.py:hangs_late' on row 5 did not return"):
        check_reward_on_rows(spec, ROWS, timeout=0.5)


def test_all_rows_are_scored_in_one_child_process(folder: Path) -> None:
    scores = check_reward_on_rows(spec_of(folder, "records_pid"), ROWS)
    lines = (folder / "pids.txt").read_text().split("\n")[:-1]
    assert sorted(line.split()[1] for line in lines) == [str(d) for d in range(8)]
    pids = {line.split()[0] for line in lines}
    assert len(pids) == 1 and pids != {str(os.getpid())}
    assert (scores.rows, scores.dataset_rows) == ([0, 4, 2, 6, 1, 3, 5, 7], 8)


def test_the_range_on_the_ground_truth_and_the_rows_below_its_maximum(folder: Path) -> None:
    scores = check_reward_on_rows(spec_of(folder, "misreads_odd"), ROWS)
    assert (scores.low, scores.high) == (0.25, 1.0)
    assert scores.describe() == "the ground truth scores 0.25 to 1 on all 8 rows (4 below 1)"
    assert scores.below_high() == [(1, 0.25), (3, 0.25), (5, 0.25), (7, 0.25)]
    warning = scores.warning()
    assert warning is not None
    assert (
        "less than 1 on 4 of 8 rows checked (rows 1 (0.25), 3 (0.25), 5 (0.25), 7 (0.25))"
        in warning
    )


def test_a_reward_the_ground_truth_always_maxes_has_no_warning(folder: Path) -> None:
    scores = check_reward_on_rows(spec_of(folder, "exact"), ROWS)
    assert scores.describe() == "the ground truth scores 1 on all 8 rows"
    assert scores.warning() is None
    assert scores.first.metrics == {"rewards/exact": 1.0}


def test_the_row_budget_samples_a_large_dataset(folder: Path) -> None:
    rows = [{"prompt": "p", "ground_truth": str(i % 10)} for i in range(3000)]
    scores = check_reward_on_rows(spec_of(folder, "exact"), rows, rows=100)
    assert len(scores.rows) == 100 and scores.dataset_rows == 3000
    assert scores.describe() == "the ground truth scores 1 on 100 of 3,000 rows"


def test_the_time_budget_stops_a_slow_reward_early(folder: Path) -> None:
    """A reward taking 50 ms a row, with a 0.3 s budget: a handful of rows, not 200."""
    rows = [{"prompt": "p", "ground_truth": str(i)} for i in range(200)]
    started = time.monotonic()
    scores = check_reward_on_rows(spec_of(folder, "slow"), rows, seconds=0.3)
    assert time.monotonic() - started < 3
    assert 1 <= len(scores.rows) < 50
    assert max(scores.rows) > 100, "the rows scored are spread over the dataset"


def test_the_documented_budget() -> None:
    assert reward_check.CHECK_ROWS == 1000
    assert reward_check.CHECK_SECONDS == 1.0


def test_none_is_refused_at_training_time_too(folder: Path) -> None:
    """Engines score through ``RewardSpec.score`` (TRL, ms-swift): the same refusal."""
    with pytest.raises(RewardError, match=re.escape(f"on row 5 returned None; {NONE_REFUSED}")):
        spec_of(folder, "none_late").score("", "5", "5", None, row=5)


# --- through the CLI --------------------------------------------------------------------------


def write_job(folder: Path, reward: str = "rewards.py:exact", **fields: Any) -> Path:
    write_jsonl(folder / "train.jsonl", ROWS)
    (folder / "rewards.py").write_text(REWARDS)
    job = {
        "engine": "toy",
        "agent": {"name": "repeater"},
        "train_dataset": "train.jsonl",
        "reward": reward,
        "config": {"max_steps": 2, "batch_size": 4},
        **fields,
    }
    path = folder / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("none_late", "returned None; a reward scores every completion with a number"),
        ("nan_late", "returned float nan"),
        ("text_late", "returned str 'high'"),
        ("raises_late", "raised ValueError: cannot parse the answer 5"),
    ],
)
def test_check_names_the_file_row_and_cause_of_a_reward_failing_on_row_5_of_8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, cause: str
) -> None:
    job = write_job(tmp_path, f"rewards.py:{name}")
    line = one_error_line(*run_cli(capsys, "check", job)[::2])
    assert line.startswith(f"error: reward '{tmp_path / 'rewards.py'}:{name}' on row 5 {cause}")
    assert not (tmp_path / "runs").exists()


def test_check_shows_the_range_on_the_ground_truth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="aworld_train"):
        code, out, err = run_cli(capsys, "check", write_job(tmp_path))
    assert code == 0, err
    assert "the ground truth scores 1 on all 8 rows" in out
    assert not [r for r in caplog.records if r.getMessage().startswith("reward:")]


def test_check_warns_when_the_ground_truth_scores_below_the_maximum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="aworld_train"):
        code, out, err = run_cli(capsys, "check", write_job(tmp_path, "rewards.py:misreads_odd"))
    assert code == 0, err
    assert "the ground truth scores 0.25 to 1 on all 8 rows (4 below 1)" in out
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w for w in warnings if w.startswith("reward: the ground truth")] == [
        "reward: the ground truth, scored as the completion, gets less than 1 on 4 of 8 rows "
        "checked (rows 1 (0.25), 3 (0.25), 5 (0.25), 7 (0.25)): a right answer should get the "
        "reward's maximum; check how the reward reads these rows' answers"
    ]


# --- run_path ---------------------------------------------------------------------------------


def test_check_refuses_a_run_path_it_cannot_create_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, run_path="/proc/aworld-runs")
    line = one_error_line(*run_cli(capsys, "check", job)[::2])
    assert line.startswith("error: cannot create run path /proc/aworld-runs: ")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_check_refuses_a_run_path_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "locked").mkdir(mode=0o500)
    job = write_job(tmp_path, run_path="locked/runs")
    line = one_error_line(*run_cli(capsys, "check", job)[::2])
    assert "locked/runs" in line


def test_check_leaves_no_run_path_it_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path, run_path="out/deep/runs")
    code, _, err = run_cli(capsys, "check", job)
    assert code == 0, err
    assert not (tmp_path / "out").exists()


def test_check_keeps_a_run_path_that_was_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "runs" / "old-run").mkdir(parents=True)
    (tmp_path / "empty-runs").mkdir()
    for run_path in ("runs", "empty-runs"):
        code, _, err = run_cli(capsys, "check", write_job(tmp_path, run_path=run_path))
        assert code == 0, err
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["old-run"]
    assert list((tmp_path / "empty-runs").iterdir()) == []


# --- a model name one edit from a folder beside the job --------------------------------------


@pytest.mark.parametrize(
    ("folder", "typo"),
    [
        ("tiny-model", "tiny-modle"),
        ("tiny-model", "tiny-mdel"),
        ("tiny-model", "tinymodel"),
        # Short names, whose likeness ratio is low: a swap, a change, an insertion, a deletion.
        ("Qwen", "Qwne"),
        ("Qwen", "Qwan"),
        ("phi", "phi2"),
        ("opt1", "opt"),
    ],
)
def test_check_refuses_a_bare_model_name_close_to_a_folder_beside_the_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: str, typo: str
) -> None:
    (tmp_path / folder).mkdir()
    job = write_job(tmp_path)
    data = yaml.safe_load(job.read_text())
    data["config"]["model"] = typo
    job.write_text(yaml.safe_dump(data))
    line = one_error_line(*run_cli(capsys, "check", job)[::2])
    assert f"model folder {typo} not found" in line and f"(did you mean {folder}?)" in line


def test_check_takes_a_bare_name_two_edits_from_every_folder_for_a_hub_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "Qwen").mkdir()
    job = write_job(tmp_path)
    data = yaml.safe_load(job.read_text())
    data["config"]["model"] = "Qwxyn"
    job.write_text(yaml.safe_dump(data))
    code, out, err = run_cli(capsys, "check", job)
    assert code == 0, err
    assert "hub id Qwxyn" in out
