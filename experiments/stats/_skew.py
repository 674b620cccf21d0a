"""The one-sided test of a mean gain over tasks that holds its level when the per-task differences are skewed: the
sweep's holdout confirmation (experiments.sweep's TaskDiffs).

Why the paired t alone is not enough: with a left-skewed spread of zero mean (most tasks gain a little, a few lose
more) the few tasks that carry the losses are often not among the n sampled, the sample looks like a clear gain and
the t confirms far above its level. Over 12 tasks at level 0.025: -(Exp - 1) 0.091, -(lognormal sigma 1) 0.154
(bench/skew_level.py, 20,000 worlds). Hall's (1992) skewness-corrected t against the t's critical value (second-order
correct) and a studentized bootstrap (bootstrap-t, 999 resamples) take off less than half of the excess (0.059 /
0.089 and 0.049 / 0.080, 4,000 worlds): at 12 tasks the sample skewness both read is itself mostly hidden with the
tail.

The test (skew_test): p = max(p_t, p_skew).
- p_t: the one-sided paired t's p (n - 1 df), kept, so a confirmation is never easier than the t's.
- p_skew: the statistic G = g(T, KAPPA * a), Hall's monotone transformation g(T, a) = T + a/6 + a T^2/3 + a^2 T^3/27
  with a = sample skewness / sqrt(n) scaled by KAPPA; p_skew is the largest over the reference spreads
  (REFERENCE_SPREADS: normal, -(Exp - 1), -(lognormal sigma 1), each at mean 0) of the chance of a G at least as
  high, from seeded simulation (reference_g: WORLDS samples of n per spread, cached per n; (1 + hits) / (1 +
  draws)). The statistic is scale-free, so a spread's shape is all its null law depends on. For each reference
  spread, P(p_skew <= x) <= x for every x (up to the simulation's error), so a look's level and Holm's step-down
  over candidates hold for all three, and for any spread whose G tail lies under theirs (right skew, t(3), a milder
  left skew; measured in bench/skew_level.py). KAPPA 2 (the skewness read twice as strongly as Hall's second-order
  term) was chosen from KAPPA 1 (mean_bound's scale), 1.5, 2, 2.5 and 3 by power at levels 0.025 to 0.003 (a one-off
  simulation: 2.5 is up to 0.02 higher at 12 tasks, 2 up to 0.02 higher at 24; 1 is 0.15 lower).
  bench/skew_level.py: on a normal spread of sd 1 over 12 tasks at +1.0, 0.59 at level 0.025 against 0.44 for the t
  with the A/B's skew-robust bound (experiments.stats.mean_bound, Hall's own scale) and 0.88 for the t alone; the
  cost grows as the level shrinks (0.22 against 0.68 at look 3's 0.00625) and shrinks with the tasks (24 tasks: 0.99
  / 0.91 against 1.00 / 0.98 at 0.025 / 0.00625).
- Every difference equal (zero spread): T is undefined; p is the exact sign-flip p, 1/2^n when the value is
  positive, 1 otherwise (a permutation test holds its level whatever the spread's shape).

What no test on n tasks can do: see a loss it did not sample. When a harm falls on 1 task in k, all n sampled tasks
miss it with probability ((k - 1)/k)^n; then every sampled task gains and any test confirms. The holdout size that
bounds that chance by a look's level is holdout_tasks_for_harm(k, level): 28 tasks for 1 in 8 at 0.025, 33 at
0.0125; 12 holdout tasks miss it 0.20 of the time. A heavier continuous tail than the references' (skewness above
lognormal sigma 1's 6.2 at these n) is the same case in between.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as sps

from ._tests import finite_array
from ._verdict import _hall  # Hall's monotone transformation g(T, a), the A/B's skew-robust bound's

KAPPA = 2.0
REFERENCE_SPREADS = ("normal", "-(Exp - 1)", "-(lognormal sigma 1)")
WORLDS = 200_000  # reference samples per spread (fewer above 100 tasks: WORLD_VALUES)
WORLD_VALUES = 20_000_000
SEED = 52
_CHUNK = 20_000


@dataclass(frozen=True)
class SkewTest:
    """The one-sided test of mean(diffs) > 0 (module docstring)."""

    n: int
    mean: float | None
    se: float | None  # sd / sqrt(n); 0 when every difference is equal; None below 2 values
    p: float | None  # max(t_p, skew_p), or the exact sign-flip p at zero spread; None below 2 values
    t_p: float | None  # the paired t's own one-sided p
    skew_p: float | None  # the skew-calibrated p (None at zero spread or below 2 values)
    skewness: float | None  # the sample skewness (third central moment over sd^3, sd with n - 1)
    method: str


def _g(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of d (rows with spread): T, the sample skewness, and G = g(T, KAPPA * skewness / sqrt(n))."""
    n = d.shape[-1]
    mean = d.mean(-1)
    sd = d.std(-1, ddof=1)
    t = mean / (sd / math.sqrt(n))
    skew = ((d - mean[..., None]) ** 3).mean(-1) / sd**3
    return t, skew, _hall(t, KAPPA * skew / math.sqrt(n))


