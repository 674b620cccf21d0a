"""The sign-flip (permutation) test of a mean over tasks: the test of a pairwise A/B's preferences.

Under the null hypothesis "neither arm is preferred" each task's preference is as likely to carry either sign
(the two arms' labels are exchangeable within a task), so the 2^n sign assignments of the n observed values are
equally likely. The statistic is their sum (equivalently the mean); the p-value counts the assignments at least
as extreme as the one observed. It makes no normality assumption: the paired t on preferences in
{-1, -1/2, 0, 1/2, 1} over 8 tasks confirmed 0.030-0.045 of the time at level 0.025 (docs/SENSITIVITY.md), the
sign-flip test holds its level by construction.

Exact up to EXACT_MAX_N non-zero values (every assignment enumerated; a zero contributes nothing under any sign
and is dropped), above that Monte Carlo with a seeded generator and the (1 + hits) / (1 + draws) estimate, which
never falls below the exact p on average (Phipson and Smyth 2010). The smallest p n values of one sign can give
is 1 / 2^n one-sided, 2 / 2^n two-sided: the Wilcoxon's (experiments.stats.min_attainable_p).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ._tests import DIRECTIONS, finite_array

EXACT_MAX_N = 20  # 2^20 sums: about 8 MB
MC_DRAWS = 200_000
_TOL = 1e-9  # sums equal up to float error count as equal (ties count against rejecting)


@dataclass(frozen=True)
class SignFlipTest:
    mean: float  # the observed mean (nan with no values)
    pvalue: float
    method: str  # "exact" | "Monte Carlo (N draws)" | "degenerate (...)"
    n: int  # values, zeros included
    n_zero: int


def _sums(values: np.ndarray) -> np.ndarray:
    sums = np.zeros(1)
    for v in values:
        sums = np.concatenate((sums + v, sums - v))
    return sums


def signflip_test(values: Sequence[float], *, alternative: str = "two-sided", draws: int = MC_DRAWS,
                  seed: int = 0) -> SignFlipTest:
    """The sign-flip test of mean(values) = 0 against `alternative` (greater: mean > 0)."""
    if alternative not in DIRECTIONS:
        raise ValueError(f"alternative must be two-sided|greater|less, got {alternative!r}")
    x = finite_array(values, "values")
    nz = x[x != 0]
    n, n_zero = int(x.size), int(x.size - nz.size)
    if n == 0:
        return SignFlipTest(float("nan"), 1.0, "degenerate (no values)", 0, 0)
    if nz.size == 0:
        return SignFlipTest(0.0, 1.0, "degenerate (all values zero)", n, n_zero)
    obs = float(nz.sum())
    tol = _TOL * max(1.0, float(np.abs(nz).sum()))
    if nz.size <= EXACT_MAX_N:
        sums, method, hits_plus = _sums(np.abs(nz)), "exact", 0
    else:
        rng = np.random.default_rng(seed)
        parts = []
        left = int(draws)
        while left > 0:
            k = min(left, 20_000)
            parts.append((rng.choice((-1.0, 1.0), size=(k, nz.size)) * np.abs(nz)).sum(axis=1))
            left -= k
        sums, method, hits_plus = np.concatenate(parts), f"Monte Carlo ({int(draws)} draws)", 1
    if alternative == "greater":
        hits = np.count_nonzero(sums >= obs - tol)
    elif alternative == "less":
        hits = np.count_nonzero(sums <= obs + tol)
    else:
        hits = np.count_nonzero(np.abs(sums) >= abs(obs) - tol)
    p = (hits + hits_plus) / (sums.size + hits_plus)
    return SignFlipTest(float(x.mean()), float(min(1.0, p)), method, n, n_zero)
