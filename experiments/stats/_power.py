"""Power by simulation: what a design can detect, and whether its test can reach alpha at all.

Minimum detectable effect (MDE) and tasks needed are computed by simulation, not by formula: per-task differences
d_i = effect + sd_diff * z_i with z_i standard normal (common random numbers across effects, numpy seed 0,
calibrate.sims samples), tested as the design's decision rule does it. The sweep's rule (experiments.stats.compare)
is a one-sided Wilcoxon p < alpha AND a mean difference above the noise floor (stats.FLOOR_SE = 2 standard
errors); the A/B's is a two-sided test (ab.test) in the right direction AND a mean difference that reaches the
pre-registered minimum effect (Design.min_mean: the verdict's own condition, so a true effect equal to it is
detected at most half the time). The MDE is the smallest effect detected with probability `power` (bisection);
it scales with sd_diff (both tests are scale-free; min_mean is scaled with it), so one unit MDE per
(n, test, alpha, min_mean / sd_diff) serves all. The Wilcoxon decisions are experiments.stats.wilcoxon_reject: the decisions of
stats.wilcoxon_test, asked only at the rejection boundary of W+ (scipy's vectorised exact test over 4000 runs took
0.06-0.13 s per call, 3x the time of a tasks-needed search with this shortcut). sd_diff for a sweep that reads a
calibration is sigma * sqrt(2) (candidate run vs one baseline run: the sweep skips its repeats); for an A/B with
R replications per arm, sigma * sqrt(2 / R). The normal-noise model is an approximation: scores are bounded and
tasks may interact with instructions. Design.effect_cv models the latter: task i's true effect is
effect * (1 + effect_cv * u_i) with u_i standard normal, so a spread that grows with the effect (a harmful
instruction that wrecks one task and helps another). effect_cv 0 is an effect of the same size on every task; a
calibration estimates effect_cv from its positive control (heterogeneity) and reports the MDE both ways. With
effect_cv > 0 the test's power has a ceiling below 1 however large the effect (the spread grows with it): a design
whose ceiling is below `power` has an infinite MDE, and only more tasks help.

Reachability and the design checks are in experiments.stats._reach; the power of a sweep's whole decision (its
train filter and holdout confirmation together) in experiments.stats._decision.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._reach import holdout_min_p, tasks_needed
from ._skew import skew_test_p
from ._tests import FLOOR_SE, min_attainable_p, wilcoxon_reject

MAX_TASKS = 500  # tasks-needed search stops here ("more than 500")


# -- looks that scale with the split: the race's and the futility stop's --------------------------------------

LOOK_PARTS = 4  # a look block is a quarter of the split, never fewer tasks than the configured block
FUTILITY_CP = 0.1  # the futility stop: conditional power below this under the effect the design detects


def look_block(n_tasks: int, block: int, parts: int = LOOK_PARTS) -> int:
    """The tasks per block of a sequence of looks over n_tasks: the configured `block` (sweep.race_block,
    sweep.holdout_futility_block) on a small split, a 1 / `parts` share of the split when that is larger, so that a
    grown split keeps the same few looks at the same fractions of its tasks (a block of 4 on 144 tasks looked 35
    times, each on a noisy prefix). 0 when `block` is 0 (off)."""
    if block <= 0 or n_tasks <= 0:
        return 0
    return max(int(block), int(n_tasks) // max(int(parts), 1))


def interim_looks(n_tasks: int, block: int, parts: int = LOOK_PARTS) -> tuple[int, ...]:
    """The numbers of tasks after which a sequence of looks looks: look_block, twice it, ..., one block fewer than
    fit in n_tasks, so that the last block holds whatever the blocks leave over (between one and two blocks) and
    ends with the split. None when the block is 0 or two blocks do not fit. A look one block short of every task
    would be the final test in all but name (114 holdout tasks in blocks of 28: a futility look at 112, where a
    stop is a failed final test read at a stricter bound), so the remainder joins the last block instead."""
    b = look_block(n_tasks, block, parts)
    return tuple(b * k for k in range(1, n_tasks // b)) if b > 0 else ()


def futility_bound(m: int, n: int, *, level: float, power: float = 0.8, min_cp: float = FUTILITY_CP) -> float:
    """The z below which a futility look after m of n tasks stops: the conditional power of the final one-sided
    test at `level`, under the effect the design detects with probability `power` (drift z_level + z_power on the
    final z scale), is below `min_cp` given the z so far (Lan and Wittes's B-value: B(t) = z sqrt(t), t = m / n;
    CP = Phi((B(t) + drift (1 - t) - z_level) / sqrt(1 - t))). Scale-free: the same bound at the same fraction of
    any holdout, z about -2.5 at a quarter, -0.5 at half, +0.7 at three quarters (level 0.025, power 0.8, 0.1)."""
    from scipy.stats import norm

    if not 0 < m < n:
        raise ValueError(f"futility_bound needs 0 < m < n, got m={m!r}, n={n!r}")
    t = m / n
    z_level = float(norm.isf(level))
    drift = z_level + float(norm.ppf(power))
    return (z_level - drift * (1.0 - t) + float(norm.ppf(min_cp)) * math.sqrt(1.0 - t)) / math.sqrt(t)


def look_z(d: np.ndarray) -> np.ndarray:
    """The z of each row's one-sided paired t (mean > 0) over its last axis: the normal quantile of the t p-value
    (n - 1 df), so that looks on few tasks are judged on the same scale as the final test. A row of equal values
    has z +inf above 0, -inf below, 0 at 0 (no spread: no evidence either way); fewer than 2 values give 0."""
    from scipy import stats as sps

    d = np.asarray(d, dtype=float)
    n = d.shape[-1]
    if n < 2:
        return np.zeros(d.shape[:-1])
    mean = d.mean(axis=-1)
    sd = d.std(axis=-1, ddof=1)
    flat = sd <= 1e-12 * np.maximum(1.0, np.abs(mean))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(flat, 0.0, mean / (sd / math.sqrt(n)))
        z = sps.norm.isf(np.clip(sps.t.sf(t, n - 1), 1e-300, 1.0))
    return np.where(flat, np.sign(mean) * np.inf, z)


# -- power by simulation --------------------------------------------------------------------------------------

# The decision rules a Design simulates: "wilcoxon" and "t" (an A/B's and a calibration's tests, stats.TESTS), "t-skew"
# (the sweep's holdout confirmation over tasks, experiments.stats.skew_test: p = max(paired t p, skew-calibrated p),
# one-sided) and "mean" (the train filter "positive": the mean above 0, no test).
DESIGN_TESTS = ("wilcoxon", "t", "t-skew", "mean")


@dataclass(frozen=True)
class Design:
    """A paired comparison over n tasks and the rule that calls a difference detected.

    sd_diff: SD of one task's difference from noise alone. floor_se: the mean difference must also exceed this
    many standard errors (sd_diff / sqrt(n)): 2 for the sweep's noise floor, 0 for an A/B.
    min_mean: the mean difference must also reach this absolute value (an A/B's pre-registered min_effect).
    sigma_df: when sd_diff is an estimate with this many degrees of freedom (a calibration's), the power is the
    predictive one: averaged over the true sd that estimate allows (sd_diff * sqrt(df / chi2_df) per simulated
    run), with the floor fixed where the estimate puts it. None: sd_diff is taken as known.
    """

    name: str
    n: int
    sd_diff: float
    alpha: float
    alternative: str = "greater"  # greater | two-sided (an effect is positive by convention)
    test: str = "wilcoxon"  # one of DESIGN_TESTS
    floor_se: float = 0.0
    sigma_df: int | None = None
    # tau_df: tau is an estimate read off a spread s^2 = tau^2 + tau_noise (tau_noise: the run noise's variance in
    # it, sigma^2 (1 + 1/b) for a sweep's train differences) with this many df: per simulated run the true s^2 is
    # drawn given the estimate (s^2 df / chi2_df) and the true tau^2 = s^2 - tau_noise (its sigma drawn as above),
    # floored at 0. None: tau is taken as known
    tau_df: int | None = None
    tau_noise: float = 0.0
    effect_cv: float = 0.0  # task-to-task spread of the true effect, relative to it (module docstring)
    min_mean: float = 0.0  # the mean difference must reach this too (the A/B verdict's min_effect)
    # the skew-calibrated one-sided p (skew_test_p) on the effect's side below alpha / 2 as well (alpha when
    # one-sided): the A/B verdict's 'supported' (experiments.stats.explain_verdict)
    skew_side: bool = False
    tau: float = 0.0  # task-to-task spread of the true effect in points, whatever its mean (a task x variant sd)
    # non-binding futility stop (sweep.holdout_futility_block, tests "t" and "t-skew"; experiments.promotion._futility.futility_stop's
    # rule): at the interim_looks of n tasks, a z so far below futility_bound (conditional power below futility_cp
    # under the effect detected with probability futility_power) stops it undetected; the test is over all n tasks
    futility_block: int = 0
    futility_cp: float = FUTILITY_CP
    futility_power: float = 0.8
    futility_level: float | None = None  # the final test's level the stop's bound assumes (None: alpha)
    # racing (sweep.race_block, test "mean" only: the train filter "positive" on the same train tasks): at the
    # interim_looks of n tasks a mean(d) + race_z sd(d) / sqrt(m) below 0 drops the candidate (race_step's rule)
    race_block: int = 0
    race_z: float = 1.0

    def __post_init__(self) -> None:
        if self.test not in DESIGN_TESTS:
            raise ValueError(f"Design.test must be one of {DESIGN_TESTS}, got {self.test!r}")
        if self.test == "t-skew" and self.alternative != "greater":
            raise ValueError(f"Design.test 't-skew' is one-sided (alternative 'greater'), got {self.alternative!r}")

    @property
    def floor(self) -> float:
        return self.floor_se * self.sd_diff / math.sqrt(self.n) if self.n else float("inf")

    def describe(self) -> str:
        side = "one-sided" if self.alternative == "greater" else "two-sided"
        floor = f" and mean > floor ({self.floor_se:g} SE)" if self.floor_se else ""
        floor += f" and mean >= min_effect {self.min_mean:g}" if self.min_mean else ""
        floor += " and skew-calibrated p on its side" if self.skew_side else ""
        spread = f", effect spread {self.effect_cv:.2f}x across tasks" if self.effect_cv else ""
        return f"{self.n} tasks, {side} {self.test}{floor}, sd_diff {self.sd_diff:.3f}{spread}"


@functools.lru_cache(maxsize=32)
def _normals(sims: int, n: int, seed: int) -> np.ndarray:
    z = np.random.default_rng([seed, n, sims]).standard_normal((sims, n))
    z.setflags(write=False)
    return z


def detection_rate(design: Design, effect: float, *, sims: int = 4000, seed: int = 0) -> float:
    """P(detected) when the mean true difference over tasks is `effect` (spread design.effect_cv around it) and
    the noise is normal with design.sd_diff. test "mean" (the train filter "positive"): detected when the mean
    difference is above 0, no test; test "t-skew": the sweep's confirmation, skew_test's p (skew_test_p, its
    reference tables cached per n) below alpha; with design.futility_block a simulated run stopped for futility is
    not detected."""
    if design.test == "mean":
        if design.n < 1:
            return 0.0
        sd = math.hypot(design.sd_diff, design.tau)  # the mean of n normal differences: P(mean > 0) exactly
        looks = interim_looks(design.n, design.race_block)
        if not looks or sd <= 0:
            return float(_norm_cdf(effect * math.sqrt(design.n) / sd)) if sd > 0 else float(effect > 0)
        d = effect + sd * _normals(sims, design.n, seed + 104729)  # raced on the same tasks the mean is taken on
        hit = d.mean(axis=1) > 0
        for m in looks:
            part = d[:, :m]
            hit &= ~(part.mean(axis=1) + design.race_z * part.std(axis=1, ddof=1) / math.sqrt(m) < 0)
        return float(hit.mean())
    if design.n < 1 or _floor_p(design.n, design.test, design.alternative) >= design.alpha:
        return 0.0
    z = _normals(sims, design.n, seed)
    ratio = np.ones(sims)  # true sigma^2 / its estimate, per simulated run
    if design.sigma_df:  # the true sd is uncertain: one draw per simulated run, given the estimate
        chi2 = np.random.default_rng([seed, design.n, sims, design.sigma_df]).chisquare(design.sigma_df, size=sims)
        ratio = design.sigma_df / chi2
        z = z * np.sqrt(ratio)[:, None]
    d = effect + design.sd_diff * z
    tau = design.tau
    if design.tau_df:  # the true tau given its estimate, one draw per simulated run
        chi2 = np.random.default_rng([seed, design.n, sims, design.tau_df, 1]).chisquare(design.tau_df, size=sims)
        spread = (design.tau ** 2 + design.tau_noise) * design.tau_df / chi2
        tau = np.sqrt(np.maximum(spread - design.tau_noise * ratio, 0.0))[:, None]
    if design.effect_cv or design.tau or design.tau_df:  # each task's own effect: its own draw, apart from the noise's
        u = _normals(sims, design.n, seed + 7919)
        d = d + (effect * design.effect_cv + tau) * u
    if design.test == "t":
        from scipy import stats as sps

        # the test experiments.stats.paired_ttest wraps (scipy's one-sample t on the differences), vectorised
        with np.errstate(all="ignore"):
            p = sps.ttest_1samp(d, 0.0, axis=1, alternative=design.alternative).pvalue
        hit = np.nan_to_num(p, nan=1.0) < design.alpha
    elif design.test == "t-skew":  # the sweep's holdout confirmation (TaskDiffs: skew_test), row by row
        hit = skew_test_p(d) < design.alpha
    else:
        hit = wilcoxon_reject(d, design.alpha, alternative=design.alternative)
    if design.skew_side:
        hit &= skew_test_p(d) < (design.alpha / 2 if design.alternative == "two-sided" else design.alpha)
    for m in interim_looks(design.n, design.futility_block):  # the non-binding futility looks (futility_stop)
        hit &= ~(look_z(d[:, :m]) < futility_bound(m, design.n, level=design.futility_level or design.alpha,
                                                   power=design.futility_power, min_cp=design.futility_cp))
    mean = d.mean(axis=1)
    hit &= mean > (design.floor if design.floor_se else 0.0)
    if design.min_mean:
        hit &= mean >= design.min_mean
    return float(hit.mean())


def _floor_p(n: int, test: str, alternative: str) -> float:
    """The smallest p the design's test can return over n tasks: min_attainable_p, and for "t-skew" the exact
    sign-flip p of n differences all of one sign (holdout_min_p), the floor below which the sweep's design check
    (sweep_design_problem) refuses a holdout."""
    return holdout_min_p(n) if test == "t-skew" else min_attainable_p(n, test=test, alternative=alternative)


def _norm_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


@functools.lru_cache(maxsize=256)
def _unit_mde(n: int, alpha: float, alternative: str, test: str, floor_se: float, power: float, sims: int,
              sigma_df: int | None = None, effect_cv: float = 0.0, min_mean: float = 0.0,
              skew_side: bool = False) -> float:
    """MDE in units of sd_diff (both tests are scale-free, so MDE = sd_diff * this; min_mean in the same units)."""
    if n < 1 or _floor_p(n, test, alternative) >= alpha:
        return float("inf")
    unit = Design("unit", n, 1.0, alpha, alternative, test, floor_se, sigma_df=sigma_df, effect_cv=effect_cv,
                  min_mean=min_mean, skew_side=skew_side)
    if effect_cv and detection_rate(unit, 1e6, sims=sims) < power:  # the ceiling: noise negligible, spread not
        return float("inf")
    return _smallest(lambda e: detection_rate(unit, e, sims=sims) >= power,
                     (4.0 + floor_se) / math.sqrt(n) + min_mean, doublings=40)


def _smallest(ok: Callable[[float], bool], start: float, *, doublings: int) -> float:
    """The smallest effect e >= 0 with ok(e) (ok monotone in e), to 0.1%: double from `start` until ok (halve while
    ok when `start` already is), then bisect; inf when `doublings` doublings never reach it. At most about
    doublings + 11 calls of ok (bisecting from 0 when ok(start) holds at once would go down to the smallest
    float: over 1,000 calls)."""
    lo, hi = 0.0, start
    if ok(hi):
        for _ in range(doublings):
            if not ok(hi / 2):
                lo = hi / 2
                break
            hi /= 2
        else:
            return hi
    else:
        for _ in range(doublings):
            lo, hi = hi, hi * 2
            if ok(hi):
                break
        else:
            return float("inf")
    while hi - lo > 1e-3 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def mde(design: Design, *, power: float = 0.8, sims: int = 4000) -> float:
    """The smallest effect detected with probability `power` (inf when the test cannot reach alpha)."""
    if design.min_mean and design.sd_diff <= 0:  # no noise: every effect that reaches min_mean is detected
        u = _unit_mde(design.n, design.alpha, design.alternative, design.test, 0.0, power, sims,
                      skew_side=design.skew_side)
        return design.min_mean if math.isfinite(u) else float("inf")
    u = _unit_mde(design.n, design.alpha, design.alternative, design.test, design.floor_se, power, sims,
                  design.sigma_df, design.effect_cv, design.min_mean / design.sd_diff if design.min_mean else 0.0,
                  design.skew_side)
    return u * design.sd_diff if math.isfinite(u) else float("inf")


def tasks_for_effect(design: Design, effect: float, *, power: float = 0.8, sims: int = 4000,
                     max_n: int = MAX_TASKS) -> int | None:
    """The fewest tasks with which `effect` is detected with probability `power` (None: more than max_n)."""
    if design.min_mean and effect <= design.min_mean and power > 0.5:  # the mean reaches it half the time at best
        return None
    if design.sd_diff <= 0:
        return tasks_needed(design.alpha, test=design.test, alternative=design.alternative)

    def ok(n: int) -> bool:
        return mde(dataclasses.replace(design, n=n), power=power, sims=sims) <= effect

    lo = max(tasks_needed(design.alpha, test=design.test, alternative=design.alternative), 2)
    if ok(lo):
        return lo
    hi = lo
    while not ok(hi):
        if hi >= max_n:
            return None
        lo, hi = hi, min(hi * 2, max_n)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def sweep_design(sigma: float, n_train: int, *, alpha: float, baseline_runs: int = 1) -> Design:
    """A sweep's decision (experiments.stats.compare): candidate run vs the mean of `baseline_runs` baseline runs,
    one-sided Wilcoxon p < alpha and mean difference > the noise floor 2 * sigma * sqrt((1 + 1/b) / n)."""
    return Design("sweep", n_train, sigma * math.sqrt(1.0 + 1.0 / max(baseline_runs, 1)), alpha, "greater",
                  "wilcoxon", FLOOR_SE)


def ab_design(sigma: float, n: int, *, alpha: float, replications: int, test: str, min_effect: float = 0.0,
              tau: float = 0.0) -> Design:
    """An A/B's verdict 'supported' (experiments.stats): per-task means of `replications` runs per arm, the
    two-sided test significant in the right direction, the skew-calibrated p on that side below alpha / 2, AND the
    mean difference reaching min_effect. A task's
    difference has sd sqrt(tau^2 + 2 sigma^2 / replications): run noise sigma shrinks with replications, the task x
    variant spread tau (how differently the two texts suit each task; the calibration's A/A' arm) does not."""
    return Design("ab", n, math.sqrt(tau ** 2 + 2.0 * sigma ** 2 / max(replications, 1)), alpha, "two-sided", test,
                  0.0, min_mean=min_effect, skew_side=True)


def replications_for_effect(sigma: float, n: int, effect: float, *, alpha: float, test: str, power: float = 0.8,
                            sims: int = 4000, max_reps: int = 1000, min_effect: float = 0.0,
                            tau: float = 0.0) -> int | None:
    """The fewest replications per arm for an A/B over n tasks to detect `effect` (None: unreachable), the mean
    also reaching min_effect as the verdict requires. Replications shrink run noise only: where the task x variant
    spread tau alone keeps `effect` out of reach over n tasks, no number of replications reaches it (None)."""
    u = mde(ab_design(1.0, n, alpha=alpha, replications=2, test=test), power=power, sims=sims)  # per-task sd 1
    if not math.isfinite(u):
        return None
    if not min_effect:
        room = (effect / u) ** 2 - tau ** 2  # the variance left for run noise, 2 sigma^2 / reps
        if room <= 0:
            return None
        reps = max(1, math.ceil(2.0 * sigma ** 2 / room - 1e-9))
        return reps if reps <= max_reps else None
    if effect <= min_effect and power > 0.5:  # the observed mean reaches min_effect half the time at best
        return None

    def ok(reps: int) -> bool:  # more replications only shrink the noise, so power grows with them
        d = ab_design(sigma, n, alpha=alpha, replications=reps, test=test, min_effect=min_effect, tau=tau)
        return detection_rate(d, effect, sims=sims) >= power

    if not ok(max_reps):
        return None
    lo, hi = 0, max_reps  # ok(hi), not ok(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi
