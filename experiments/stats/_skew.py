"""The one-sided test of a mean gain over tasks that holds its level when the per-task differences are skewed: the
sweep's holdout confirmation (experiments.sweep's TaskDiffs).

Why the paired t alone is not enough: with a left-skewed spread of zero mean (most tasks gain a little, a few lose
more) the few tasks that carry the losses are often not among the n sampled, the sample looks like a clear gain and
the t confirms far above its level. Over 12 tasks at level 0.025: -(Exp - 1) 0.091, -(lognormal sigma 1) 0.154
(bench/power/skew_level.py, 20,000 worlds). Hall's (1992) skewness-corrected t against the t's critical value (second-order
correct) and a studentized bootstrap (bootstrap-t, 999 resamples) take off less than half of the excess (0.059 /
0.089 and 0.049 / 0.080, 4,000 worlds): at 12 tasks the sample skewness both read is itself mostly hidden with the
tail.

The test (skew_test): p = max(p_t, p_skew).
- p_t: the one-sided paired t's p (n - 1 df), kept, so a confirmation is never easier than the t's.
- p_skew: from two statistics of the sample, T and G = g(T, KAPPA * a) (Hall's monotone transformation g(T, a) = T +
  a/6 + a T^2/3 + a^2 T^3/27, a = sample skewness / sqrt(n), read KAPPA = 2 times as strongly), Q = min(P(G >= g),
  P(T >= t) / T_SHARE) with both tails those of the heaviest reference spread (-(lognormal sigma 1) at mean 0), and
  p_skew the largest over the reference spreads (REFERENCE_SPREADS, each at mean 0: normal, -(Exp - 1), -(lognormal
  sigma 1), that lognormal scaled to sd 1 with normal run noise of sd 0.2, 0.41, 0.6 and 1 added, and the loss tail) of the
  chance of a Q at least as small, from seeded simulation (reference: WORLDS samples of n per spread, cached per
  n; (1 + hits) / (1 + draws)). Both statistics are scale-free, so a spread's shape is all their null law depends
  on. For each reference spread
  P(p_skew <= x) <= x for every x (up to the simulation's error), so a look's level and Holm's step-down over
  candidates hold for every one of them, and for any spread whose tail of Q lies under theirs (right skew, t(3), a
  milder left skew; measured in bench/power/skew_level.py and bench/power/level_with_noise.py). Why two: G reads the
  skewness, which is what tells a sample of a clear gain from one of a zero-mean left skew whose losses were not
  drawn; but for a negative a, g flattens near T = 3 / |a|, so G alone caps the evidence of a very large T with some
  chance skewness (a gain of 3 sd over 12 tasks was confirmed 0.94 / 0.78 of the time at 0.025 / 0.00625 on G
  alone). The plain T's tail, at T_SHARE = 0.5 of the weight, confirms such a gain (0.998 / 0.91) at a small cost at
  1 sd. KAPPA and T_SHARE were chosen by power on a normal spread at 1 to 4 sd over 8 and 12 tasks, levels 0.025 to
  0.0016 (a one-off simulation: KAPPA 1, mean_bound's scale, is 0.15 lower at 1 sd; T_SHARE 1 is 0.07 lower at 1 sd,
  0.25 is 0.05 lower at 4 sd and level 0.0016). The power figures with the t's beside them:
  bench/power/skew_level.py, bench/power/level_with_noise.py and docs/VERDICTS.md.
- Why the noisy references: every sweep's per-task differences carry run noise (sd 0.41 at sigma 0.5 and 3 + 3
  runs). Noise convolved into a left-skewed spread hides the skewness the sample shows, while the tail that is not
  drawn still lifts the mean: read against the noise-free references only, -(lognormal) plus noise 0.41 was
  confirmed 0.041 of the time over 24 tasks at 0.025 (0.031 over 12, 0.035 over 48), the worst noise ratio moving
  from about 0.2 at 12 tasks to 0.6-1 at 144. They cost power at 12-48 tasks (docs/VERDICTS.md).
- Why the loss tail (LOSS_TAIL, a normal spread with a 10% chance of a loss of 5 sd, skewness -1.5): a task that
  an edit breaks outright is the common harm, and read against the other references only that shape is confirmed
  0.036 / 0.040 of the time at 12 / 24 tasks at level 0.025 (bench/power/level_with_noise.py, column "no loss tail"). A sample without a loser (0.9^n:
  0.28 of samples at 12 tasks, 0.08 at 24) is a normal sample of a gain of 0.56 sd, so any rule that holds this
  shape's level caps its power at such a gain near 0.025 / 0.9^n (0.09 at 12 tasks, 0.31 at 24): its price is power
  at 12-24 tasks (docs/VERDICTS.md), none at 144.
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

KAPPA = 2.0
# sd 1 around +5/9, a 10% chance of -5 instead (mean 0, skewness -1.5): the harm to 1 task in 10 (docstring)
LOSS_TAIL = "normal, 1 in 10 loses 5"
# the lognormal with normal run noise convolved in, at these ratios of the noise's sd to the lognormal's own
NOISE_RATIOS = (0.2, 0.41, 0.6, 1.0)
REFERENCE_SPREADS = ("normal", "-(Exp - 1)", "-(lognormal sigma 1)",
                     *(f"-(lognormal sigma 1) + noise {r:g}" for r in NOISE_RATIOS), LOSS_TAIL)
HEAVIEST = "-(lognormal sigma 1)"  # the reference whose tails Q reads
T_SHARE = 0.5  # the weight of the plain T's tail in Q against G's (module docstring)
WORLDS = 200_000  # reference samples per spread (fewer above 50 tasks: WORLD_VALUES)
WORLD_VALUES = 10_000_000
SEED = 52
_LOGNORMAL_SD = math.sqrt((math.e - 1.0) * math.e)  # the sd of a lognormal sigma 1
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


def _hall(t: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Hall's monotone skewness correction of the t statistic (a = sample skewness / sqrt(n)); the A/B's
    skew-robust bound (experiments.stats._verdict's mean_bound) reads it too."""
    return t + a / 6 + a * t**2 / 3 + a**2 * t**3 / 27


