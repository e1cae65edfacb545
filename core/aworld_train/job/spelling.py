"""How far apart two names are, for the did-you-means of ``check``: a misspelt config key
(:func:`~aworld_train.job._layout.near_miss`) and a bare model name that misses a folder
beside the job (:mod:`aworld_train.model._folder`)."""

from __future__ import annotations


def swapped(word: str, other: str) -> bool:
    """Whether ``word`` is ``other`` with two adjacent letters swapped."""
    differ = [i for i, (a, b) in enumerate(zip(word, other)) if a != b]
    return (
        len(word) == len(other)
        and len(differ) == 2
        and differ[1] == differ[0] + 1
        and word[differ[0]] == other[differ[1]]
        and word[differ[1]] == other[differ[0]]
    )


def edit_distance(word: str, other: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    previous = list(range(len(other) + 1))
    for i, a in enumerate(word, start=1):
        current = [i]
        for j, b in enumerate(other, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1]


def one_edit(word: str, other: str) -> bool:
    """Whether ``word`` is ``other`` with one letter inserted, deleted, changed, or two
    adjacent letters swapped."""
    return word != other and (swapped(word, other) or edit_distance(word, other) <= 1)
