"""Built-in rewards, usable by name in a job (``reward: exact_match``).

Each has the canonical signature ``reward(data_source, solution_str, ground_truth,
extra_info=None) -> float``.
"""

from __future__ import annotations

import re
import string
from typing import Any

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?")


def exact_match(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None
) -> float:
    """1.0 when the completion, stripped of surrounding whitespace, equals the ground truth."""
    return 1.0 if solution_str.strip() == str(ground_truth).strip() else 0.0


def answer_match(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None
) -> float:
    """1.0 when the last ``<answer>...</answer>`` in the completion matches the ground truth
    under GAIA's normalisation (numbers, comma/semicolon lists, strings); 0.0 otherwise,
    including when the completion has no answer tag."""
    answer = extract_answer(solution_str)
    if answer is None:
        return 0.0
    return 1.0 if gaia_equal(answer, str(ground_truth)) else 0.0


def extract_answer(text: str) -> str | None:
    """The content of the last ``<answer>`` tag, stripped, or ``None`` when there is none."""
    found = _ANSWER_TAG.findall(text)
    return found[-1].strip() if found else None


def gaia_equal(answer: str, truth: str) -> bool:
    """Compare as GAIA's scorer does: a numeric truth numerically (ignoring ``$ % ,``), a truth
    with ``,`` or ``;`` element by element, anything else as normalised text."""
    if _as_number(truth) is not None:
        return _as_number(answer) == _as_number(truth)
    if any(sep in truth for sep in ",;"):
        truths, answers = _split_list(truth), _split_list(answer)
        return len(truths) == len(answers) and all(
            gaia_equal(a, t) for a, t in zip(answers, truths)
        )
    return _normalise_text(answer) == _normalise_text(truth)


def _as_number(text: str) -> float | None:
    cleaned = re.sub(r"[$%\s]", "", text)
    # Only thousands separators are dropped: "1,000" is a number, "1, 2" is a list.
    if _THOUSANDS.fullmatch(cleaned):
        cleaned = cleaned.replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return None


def _split_list(text: str) -> list[str]:
    return [item.strip() for item in re.split(r"[,;]", text)]


def _normalise_text(text: str) -> str:
    text = re.sub(r"\s+", "", text).lower()
    return text.translate(str.maketrans("", "", string.punctuation))


BUILTIN_REWARDS = {"exact_match": exact_match, "answer_match": answer_match}
