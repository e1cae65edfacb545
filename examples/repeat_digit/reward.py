"""The repeat-digit reward: full marks for exactly the digit, partial credit on the way there."""

from __future__ import annotations


def score(data_source, solution_str, ground_truth, extra_info=None):
    """1.0 for exactly the answer; 0.5 to 1.0 when the output starts with the answer (more the
    shorter the output, which rewards stopping); 0.25 when the answer appears anywhere."""
    output = solution_str.strip()
    if output == ground_truth:
        return 1.0
    if output.startswith(ground_truth):
        return 0.5 + 0.5 * len(ground_truth) / len(output)
    if ground_truth in output:
        return 0.25
    return 0.0
