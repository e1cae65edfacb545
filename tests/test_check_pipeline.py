"""The check pipeline as values: each step is given by name what the trainer gave or an earlier
step kept, and returns what it found; the runner gathers what the steps keep."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from aworld_train.checks._pipeline import Check, CheckResult, Found, HandOff, needs, run_checks
from aworld_train.checks._settings import engine_adds_trackers
from aworld_train.checks import CHECKS, NOT_FOUND, engine_check_config
from aworld_train.job.config import TrainConfig
from aworld_train.job.settings import Setting
from aworld_train.tools import ToolSet

#: What the trainer gives every check (``checks.check_job``).
GIVEN = {"job", "engine", "engine_info", "run_dir", "check_only", "resume_from", "progress"}


def test_each_check_is_given_only_what_the_trainer_gave_or_an_earlier_check_kept() -> None:
    available = set(GIVEN)
    for position, check in enumerate(CHECKS):
        for function in (check.applies, check.run):
            missing = set(needs(function)) - available - set(NOT_FOUND)
            assert not missing, f"check {position} ({check.module}) needs {missing} too early"
        available |= set(check.keeps)
    assert set(NOT_FOUND) <= available, "a default stands for a value no check keeps"


def test_the_runner_gathers_what_the_checks_keep_and_records_their_rows() -> None:
    rows: list[CheckResult] = []
    steps = (
        Check("first", "core", lambda job: Found(f"{job}!", loud=f"{job}!"), str, keeps=("loud",)),
        Check("skipped", "core", lambda: "never", str, applies=lambda: False, otherwise="no"),
        Check("silent", "core", lambda loud: None, None),
        Check("second", "engine", lambda loud, job: len(loud + job), str),
    )
    found: dict[str, Any] = {"job": "toy", "engine": "toy-engine"}
    run_checks(steps, found, rows.append)
    assert found == {"job": "toy", "engine": "toy-engine", "loud": "toy!"}
    shown = [(row.module, row.by, row.detail) for row in rows]
    assert shown == [
        ("first", "core", "toy!"),
        ("skipped", "core", "no"),
        ("second", "toy-engine", "7"),
    ]


def test_a_check_that_keeps_what_it_did_not_declare_fails() -> None:
    step = Check("sly", "core", lambda: Found(None, extra=1), None)
    with pytest.raises(AssertionError, match="keeps"):
        run_checks([step], {"engine": "toy"}, lambda row: None)


def test_an_engine_check_hands_on_a_new_value_and_leaves_the_old_one_as_it_was() -> None:
    class Hooks:
        def __init__(self, answer: Any) -> None:
            self.answer = answer

        def call(self, hook: str, **arguments: Any) -> Any:
            assert hook == "check_config" and arguments["agent"] == "the agent"
            return self.answer

    config = TrainConfig()
    before = HandOff(tools=ToolSet(), agent="the agent")
    converted = engine_check_config(Hooks({"lr": 1}), config, None, before)  # type: ignore[arg-type]
    kept = engine_check_config(Hooks(None), config, None, before)  # type: ignore[arg-type]
    assert converted.kept["hand_off"].config == {"lr": 1}
    assert converted.shown == {"lr": 1}
    assert kept.kept["hand_off"].config is config and kept.shown is None
    assert before.config is None, "the hand-off it was given is unchanged"


def test_the_trackers_the_engine_adds_are_checked_on_their_own() -> None:
    settings = [Setting("report_to", ["tensorboard"], "report_to", ["tensorboard"], "default")]
    assert engine_adds_trackers(TrainConfig(), settings)
    assert not engine_adds_trackers(TrainConfig(), None)
    assert not engine_adds_trackers(TrainConfig(report_to=("tensorboard",)), settings)


def test_the_guide_lists_the_checks_as_they_run() -> None:
    guide = (Path(__file__).resolve().parents[1] / "docs" / "checks.md").read_text("utf-8")
    rows = re.findall(r"^\| (?!row |---)(.+?) \| (\w+) \| .+? \|(.*)\|$", guide, re.MULTILINE)
    listed = [(row, by, re.findall(r"`(\w+)`", keeps)) for row, by, keeps in rows]
    running = [
        (check.module + (" (no row)" if check.describe is None else ""), check.who, [*check.keeps])
        for check in CHECKS
    ]
    assert listed == running, "docs/checks.md lists the checks otherwise than CHECKS runs them"
