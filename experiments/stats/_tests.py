"""Paired statistics: one module for the sweep, the A/B test and the calibration.

Convention everywhere: a difference is candidate (arm B) minus baseline (arm A), one value per task. A/B tests are
two-sided (a pre-registered direction decides which sign counts, experiments.stats); the sweep's comparison is
one-sided (candidate > baseline).

Methods, stated so a reviewer can check them:
- Wilcoxon signed-rank, zeros dropped (Wilcoxon's convention, as scipy's default), the one path for every caller.
  Up to 50 non-zero differences the p-value is exact: scipy.stats.wilcoxon(method="exact") when the |differences|
  have no ties; with ties scipy's exact distribution assumes distinct ranks, so the null distribution is
  enumerated here over the 2^n sign assignments of the midranks (exact conditional on the observed ranks, what
  scipy's PermutationMethod computes by brute force). Above 50 the normal approximation with tie correction
  (scipy "asymptotic"). The method used is recorded. wilcoxon_reject takes the same decisions over many rows
  at once (the calibration's power simulation).
- Paired t-test (scipy.stats.ttest_1samp on the differences).
- Bootstrap CI of the mean: scipy.stats.bootstrap, tasks resampled with replacement, rng seeded; BCa by default,
  percentile on request or when BCa is undefined (every resample on one side of the estimate).
- Effect sizes: Cohen's dz = mean(d) / sd(d, ddof=1); matched-pairs rank-biserial r = (W+ - W-) / (W+ + W-)
  (Kerby 2014).
- Noise floor (one definition, FLOOR_SE = 2 standard errors, the sweep's documented rule that
  experiments.stats simulates): a mean difference within two standard errors of what run-to-run noise alone
  produces is not an effect. NoiseFloor measures sigma from repeated runs of one configuration (the sweep's
  baseline repeats, a calibration); ReplicationNoise measures it per arm from an A/B's replications.
- Holm-Bonferroni step-down adjusted p-values.
- Variance ratio: one-sided F test of one SD estimate above another (the calibration's judge re-score SD against
  its generator SD, which contains the judge's share and so cannot truly be smaller).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy import stats as sps

DIRECTIONS = ("greater", "less", "two-sided")
TESTS = ("wilcoxon", "t")
EXACT_MAX_N = 50
FLOOR_SE = 2.0  # the noise floor: this many standard errors of the mean difference noise alone would produce


# -- data ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WilcoxonTest:
    statistic: float  # min(W+, W-) as scipy reports for the two-sided test
    pvalue: float
    method: str  # "exact", "exact (ties: conditional on midranks)", "asymptotic (tie-corrected)", "degenerate"
    n_nonzero: int
    n_zero: int
    w_plus: float
    w_minus: float


@dataclass(frozen=True)
class TTest:
    statistic: float
    pvalue: float
    df: int


@dataclass(frozen=True)
class BootstrapCI:
    low: float
    high: float
    level: float
    method: str  # "bca", "percentile", "degenerate", "undefined"
    n_resamples: int
    seed: int


@dataclass(frozen=True)
class NoiseFloor:
    """Run-to-run noise of one configuration, from r runs with different seeds over the same tasks.

    sigma: pooled within-task standard deviation. floor(n, baseline_runs): FLOOR_SE standard errors of the
    difference between one candidate run and a baseline reference averaged over baseline_runs runs, both of the
    same instruction, over n tasks: 2 * sigma * sqrt((1 + 1/baseline_runs) / n). 0 when nothing was measured.
    """

    sigma: float
    repeats: int
    n_tasks: int
    range_of_means: float
    per_task_sd: dict[str, float] = field(default_factory=dict)

    @property
    def df(self) -> int:
        """The degrees of freedom of sigma's estimate: tasks x (repeats - 1), 0 when nothing was measured."""
        return max(int(self.n_tasks) * (int(self.repeats) - 1), 0)

    def floor(self, n: int, baseline_runs: int = 1) -> float:
        if self.repeats < 2 or n < 1:
            return 0.0
        return FLOOR_SE * self.sigma * math.sqrt((1.0 + 1.0 / max(baseline_runs, 1)) / n)


@dataclass(frozen=True)
class ReplicationNoise:
    """What replication noise alone would do to an A/B's mean difference (per-arm replications of each task)."""

    sd_a: float  # pooled within-task SD of replications, arm A
    sd_b: float
    sd_within: float  # pooled over both arms
    reps_a: float  # mean replications per task used
    reps_b: float
    n_tasks: int
    sd_task_diff: float  # SD of one task's difference from noise alone
    sd_mean_diff: float  # SD of the mean difference over tasks from noise alone
    floor: float  # FLOOR_SE * sd_mean_diff: a mean difference smaller than this is within noise

    def clears(self, mean_diff: float) -> bool:
        return bool(np.isfinite(self.floor)) and abs(mean_diff) > self.floor


