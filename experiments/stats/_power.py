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

A design whose test can never reach alpha (min_attainable_p) is refused by experiments.config.validate
unless allowed: sweep_design_problem and calibrate_design_problem say why, in one line.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ._tests import FLOOR_SE, TESTS, wilcoxon_reject

if TYPE_CHECKING:
    from experiments.config import ExperimentConfig

MAX_TASKS = 500  # tasks-needed search stops here ("more than 500")


# -- reachability: can the test reach alpha at all? -----------------------------------------------------------


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
    return min(1.0, (1.0 if alternative != "two-sided" else 2.0) / 2.0 ** n)


def tasks_needed(alpha: float, *, test: str = "wilcoxon", alternative: str = "two-sided") -> int:
    """The fewest tasks with which `test` can return p < alpha."""
    n = 1
    while min_attainable_p(n, test=test, alternative=alternative) >= alpha:
        n += 1
    return n


# -- power by simulation --------------------------------------------------------------------------------------


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
    test: str = "wilcoxon"  # wilcoxon | t
    floor_se: float = 0.0
    sigma_df: int | None = None
    effect_cv: float = 0.0  # task-to-task spread of the true effect, relative to it (module docstring)
    min_mean: float = 0.0  # the mean difference must reach this too (the A/B verdict's min_effect)
    tau: float = 0.0  # task-to-task spread of the true effect in points, whatever its mean (a task x variant sd)

    @property
    def floor(self) -> float:
        return self.floor_se * self.sd_diff / math.sqrt(self.n) if self.n else float("inf")

    def describe(self) -> str:
        side = "one-sided" if self.alternative == "greater" else "two-sided"
        floor = f" and mean > floor ({self.floor_se:g} SE)" if self.floor_se else ""
        floor += f" and mean >= min_effect {self.min_mean:g}" if self.min_mean else ""
        spread = f", effect spread {self.effect_cv:.2f}x across tasks" if self.effect_cv else ""
        return f"{self.n} tasks, {side} {self.test}{floor}, sd_diff {self.sd_diff:.3f}{spread}"


@functools.lru_cache(maxsize=32)
def _normals(sims: int, n: int, seed: int) -> np.ndarray:
    z = np.random.default_rng([seed, n, sims]).standard_normal((sims, n))
    z.setflags(write=False)
    return z


def detection_rate(design: Design, effect: float, *, sims: int = 4000, seed: int = 0) -> float:
    """P(detected) when the mean true difference over tasks is `effect` (spread design.effect_cv around it) and
    the noise is normal with design.sd_diff."""
    if design.n < 1 or min_attainable_p(design.n, test=design.test, alternative=design.alternative) >= design.alpha:
        return 0.0
    z = _normals(sims, design.n, seed)
    if design.sigma_df:  # the true sd is uncertain: one draw per simulated run, given the estimate
        chi2 = np.random.default_rng([seed, design.n, sims, design.sigma_df]).chisquare(design.sigma_df, size=sims)
        z = z * np.sqrt(design.sigma_df / chi2)[:, None]
    d = effect + design.sd_diff * z
    if design.effect_cv or design.tau:  # each task's own effect: its own draw, apart from the noise's
        u = _normals(sims, design.n, seed + 7919)
        d = d + (effect * design.effect_cv + design.tau) * u
    if design.test == "t":
        from scipy import stats as sps

        # the test experiments.stats.paired_ttest wraps (scipy's one-sample t on the differences), vectorised
        with np.errstate(all="ignore"):
            p = sps.ttest_1samp(d, 0.0, axis=1, alternative=design.alternative).pvalue
        hit = np.nan_to_num(p, nan=1.0) < design.alpha
    else:
        hit = wilcoxon_reject(d, design.alpha, alternative=design.alternative)
    mean = d.mean(axis=1)
    hit &= mean > (design.floor if design.floor_se else 0.0)
    if design.min_mean:
        hit &= mean >= design.min_mean
    return float(hit.mean())


