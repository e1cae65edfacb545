"""``None`` from a reward is refused while TRL trains, as ``check`` refuses it: TRL itself would
read it as "not applicable", which VeRL cannot, so one job would train differently per engine."""

from __future__ import annotations

import re

import pytest
from aworld_train.errors import RewardError
from aworld_train.reward import NONE_REFUSED, resolve_reward
from aworld_train_trl.reward import reward_to_trl


def none_unless_right(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if solution_str == ground_truth else None


def test_none_on_a_generated_completion_is_refused_naming_the_row() -> None:
    trl_reward = reward_to_trl(resolve_reward(none_unless_right))
    assert trl_reward(prompts=["p", "p"], completions=["5", "5"], ground_truth=["5", "5"]) == [
        1.0,
        1.0,
    ]
    with pytest.raises(RewardError, match=re.escape(f"on row 3 returned None; {NONE_REFUSED}")):
        trl_reward(
            prompts=["p", "p"],
            completions=["5", "6"],
            ground_truth=["5", "5"],
            extra_info=[{"index": 2}, {"index": 3}],
        )