@dataclass(frozen=True)
class PairedStats:
    metric: str
    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    sd_diff: float
    ci: BootstrapCI
    wilcoxon: WilcoxonTest
    ttest: TTest
    dz: float
    rank_biserial: float
    diffs: tuple[float, ...]
    noise: ReplicationNoise | None = None
    p_holm: float | None = None  # Holm-adjusted p of the test named in `holm_test`, within its family
    holm_test: str = "wilcoxon"

    def p(self, test: str = "wilcoxon") -> float:
        if test not in TESTS:
            raise ValueError(f"test must be one of {TESTS}, got {test!r}")
        return self.wilcoxon.pvalue if test == "wilcoxon" else self.ttest.pvalue

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Comparison:
    """The sweep's paired comparison of a candidate with the baseline reference over the tasks both have."""

    diff: float  # mean over tasks of candidate - baseline
    p_value: float  # one-sided paired Wilcoxon signed-rank over tasks (candidate > baseline)
    floor: float
    n: int
    alpha: float
    claimed: bool  # diff > floor and p < alpha
    min_possible_p: float

    @property
    def reason(self) -> str:
        if self.claimed:
            return f"improvement: +{self.diff:.3f} > floor {self.floor:.3f} and p={self.p_value:.4f} < {self.alpha}"
        why = []
        if self.diff <= self.floor:
            why.append(f"difference {self.diff:+.3f} within noise floor {self.floor:.3f}")
        if not self.p_value < self.alpha:
            why.append(f"p={self.p_value:.4f} >= alpha {self.alpha}")
            if self.min_possible_p >= self.alpha:
                why.append(f"n={self.n} tasks cannot reach alpha (smallest possible p={self.min_possible_p:.4f})")
        return "not an improvement: " + "; ".join(why)

    def filter_reason(self, candidates: int) -> str:
        """The same decision worded as the filter it is when the candidate is the best of `candidates` compared:
        its p is one test's, not corrected for choosing the best, so it claims nothing alone."""
        chose = (f"the best of {candidates} candidates, p not corrected for that choice"
                 if candidates > 1 else "one candidate")
        verdict = ("passes: " if self.claimed else "does not pass: ") + self.reason.split(": ", 1)[1]
        return f"{verdict} ({chose}; a filter for the holdout test, not a claim)"


# -- tests and estimators -----------------------------------------------------------------------------------------


def finite_array(values: Sequence[float], name: str) -> np.ndarray:
    """values as a flat float array; ValueError naming `name` when any is not a finite number."""
    arr = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite numbers, got {list(values)!r}")
    return arr


SPREAD_TOL = 1e-9  # a spread at most this share of the values' size (at least 1) is float rounding, not a spread


def no_spread(values: Sequence[float] | np.ndarray) -> bool:
    """Whether the values are equal up to float rounding: their range at most SPREAD_TOL x max(1, largest |value|).

    Means of several runs that are equal in exact arithmetic differ in the last bits (peak to peak 6.7e-16 for
    differences of means of 3 runs); read as a spread, that noise gives a t of 1e15 and a bound on the mean at the
    mean itself, where exactly equal values give no spread to test or bound with. Equal within rounding is equal."""
    x = np.asarray(values, dtype=float).ravel()
    if x.size < 2:
        return True
    return bool(np.ptp(x) <= SPREAD_TOL * max(1.0, float(np.abs(x).max())))


def paired_differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    """Per-pair differences b - a."""
    xa, xb = finite_array(a, "a"), finite_array(b, "b")
    if xa.shape != xb.shape:
        raise ValueError(f"paired samples need equal lengths, got {xa.size} (A) and {xb.size} (B)")
    return xb - xa