@functools.lru_cache(maxsize=256)
def _unit_mde(n: int, alpha: float, alternative: str, test: str, floor_se: float, power: float, sims: int,
              sigma_df: int | None = None, effect_cv: float = 0.0, min_mean: float = 0.0) -> float:
    """MDE in units of sd_diff (both tests are scale-free, so MDE = sd_diff * this; min_mean in the same units)."""
    if n < 1 or min_attainable_p(n, test=test, alternative=alternative) >= alpha:
        return float("inf")
    unit = Design("unit", n, 1.0, alpha, alternative, test, floor_se, sigma_df=sigma_df, effect_cv=effect_cv,
                  min_mean=min_mean)
    if effect_cv and detection_rate(unit, 1e6, sims=sims) < power:  # the ceiling: noise negligible, spread not
        return float("inf")
    return _smallest(lambda e: detection_rate(unit, e, sims=sims) >= power,
                     (4.0 + floor_se) / math.sqrt(n) + min_mean, doublings=40)


def _smallest(ok: Callable[[float], bool], start: float, *, doublings: int) -> float:
    """The smallest effect e >= 0 with ok(e) (ok monotone in e), to 0.1%: double from `start` until ok, then
    bisect; inf when `doublings` doublings never reach it."""
    lo, hi = 0.0, start
    for _ in range(doublings):
        if ok(hi):
            break
        lo, hi = hi, hi * 2
    else:
        return float("inf")
    while hi - lo > 1e-3 * hi:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def mde(design: Design, *, power: float = 0.8, sims: int = 4000) -> float:
    """The smallest effect detected with probability `power` (inf when the test cannot reach alpha)."""
    if design.min_mean and design.sd_diff <= 0:  # no noise: every effect that reaches min_mean is detected
        u = _unit_mde(design.n, design.alpha, design.alternative, design.test, 0.0, power, sims)
        return design.min_mean if math.isfinite(u) else float("inf")
    u = _unit_mde(design.n, design.alpha, design.alternative, design.test, design.floor_se, power, sims,
                  design.sigma_df, design.effect_cv, design.min_mean / design.sd_diff if design.min_mean else 0.0)
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


def ab_design(sigma: float, n: int, *, alpha: float, replications: int, test: str, min_effect: float = 0.0) -> Design:
    """An A/B's verdict 'supported' (experiments.stats): per-task means of `replications` runs per arm, the
    two-sided test significant in the right direction AND the mean difference reaching min_effect."""
    return Design("ab", n, sigma * math.sqrt(2.0 / max(replications, 1)), alpha, "two-sided", test, 0.0,
                  min_mean=min_effect)


def replications_for_effect(sigma: float, n: int, effect: float, *, alpha: float, test: str, power: float = 0.8,
                            sims: int = 4000, max_reps: int = 1000, min_effect: float = 0.0) -> int | None:
    """The fewest replications per arm for an A/B over n tasks to detect `effect` (None: unreachable), the mean
    also reaching min_effect as the verdict requires."""
    u = _unit_mde(n, alpha, "two-sided", test, 0.0, power, sims)
    if not math.isfinite(u):
        return None
    if not min_effect:
        reps = max(1, math.ceil(2.0 * (sigma * u / effect) ** 2 - 1e-9))
        return reps if reps <= max_reps else None
    if effect <= min_effect and power > 0.5:  # the observed mean reaches min_effect half the time at best
        return None

    def ok(reps: int) -> bool:  # more replications only shrink the noise, so power grows with them
        d = ab_design(sigma, n, alpha=alpha, replications=reps, test=test, min_effect=min_effect)
        return detection_rate(d, effect, sims=sims) >= power

    if not ok(max_reps):
        return None
    lo, hi = 0, max_reps  # ok(hi), not ok(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def heterogeneity(diffs: Sequence[float], noise_var: float) -> dict[str, float] | None:
    """How much a real effect varied across tasks, from per-task differences of a known effect (a calibration's
    positive control): tau^2 = var(diffs) - noise_var (the variance the runs' noise alone gives a difference,
    e.g. sigma^2 (1/R + 1/r) for R control runs against r baseline runs per task), floored at 0, and effect_cv =
    tau / |mean|, the spread relative to the effect (Design.effect_cv). None with fewer than 3 tasks or a mean of
    0. A rough estimate: n - 1 degrees of freedom, so the calibration prints it with its task count."""
    n = len(diffs)
    if n < 3:
        return None
    arr = np.asarray(diffs, dtype=float)
    mean, sd = float(arr.mean()), float(arr.std(ddof=1))
    if mean == 0.0 or not math.isfinite(mean):
        return None
    tau = math.sqrt(max(sd ** 2 - noise_var, 0.0))
    return {"n": n, "mean": mean, "sd": sd, "noise_sd": math.sqrt(max(noise_var, 0.0)), "tau": tau,
            "effect_cv": tau / abs(mean)}


