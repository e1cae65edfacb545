"""The built-in rewards: ``exact_match`` and ``answer_match`` with GAIA's normalisation."""

from __future__ import annotations

import pytest
from aworld_train.reward._builtin import BUILTIN_REWARDS, answer_match, exact_match, extract_answer


def test_builtins_are_registered_by_name() -> None:
    assert BUILTIN_REWARDS == {"exact_match": exact_match, "answer_match": answer_match}


@pytest.mark.parametrize(
    ("solution", "truth", "expected"),
    [
        ("4", "4", 1.0),
        ("  4\n", "4", 1.0),
        ("4", " 4 ", 1.0),
        ("4.0", "4", 0.0),
        ("Paris", "paris", 0.0),
        ("The answer is 4", "4", 0.0),
    ],
)
def test_exact_match(solution: str, truth: str, expected: float) -> None:
    assert exact_match("math", solution, truth) == expected
    assert exact_match("math", solution, truth, {"index": 0}) == expected


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("no tag here", None),
        ("<answer> 42 </answer>", "42"),
        ("<answer>1</answer> then <answer>2</answer>", "2"),
        ("<ANSWER>Yes</Answer>", "Yes"),
        ("<answer>line one\nline two</answer>", "line one\nline two"),
        ("<answer>unclosed", None),
    ],
)
def test_extract_answer_takes_the_last_tag(text: str, answer: str | None) -> None:
    assert extract_answer(text) == answer


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        # numbers: compared numerically, ignoring $, %, thousands separators and spaces
        ("1000", "1000", 1.0),
        ("$1,000", "1000", 1.0),
        ("1000", "1,000", 1.0),
        ("12%", "12", 1.0),
        ("3.0", "3", 1.0),
        ("1e3", "1000", 1.0),
        ("3.5", "3", 0.0),
        ("three", "3", 0.0),
        ("5 km", "5", 0.0),
        # lists: split on commas or semicolons, compared element by element
        ("a, b, c", "a,b,c", 1.0),
        ("a; b; c", "a, b, c", 1.0),
        ("1.0, 2", "1, 2", 1.0),
        ("12", "1, 2", 0.0),
        ("1,2", "1,2", 1.0),
        ("b, a", "a, b", 0.0),
        ("a, b", "a, b, c", 0.0),
        # strings: case, whitespace and punctuation ignored
        ("New York", "new york", 1.0),
        ("new-york!", "New York", 1.0),
        ("St. Petersburg", "Saint Petersburg", 0.0),
    ],
)
def test_answer_match_normalises_like_gaia(answer: str, truth: str, expected: float) -> None:
    completion = f"Let me think.\n<answer>{answer}</answer>"
    assert answer_match("gaia", completion, truth) == expected


def test_answer_match_without_an_answer_tag_scores_zero() -> None:
    assert answer_match("gaia", "4", "4") == 0.0
    assert answer_match("gaia", "<answer></answer>", "4") == 0.0