def statistics_of(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of d (rows with spread): T, the sample skewness, and G = g(T, KAPPA * skewness / sqrt(n))."""
    n = d.shape[-1]
    mean = d.mean(-1)
    c = d - mean[..., None]
    c2 = c * c  # products, not powers: this runs over every reference sample (tens of millions of values)
    sd = np.sqrt(c2.sum(-1) / (n - 1))
    t = mean / (sd / math.sqrt(n))
    skew = (c2 * c).mean(-1) / sd**3
    return t, skew, _hall(t, KAPPA * skew / math.sqrt(n))


def reference_sample(shape: str, rng: np.random.Generator, size: tuple[int, int]) -> np.ndarray:
    """Draws of one reference spread (a name of REFERENCE_SPREADS or LOSS_TAIL) at mean 0, `size` (worlds, n)."""
    if shape == "normal":
        return rng.standard_normal(size)
    if shape == "-(Exp - 1)":
        return 1.0 - rng.exponential(1.0, size)
    if shape == "-(lognormal sigma 1)":
        return math.exp(0.5) - np.exp(rng.standard_normal(size))
    if shape.startswith("-(lognormal sigma 1) + noise "):  # scaled to sd 1, then noise of sd r added
        r = float(shape.rsplit(" ", 1)[1])
        return reference_sample("-(lognormal sigma 1)", rng, size) / _LOGNORMAL_SD + r * rng.standard_normal(size)
    if shape == LOSS_TAIL:
        return np.where(rng.random(size) < 0.1, -5.0, rng.standard_normal(size) + 5.0 / 9.0)
    raise ValueError(f"unknown reference spread {shape!r}")


@dataclass(frozen=True)
class _Reference:
    """Per n: the heaviest reference's (the lognormal's) sorted T and G, and each reference spread's sorted Q."""

    t: np.ndarray
    g: np.ndarray
    q: tuple[np.ndarray, ...]

    def tail_q(self, t: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Q = min(P_lognormal(G >= g), T_SHARE_INVERSE * P_lognormal(T >= t)), from the stored lognormal sample."""
        tail_g = (self.g.size - np.searchsorted(self.g, g, side="left")) / self.g.size
        tail_t = (self.t.size - np.searchsorted(self.t, t, side="left")) / self.t.size
        return np.minimum(tail_g, tail_t / T_SHARE)


@functools.lru_cache(maxsize=16)
def reference(n: int) -> _Reference:
    """The seeded mean-zero samples of n from each reference spread (REFERENCE_SPREADS), reduced to what skew_p
    reads."""
    if n < 2:
        raise ValueError(f"reference needs n >= 2, got {n}")
    worlds = max(20_000, min(WORLDS, WORLD_VALUES // n))
    tg = []
    for i, shape in enumerate(REFERENCE_SPREADS):
        rng = np.random.default_rng([SEED, n, i])
        with np.errstate(divide="ignore", invalid="ignore"):  # the loss tail's rare all-lose row has no spread
            parts = [statistics_of(reference_sample(shape, rng, (min(_CHUNK, worlds - s), n)))
                     for s in range(0, worlds, _CHUNK)]
        # such a row shows no gain: T and G at -inf (its Q is 1), not NaN (which would sort as the largest)
        tg.append(tuple(np.nan_to_num(np.concatenate([p[k] for p in parts]), nan=-np.inf) for k in (0, 2)))
    heaviest = tg[REFERENCE_SPREADS.index(HEAVIEST)]
    ref = _Reference(np.sort(heaviest[0]), np.sort(heaviest[1]), ())
    return _Reference(ref.t, ref.g, tuple(np.sort(ref.tail_q(t, g)) for t, g in tg))


def skew_p(t: float | np.ndarray, g: float | np.ndarray, n: int) -> float | np.ndarray:
    """The largest over the reference spreads of P(Q <= q) at mean 0, q this sample's Q, (1 + hits) / (1 + draws)."""
    ref = reference(n)
    q = ref.tail_q(np.asarray(t, dtype=float), np.asarray(g, dtype=float))
    out = np.max([(1 + np.searchsorted(qs, q, side="right")) / (1 + qs.size) for qs in ref.q], axis=0)
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
        t, _, g = statistics_of(np.where(flat[..., None], np.arange(n, dtype=float), d))  # a stand-in row where flat
    p = np.maximum(sps.t.sf(t, n - 1), skew_p(t, g, n))
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
    t, skew, g = (float(v[0]) for v in statistics_of(d[None, :]))
    t_p = float(sps.t.sf(t, n - 1))
    sp = float(skew_p(t, g, n))
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
