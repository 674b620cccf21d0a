"""Reachability: can a design's test reach alpha at all?

A test's own floor is min_attainable_p (in ._tests); the holdout's confirmation over tasks has holdout_min_p, the
sign-flip p 1 / 2^n of all holdout tasks moving the same way. The config's design checks (experiments.config)
refuse, in one line, a design whose test can never reach its level.
"""

from __future__ import annotations

from ._tests import min_attainable_p


# -- reachability: can the test reach alpha at all? -----------------------------------------------------------


def holdout_min_p(n: int) -> float:
    """The smallest p the holdout's confirmation over n tasks can honestly give: the exact one-sided sign-flip p of
    n differences all of one sign, 1 / 2^n (experiments.sweep's TaskDiffs gives it when the differences are all
    equal). The paired t has no floor, but below this it rests on a normal spread alone: differences drawn from
    {-2, -1, +1, +2} (mean 0) are confirmed at level 0.025 0.045 / 0.055 / 0.029 of the time over 3 / 4 / 5 tasks,
    0.026 / 0.023 over 6 / 8 (20,000 draws each). 1 below 2 tasks."""
    return 0.5 ** n if n >= 2 else 1.0


def holdout_tasks_needed(level: float) -> int:
    """The fewest holdout tasks whose confirmation can reach `level` (holdout_min_p(n) < level)."""
    n = 2
    while holdout_min_p(n) >= level:
        n += 1
    return n


def tasks_needed(alpha: float, *, test: str = "wilcoxon", alternative: str = "two-sided") -> int:
    """The fewest tasks with which `test` can return p < alpha."""
    n = 1
    while min_attainable_p(n, test=test, alternative=alternative) >= alpha:
        n += 1
    return n
