"""A GAIA-style reward: 1.0 when the answer inside the last ``<answer>...</answer>`` matches
the ground truth as GAIA's scorer compares them, else 0.0.

GAIA compares a number as a number (units, ``$``, ``%`` and thousands separators ignored), a
comma- or semicolon-separated list element by element, and anything else as text without case,
spaces or punctuation.
"""

from __future__ import annotations

import re
import string

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def gaia_reward_func(data_source, solution_str, ground_truth, extra_info=None):
    """Score one rollout: its final ``<answer>`` against ``ground_truth``.

    :param data_source: the row's ``data_source`` (``"gaia"``).
    :param solution_str: the agent's whole response.
    :param ground_truth: the row's ``reward_model.ground_truth``.
    :param extra_info: the row's ``extra_info`` (``task_id``, ``level``); unused.
    """
    answers = ANSWER.findall(solution_str)
    if not answers:
        return 0.0
    return 1.0 if _matches(answers[-1].strip(), str(ground_truth)) else 0.0


def _matches(answer: str, truth: str) -> bool:
    if _is_number(truth):  # as GAIA's scorer: "3, 4" is a list, not 34
        return _number(answer) == float(truth)
    if any(separator in truth for separator in ",;"):
        got, wanted = re.split(r"[,;]", answer), re.split(r"[,;]", truth)
        return len(got) == len(wanted) and all(
            _matches(a.strip(), t.strip()) for a, t in zip(got, wanted)
        )
    return _text(answer) == _text(truth)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _number(text: str) -> float | None:
    """``text`` as a number once units and separators are dropped (``"$1,250 m"`` is 1250)."""
    cleaned = re.sub(r"[$%,\s]", "", text)
    cleaned = re.sub(r"[a-zA-Z]+\.?$", "", cleaned)  # a trailing unit: m, km, years
    try:
        return float(cleaned)
    except ValueError:
        return None


def _text(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch not in string.punctuation and not ch.isspace())