def _reference(shape: str, rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    if shape == "normal":
        return rng.standard_normal(size)
    if shape == "-(Exp - 1)":
        return 1.0 - rng.exponential(1.0, size)
    if shape == "-(lognormal sigma 1)":
        return math.exp(0.5) - np.exp(rng.standard_normal(size))
    raise ValueError(f"unknown reference spread {shape!r}")


@functools.lru_cache(maxsize=16)
def reference_g(n: int) -> tuple[np.ndarray, ...]:
    """The sorted G of seeded mean-zero samples of n from each reference spread (REFERENCE_SPREADS)."""
    if n < 2:
        raise ValueError(f"reference_g needs n >= 2, got {n}")
    worlds = max(20_000, min(WORLDS, WORLD_VALUES // n))
    out = []
    for i, shape in enumerate(REFERENCE_SPREADS):
        rng = np.random.default_rng([SEED, n, i])
        parts = [_g(_reference(shape, rng, (min(_CHUNK, worlds - s), n)))[2] for s in range(0, worlds, _CHUNK)]
        out.append(np.sort(np.concatenate(parts)))
    return tuple(out)


def skew_p(g: float | np.ndarray, n: int) -> float | np.ndarray:
    """The largest over the reference spreads of P(G >= g) at mean 0, (1 + hits) / (1 + draws)."""
    gs = np.asarray(g, dtype=float)
    out = np.max([(1 + ref.size - np.searchsorted(ref, gs, side="left")) / (1 + ref.size) for ref in reference_g(n)],
                 axis=0)
    return float(out) if out.ndim == 0 else out


def skew_test_p(d: np.ndarray) -> np.ndarray:
    """skew_test's p for each row of d (rows of n >= 2 differences), vectorised: for simulations of the rule."""
    d = np.asarray(d, dtype=float)
    n = d.shape[-1]
    if n < 2:
        raise ValueError(f"skew_test_p needs rows of n >= 2 differences, got {n}")
    mean, sd = d.mean(-1), d.std(-1, ddof=1)
    flat = sd / math.sqrt(n) <= 1e-12 * np.maximum(1.0, np.abs(mean))
    with np.errstate(divide="ignore", invalid="ignore"):
        t, _, g = _g(np.where(flat[..., None], np.arange(n, dtype=float), d))  # a stand-in row where flat
    p = np.maximum(sps.t.sf(t, n - 1), skew_p(g, n))
    return np.where(flat, np.where(mean > 0, 0.5 ** n, 1.0), p)


def skew_test(diffs: Sequence[float]) -> SkewTest:
    """The one-sided test of mean(diffs) > 0 that holds its level for skewed spreads (module docstring)."""
    d = finite_array(diffs, "diffs")
    n = int(d.size)
    if n < 2:
        return SkewTest(n, float(d[0]) if n else None, None, None, None, None, None, "nothing measured")
    mean = float(d.mean())
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(n)
    if se <= 1e-12 * max(1.0, abs(mean)):  # every difference equal: the t is undefined (0 / 0)
        # of the 2^n sign patterns only the all-positive one has a mean this high: p = 1/2^n, never 0
        return SkewTest(n, mean, 0.0, 0.5 ** n if mean > 0 else 1.0, None, None, 0.0, "exact sign-flip (zero spread)")
    t, skew, g = (float(v[0]) for v in _g(d[None, :]))
    t_p = float(sps.t.sf(t, n - 1))
    sp = float(skew_p(g, n))
    return SkewTest(n, mean, se, max(t_p, sp), t_p, sp, skew, "paired t and skew-calibrated t")


def holdout_tasks_for_harm(k: int, level: float) -> int:
    """The fewest holdout tasks n with ((k - 1)/k)^n <= level: how many it takes before a harm to 1 task in k is
    missed by every sampled task no more often than `level` (a missed harm is confirmed by any test)."""
    if k < 2 or not 0 < level < 1:
        raise ValueError(f"holdout_tasks_for_harm needs k >= 2 and 0 < level < 1, got k={k}, level={level}")
    n = math.ceil(math.log(level) / math.log((k - 1) / k))
    while n > 1 and ((k - 1) / k) ** (n - 1) <= level:  # float error at an exact power
        n -= 1
    return n