def _signed_ranks(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    nz = d[d != 0]
    return sps.rankdata(np.abs(nz)), nz


def _exact_given_midranks(ranks: np.ndarray, w_plus: float, alternative: str) -> float:
    """Exact p of W+ over the 2^n equally likely sign assignments of these (mid)ranks (doubled to integers)."""
    doubled = np.rint(2 * ranks).astype(int)
    total = int(doubled.sum())
    dist = np.zeros(total + 1)
    dist[0] = 1.0
    for r in doubled:
        dist[r:] = 0.5 * dist[r:] + 0.5 * dist[: total + 1 - r].copy()
        dist[:r] *= 0.5
    obs = int(np.rint(2 * w_plus))
    cdf_le, sf_ge = dist[: obs + 1].sum(), dist[obs:].sum()
    p = sf_ge if alternative == "greater" else cdf_le if alternative == "less" else 2 * min(cdf_le, sf_ge)
    return float(min(p, 1.0))


def _check_alternative(alternative: str) -> None:
    if alternative not in DIRECTIONS:
        raise ValueError(f"alternative must be two-sided|greater|less, got {alternative!r}")


def wilcoxon_test(diffs: Sequence[float], *, alternative: str = "two-sided") -> WilcoxonTest:
    """Wilcoxon signed-rank test on paired differences (see the module docstring for the method choice)."""
    _check_alternative(alternative)
    d = finite_array(diffs, "diffs")
    ranks, nz = _signed_ranks(d)
    n, n_zero = int(nz.size), int(d.size - nz.size)
    w_plus = float(ranks[nz > 0].sum())
    w_minus = float(ranks[nz < 0].sum())
    stat = min(w_plus, w_minus) if alternative == "two-sided" else w_plus
    if n == 0:
        return WilcoxonTest(0.0, 1.0, "degenerate (all differences zero)", 0, n_zero, 0.0, 0.0)
    if n > EXACT_MAX_N:
        res = sps.wilcoxon(d, zero_method="wilcox", alternative=alternative, method="asymptotic")
        return WilcoxonTest(stat, float(res.pvalue), "asymptotic (tie-corrected)", n, n_zero, w_plus, w_minus)
    if np.unique(ranks).size < n:
        p = _exact_given_midranks(ranks, w_plus, alternative)
        return WilcoxonTest(stat, p, "exact (ties: conditional on midranks)", n, n_zero, w_plus, w_minus)
    p = float(sps.wilcoxon(nz, alternative=alternative, method="exact").pvalue)
    return WilcoxonTest(stat, min(p, 1.0), "exact", n, n_zero, w_plus, w_minus)


_P_AT_W: dict[tuple[int, float, str], float] = {}  # (n, W+, alternative) -> wilcoxon_test p, rows without ties


def _first_true(values: np.ndarray, pred: Any) -> float | None:
    """The first of the ascending values where the monotone predicate turns true, or None."""
    lo, hi = 0, len(values)
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(float(values[mid])):
            hi = mid
        else:
            lo = mid + 1
    return float(values[lo]) if lo < len(values) else None


def wilcoxon_reject(rows: np.ndarray, alpha: float, *, alternative: str) -> np.ndarray:
    """wilcoxon_test(row).pvalue < alpha for every row of a 2-D array (the calibration's power simulation: thousands
    of rows per call). For rows without zeros or tied |values| the p-value depends on W+ alone and falls
    monotonically away from n(n+1)/4, so wilcoxon_test is asked only at the rejection boundary of W+ (binary
    search, cached); other rows are tested one by one. Same decisions as the row-by-row test, faster than scipy's
    vectorised exact test at this size."""
    _check_alternative(alternative)
    d = np.asarray(rows, dtype=float)
    n = d.shape[1]
    a = np.sort(np.abs(d), axis=1)
    plain = (a[:, 0] > 0) & ~(np.diff(a, axis=1) == 0).any(axis=1)
    reject = np.zeros(len(d), dtype=bool)
    if not plain.all():  # rows with zeros or ties: each distinct row tested once (no noise: every row the same)
        rest = np.flatnonzero(~plain)
        uniq_rows, inverse = np.unique(d[rest], axis=0, return_inverse=True)
        hits = np.array([wilcoxon_test(r, alternative=alternative).pvalue < alpha for r in uniq_rows])
        reject[rest] = hits[np.ravel(inverse)]
    if not plain.any():
        return reject
    idx = np.flatnonzero(plain)
    ranks = np.abs(d[idx]).argsort(axis=1).argsort(axis=1) + 1.0
    w = (ranks * (d[idx] > 0)).sum(axis=1)
    uniq, first = np.unique(w, return_index=True)
    example = {float(u): d[idx[i]] for u, i in zip(uniq, first)}

    def p(u: float) -> float:
        key = (n, u, alternative)
        if key not in _P_AT_W:
            _P_AT_W[key] = wilcoxon_test(example[u], alternative=alternative).pvalue
        return _P_AT_W[key]

    hit = np.zeros(len(idx), dtype=bool)
    center = n * (n + 1) / 4.0
    if alternative in ("greater", "two-sided"):  # p falls as W+ grows above the center
        cut = _first_true(uniq[uniq >= center] if alternative == "two-sided" else uniq, lambda u: p(u) < alpha)
        if cut is not None:
            hit |= w >= cut
    if alternative in ("less", "two-sided"):  # p falls as W+ shrinks below the center
        lower = uniq[uniq <= center] if alternative == "two-sided" else uniq
        cut = _first_true(lower[::-1], lambda u: p(u) < alpha)
        if cut is not None:
            hit |= w <= cut
    reject[idx] = hit
    return reject


def min_attainable_p(n: int, *, test: str = "wilcoxon", alternative: str = "two-sided") -> float:
    """The smallest p-value the test can return with n paired differences over tasks.

    Exact Wilcoxon signed-rank: every difference of one sign, so 1 / 2^n one-sided and 2 / 2^n two-sided. The
    paired t-test has no floor once n >= 2 (p -> 0 as the spread shrinks), and no test below 2 pairs.
    """
    if test not in TESTS:
        raise ValueError(f"test must be one of {TESTS}, got {test!r}")
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided|greater|less, got {alternative!r}")
    if test == "t":
        return 0.0 if n >= 2 else 1.0
    if n < 1:
        return 1.0
    return min(1.0, (1.0 if alternative != "two-sided" else 2.0) * 0.5 ** n)  # 2.0 ** n overflows past 1023


def _exact_floor(n: int) -> float:
    return min_attainable_p(n, test="wilcoxon", alternative="two-sided")


def paired_ttest(diffs: Sequence[float], *, exact_floor: bool = False) -> TTest:
    """Two-sided one-sample t-test of the differences against 0 (the paired t-test).

    exact_floor (the A/B's t): the p is never below min_attainable_p(n), 2 / 2^n, the
    exact sign-flip p of n differences all of one sign; below it the t rests on a normal spread alone. n equal
    differences have no spread: t is +-inf and, without the floor, p is 0 (scipy's limit); with it, 2 / 2^n, their
    exact p (a 0/1 metric with one pass rate in both arms over 2 tasks gives (+1, +1) a quarter of the times both
    differences are non-zero)."""
    d = finite_array(diffs, "diffs")
    n = d.size
    if n < 2:
        return TTest(float("nan"), 1.0, max(n - 1, 0))
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    floor = _exact_floor(n) if exact_floor else 0.0
    if no_spread(d):
        return TTest(0.0 if mean == 0 else math.copysign(math.inf, mean), 1.0 if mean == 0 else floor, n - 1)
    res = sps.ttest_1samp(d, 0.0)
    return TTest(float(res.statistic), max(float(res.pvalue), floor), n - 1)


def cohens_dz(diffs: Sequence[float]) -> float:
    """Standardised mean difference of paired data: mean(d) / sd(d, ddof=1)."""
    d = finite_array(diffs, "diffs")
    if d.size < 2:
        return float("nan")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if no_spread(d):
        return 0.0 if mean == 0 else math.copysign(math.inf, mean)
    return mean / sd


def rank_biserial(diffs: Sequence[float]) -> float:
    """Matched-pairs rank-biserial correlation (W+ - W-) / (W+ + W-), zeros dropped; 0 when all are zero."""
    ranks, nz = _signed_ranks(finite_array(diffs, "diffs"))
    total = float(ranks.sum())
    if total == 0:
        return 0.0
    return float((ranks[nz > 0].sum() - ranks[nz < 0].sum()) / total)


def bootstrap_ci(
    diffs: Sequence[float], *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0, method: str = "bca"
) -> BootstrapCI:
    """Bootstrap CI of the mean (scipy.stats.bootstrap; tasks resampled with replacement, rng seeded)."""
    if method not in ("bca", "percentile"):
        raise ValueError(f"method must be 'bca' or 'percentile', got {method!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    d = finite_array(diffs, "diffs")
    if d.size < 2:
        return BootstrapCI(float("nan"), float("nan"), level, "undefined (n < 2)", n_resamples, seed)
    theta = float(d.mean())
    if np.all(d == d[0]):
        return BootstrapCI(theta, theta, level, "degenerate (all differences equal)", n_resamples, seed)

    def ci(how: str) -> tuple[float, float]:
        with warnings.catch_warnings():  # BCa undefined (every resample on one side): NaN and a warning; handled
            warnings.simplefilter("ignore", sps.DegenerateDataWarning)
            res = sps.bootstrap((d,), np.mean, confidence_level=level, n_resamples=n_resamples, method=how, rng=seed)
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    if method == "bca":
        low, high = ci("BCa")
        if math.isfinite(low) and math.isfinite(high):
            return BootstrapCI(low, high, level, "bca", n_resamples, seed)
    low, high = ci("percentile")
    return BootstrapCI(low, high, level, "percentile", n_resamples, seed)