# -- designs that cannot answer ------------------------------------------------------------------------------


def calibrate_design_problem(exp: ExperimentConfig) -> str | None:
    """Why the calibration's A/A test (two-sided) or positive control (one-sided) over calibrate.tasks tasks can
    never reach calibrate.alpha, or None. The same reachability rule as the sweep (min_attainable_p)."""
    c = exp.calibrate
    n = c.tasks or len(exp.benchmark.tasks)
    p_aa = min_attainable_p(n, test=c.test, alternative="two-sided")
    p_ctl = min_attainable_p(n, test=c.test, alternative="less")
    parts = []
    if p_aa >= c.alpha:
        parts.append(f"the A/A test (two-sided) cannot go below p={p_aa:.4g}")
    if p_ctl >= c.alpha:
        parts.append(f"the positive control (one-sided) cannot go below p={p_ctl:.4g}")
    if not parts:
        return None
    need = tasks_needed(c.alpha, test=c.test, alternative="two-sided")
    return (f"calibrate: over {n} task(s) with test={c.test}, {' and '.join(parts)} >= alpha {c.alpha:g}, so "
            f"{'they check' if len(parts) > 1 else 'it checks'} nothing; use calibrate.tasks >= {need} (benchmark "
            f"{exp.benchmark.name!r} has {len(exp.benchmark.tasks)}), calibrate.test=t, or "
            f"calibrate.allow_underpowered=true")


def sweep_design_problem(exp: ExperimentConfig) -> str | None:
    """Why a synth_mutation sweep of this design can never promote a candidate, or None when it can.

    Promotion needs (1) the one-sided exact Wilcoxon over the train tasks to reach sweep.alpha (smallest p
    1 / 2^n_train), (2) a noise floor, i.e. sweep.baseline_repeats >= 2, and (3) a holdout confirmation: at least
    2 holdout tasks (the paired t over them, experiments.sweep rule "tasks", measures their spread; it can
    reach any level from 2 tasks on) and sweep.holdout_top_k >= 1.
    """
    sw = exp.sweep
    n_train, n_hold = len(exp.tasks("train")), len(exp.tasks("holdout"))
    p = min_attainable_p(n_train, test="wilcoxon", alternative="greater")
    if p >= sw.alpha:
        need = tasks_needed(sw.alpha, test="wilcoxon", alternative="greater")
        return (f"sweep: benchmark {exp.benchmark.name!r} has {n_train} train task(s) and {n_hold} holdout: the "
                f"smallest one-sided exact Wilcoxon p over {n_train} train tasks is {p:.4g} >= alpha {sw.alpha:g}, "
                f"so no candidate can ever be promoted; use >= {need} train tasks (benchmark=asyncio_practices has "
                f"16 train + 8 holdout), a larger sweep.alpha, or sweep.allow_underpowered=true for a first look")
    if sw.baseline_repeats < 2:
        return (f"sweep: baseline_repeats={sw.baseline_repeats} measures no noise floor (it needs >= 2 baseline runs), "
                f"so no difference can be told from noise; set sweep.baseline_repeats=2 or more, or "
                f"sweep.allow_underpowered=true")
    if n_hold < 2 and sw.holdout_test == "tasks" and sw.holdout_top_k >= 1:
        return (f"sweep: {n_hold} holdout task(s): the confirmation over tasks (a paired t over the holdout tasks) "
                f"needs at least 2 to measure their spread, so no candidate can be confirmed; add split=holdout "
                f"tasks, or sweep.allow_underpowered=true")
    if n_hold < 1 or sw.holdout_top_k < 1:
        return (f"sweep: {n_hold} holdout task(s) and holdout_top_k={sw.holdout_top_k}: no candidate can be confirmed "
                f"on held-out tasks, so none can be promoted; add split=holdout tasks and set sweep.holdout_top_k >= 1, "
                f"or sweep.allow_underpowered=true")
    return None


# -- power of the whole decision: the train filter and the confirmation over tasks --------------------------


