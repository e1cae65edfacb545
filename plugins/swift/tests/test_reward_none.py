"""``None`` from a reward is refused while ms-swift trains, as ``check`` refuses it: ms-swift
itself would read it as "not applicable", which VeRL cannot, so one job would train differently
per engine."""

from __future__ import annotations

import re

import pytest
from aworld_train.errors import RewardError
from aworld_train.reward import NONE_REFUSED, resolve_reward
from aworld_train_swift.reward import score_batch


def none_unless_right(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if solution_str == ground_truth else None


def test_none_on_a_generated_completion_is_refused_naming_the_row() -> None:
    spec = resolve_reward(none_unless_right)
    assert score_batch(spec, ["5", "5"], {"ground_truth": ["5", "5"]}) == [1.0, 1.0]
    with pytest.raises(RewardError, match=re.escape(f"on row 3 returned None; {NONE_REFUSED}")):
        score_batch(
            spec,
            ["5", "6"],
            {"ground_truth": ["5", "5"], "extra_info": [{"index": 2}, {"index": 3}]},
        )
