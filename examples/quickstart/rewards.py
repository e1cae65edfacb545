"""The quickstart's reward, in the canonical signature every engine calls."""


def score(data_source, solution_str, ground_truth, extra_info=None):
    """1 for the digit alone, 0.5 when the answer starts with it, else 0."""
    answer = solution_str.strip()
    if answer == ground_truth:
        return 1.0
    return 0.5 if answer.startswith(ground_truth) else 0.0