def spread_from_trials(candidate_diffs: Sequence[Sequence[float]], noise_var: float) -> tuple[float, int] | None:
    """tau, the task x variant spread, from a sweep's own candidates: each candidate's per-task train differences
    against the baseline reference vary by its task-to-task effect and by run noise (noise_var, e.g. sigma^2
    (1 + 1/b) for one candidate run against b baseline runs). The within-candidate variances are pooled (weights
    n - 1), the noise taken out, floored at 0. Returns (tau, degrees of freedom), None below 3 tasks in all."""
    ss, df = 0.0, 0
    for d in candidate_diffs:
        arr = np.asarray(list(d), dtype=float)
        if arr.size >= 2 and np.all(np.isfinite(arr)):
            ss += float(((arr - arr.mean()) ** 2).sum())
            df += arr.size - 1
    if df < 2:
        return None
    return math.sqrt(max(ss / df - max(noise_var, 0.0), 0.0)), df


@dataclass(frozen=True)
class DecisionPower:
    """What a sweep's whole decision can detect: the train filter (one-sided Wilcoxon and the noise floor on the
    train tasks) and the confirmation over the holdout tasks (one-sided paired t at the look's level) must both
    pass; their data are independent, so P(promote) = P(filter) x P(confirm) at a mean effect."""

    filter: Design
    confirm: Design
    mde: float  # the smallest mean effect promoted with probability `power` (inf: none)
    power: float
    needed: tuple[int, int] | None  # (train, holdout) tasks in this design's ratio for target_effect at `power`
    target_effect: float
    sigma: float

    def rate(self, effect: float, sims: int = 2000) -> float:
        return detection_rate(self.filter, effect, sims=sims) * detection_rate(self.confirm, effect, sims=sims)


def _joint_mde(filt: Design, conf: Design, power: float, sims: int) -> float:
    def ok(e: float) -> bool:
        return detection_rate(filt, e, sims=sims) * detection_rate(conf, e, sims=sims) >= power

    return _smallest(ok, max(filt.sd_diff + filt.tau, conf.sd_diff + conf.tau, 1e-9), doublings=30)


def decision_power(sigma: float, tau: float, *, n_train: int, n_holdout: int, alpha: float, level: float,
                   baseline_runs: int, holdout_runs: tuple[int, int] = (1, 1), power: float = 0.8,
                   target_effect: float = 0.5, sims: int = 2000) -> DecisionPower:
    """The detectable effect of filter and confirmation together, and the holdout tasks a target effect needs.

    The filter compares one candidate run with the mean of `baseline_runs` (sd sigma sqrt(1 + 1/b) per task, the
    2-SE floor); the confirmation's per-task difference has sd sqrt(tau^2 + sigma^2 (1/c + 1/b)) with
    holdout_runs = (c, b); both see the task spread tau."""
    filt = dataclasses.replace(sweep_design(sigma, n_train, alpha=alpha, baseline_runs=baseline_runs), tau=tau)
    c, b = holdout_runs
    conf = Design("confirm", n_holdout, sigma * math.sqrt(1.0 / max(c, 1) + 1.0 / max(b, 1)), level, "greater", "t",
                  tau=tau)
    m = _joint_mde(filt, conf, power, sims) if n_train and n_holdout >= 2 else float("inf")
    needed, h = None, 2
    while n_train and n_holdout and h <= MAX_TASKS:  # both splits grown in this design's ratio
        t = max(math.ceil(h * n_train / n_holdout), 1)
        more_f, more_c = dataclasses.replace(filt, n=t), dataclasses.replace(conf, n=h)
        if detection_rate(more_f, target_effect, sims=sims) * detection_rate(more_c, target_effect, sims=sims) >= power:
            needed = (t, h)
            break
        h = h + 1 if h < 16 else h * 2 if h < 256 else h + 122
    return DecisionPower(filt, conf, m, power, needed, target_effect, sigma)


def decision_power_line(dp: DecisionPower, *, tau_source: str, sigma_source: str) -> str:
    """The summary's and preflight's line: what this design could have confirmed."""
    size = f"{dp.mde:.3f}" if math.isfinite(dp.mde) else "no effect size"
    need = (f"{dp.needed[0]} train + {dp.needed[1]} holdout tasks" if dp.needed is not None
            else f"more than {MAX_TASKS} holdout tasks")
    return (f"design power: this design confirms a mean effect of {size} composite points with probability "
            f"{dp.power:g} (train filter on {dp.filter.n} tasks and confirmation over {dp.confirm.n} holdout "
            f"tasks at level {dp.confirm.alpha:.4g} together; task x variant spread tau {dp.confirm.tau:.3f} from "
            f"{tau_source}, run noise sigma {dp.sigma:.3f} from {sigma_source}); an effect of {dp.target_effect:g} "
            f"needs {need}")
