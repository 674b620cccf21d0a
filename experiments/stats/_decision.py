"""The power of a sweep's whole decision: its train filter and its holdout confirmation together, the effect they
detect and the tasks a target effect needs (decision_power), by the simulation of experiments.stats._power."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from ._looks import first_level
from ._power import MAX_TASKS, Design, _smallest, detection_rate, sweep_design
from ._reach import holdout_min_p
from ._tests import min_attainable_p


# -- power of the whole decision: the train filter and the confirmation over tasks --------------------------


TRAIN_FILTERS = ("wilcoxon", "positive", "none")  # sweep.train_filter (experiments.promotion._futility.passes_train_filter)


@dataclass(frozen=True)
class DecisionPower:
    """What a sweep's whole decision can detect: the train filter and the confirmation over the holdout tasks
    (experiments.stats.skew_test at the look's level: the one-sided paired t's p or the skew-calibrated p, whichever
    is larger; with the non-binding futility stop when the design has one) must both pass; their data are
    independent, so P(promote) = P(filter) x P(confirm) at a mean effect. The filter (sweep.train_filter):
    "wilcoxon", the one-sided Wilcoxon and the noise floor on the train tasks; "positive", the train mean above the
    baseline's (a Design of test "mean"); "none", no filter (filter None)."""

    filter: Design | None
    confirm: Design
    mde: float  # the smallest mean effect promoted with probability `power` (inf: none)
    power: float
    needed: tuple[int, int] | None  # (train, holdout) tasks for target_effect at `power` (train 0: none needed)
    target_effect: float
    sigma: float
    holdout_runs: tuple[int, int] = (1, 1)  # (candidate, baseline) runs per holdout task

    @property
    def no_noise(self) -> bool:
        """Run noise and task spread both 0: the figures hold only if the noise truly is 0."""
        return self.sigma == 0 and self.confirm.tau == 0

    @property
    def train_filter(self) -> str:
        return "none" if self.filter is None else "positive" if self.filter.test == "mean" else "wilcoxon"

    def rate(self, effect: float, sims: int = 2000) -> float:
        return _joint(self.filter, self.confirm, effect, sims)


def decision_power(sigma: float, tau: float, *, n_train: int, n_holdout: int, alpha: float, level: float,
                   baseline_runs: int, holdout_runs: tuple[int, int] = (1, 1), power: float = 0.8,
                   target_effect: float = 0.5, sims: int = 2000, train_filter: str = "wilcoxon",
                   futility_block: int = 0, sigma_df: int | None = None, tau_df: int | None = None,
                   race_block: int = 0, race_z: float = 1.0, futility_power: float | None = None) -> DecisionPower:
    """The detectable effect of filter and confirmation together, and the tasks a target effect needs.

    The filter compares one candidate run with the mean of `baseline_runs` (sd sigma sqrt(1 + 1/b) per task, plus
    the task spread tau): under train_filter "wilcoxon" by the one-sided Wilcoxon and the 2-SE floor, under
    "positive" by its mean above 0 (with race_block > 0 the candidate is also raced on those tasks against the
    baseline, race_step's rule at race_z: a real gain raced out early is not promoted), under "none" not at all.
    The confirmation's per-task difference has sd sqrt(tau^2 + sigma^2 (1/c + 1/b)) with holdout_runs = (c, b)
    (per-task means of c and b runs), skew_test over the n_holdout tasks at `level` (Design test "t-skew": the
    sweep's TaskDiffs, p = max(paired t p, skew-calibrated p), so the figure is the rule's, not the plain t's); with
    futility_block B > 0 the non-binding futility looks of experiments.promotion._futility.futility_stop (interim_looks,
    futility_bound at the first look's level of `alpha`, experiments.stats.first_level, whatever `level` this look
    has: conditional power below FUTILITY_CP under the effect detected with probability `futility_power`, the
    sweep's calibrate.power, `power` when None) stop a
    simulated study unconfirmed, the stop's only cost being this loss of power. A holdout too small for its exact
    sign-flip p to reach `level` (holdout_min_p) confirms nothing here, as sweep_design_problem refuses it.

    sigma_df, tau_df: the degrees of freedom of the estimates sigma and tau (None: taken as known). With either,
    the confirmation's power is the predictive one, averaged over the true sigma and tau those estimates allow
    (Design.sigma_df, Design.tau_df: tau^2 read off a train spread s^2 less sigma^2 (1 + 1/b), as
    experiments.stats.spread_from_trials does, floored at 0), so a figure read off a few tasks is honestly wider
    (bench/power/sensitivity.py --scale checks it against the simulated rule over draws of the estimates).

    Both tests are scale-free and the floor scales with the noise, so the search runs in units of sigma + tau
    (cached): the same number of Monte Carlo evaluations at any scale. With sigma and tau both 0 nothing is
    simulated: every task moves by the mean effect, so any effect above 0 passes both tests once their tasks can
    reach the levels (mde 0, `no_noise`). `needed` is the exact fewest holdout tasks (bisection on the simulated
    power, the train split grown in the design's ratio), not a size on a grid."""
    for name, v in (("sigma", sigma), ("tau", tau)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"decision_power: {name} must be a finite number >= 0, got {v!r}")
    if train_filter not in TRAIN_FILTERS:
        raise ValueError(f"decision_power: train_filter must be one of {TRAIN_FILTERS}, got {train_filter!r}")
    futility_block = max(int(futility_block or 0), 0)
    runs = tuple(holdout_runs)
    race = (max(int(race_block or 0), 0), float(race_z))
    df = (int(sigma_df) if sigma_df else None, int(tau_df) if tau_df else None)
    opts = (futility_block, df, race, power if futility_power is None else float(futility_power))
    filt, conf = _designs(sigma, tau, n_train, n_holdout, alpha, level, baseline_runs, runs, train_filter, *opts)
    scale = sigma + tau
    if scale == 0:
        return DecisionPower(filt, conf, _zero_noise_mde(n_train, n_holdout, alpha, level, train_filter), power,
                             _zero_noise_needed(n_train, n_holdout, alpha, level, train_filter), target_effect, sigma,
                             runs)
    key = (sigma / scale, tau / scale, n_train, n_holdout, alpha, level, baseline_runs, runs, power, sims,
           train_filter, *opts)
    m = scale * _unit_joint_mde(*key)
    needed = _unit_needed(*key, min(target_effect / scale, _HUGE))
    return DecisionPower(filt, conf, m, power, needed, target_effect, sigma, runs)


_HUGE = 1e6  # an effect of a million noise units: detected whenever the tasks can reach the levels (and finite)


def _designs(sigma: float, tau: float, n_train: int, n_holdout: int, alpha: float, level: float,
             baseline_runs: int, holdout_runs: tuple[int, int], train_filter: str = "wilcoxon",
             futility_block: int = 0, df: tuple[int | None, int | None] = (None, None),
             race: tuple[int, float] = (0, 1.0),
             power: float = 0.8) -> tuple[Design | None, Design]:
    """The train filter (None under "none") and the holdout confirmation of decision_power."""
    c, b = holdout_runs
    filt: Design | None = dataclasses.replace(sweep_design(sigma, n_train, alpha=alpha, baseline_runs=baseline_runs),
                                              tau=tau)
    if train_filter == "positive":
        filt = dataclasses.replace(filt, name="train mean above the baseline's", test="mean", floor_se=0.0,
                                   race_block=race[0], race_z=race[1])
    elif train_filter == "none":
        filt = None
    sd = sigma * math.sqrt(1.0 / max(c, 1) + 1.0 / max(b, 1))
    # the futility stop's bound is the sweep's (experiments.promotion's HoldoutBlocks): the final test at the first
    # look's level, whatever look this is, under the effect detected with probability `power`
    conf = Design("confirm", n_holdout, sd, level, "greater", "t-skew", tau=tau, futility_block=futility_block,
                  futility_power=power, futility_level=first_level(alpha))
    if any(df):  # the predictive power: sigma and tau drawn around their estimates per simulated run
        conf = dataclasses.replace(conf, sigma_df=df[0], tau_df=df[1],
                                   tau_noise=sigma ** 2 * (1.0 + 1.0 / max(baseline_runs, 1)))
    return filt, conf


def _joint(filt: Design | None, conf: Design, effect: float, sims: int) -> float:
    """P(filter) x P(confirm) at a mean effect; 0 when the holdout cannot reach its level (holdout_min_p)."""
    if holdout_min_p(conf.n) >= conf.alpha:
        return 0.0
    f = detection_rate(filt, effect, sims=sims) if filt is not None else 1.0
    return f * detection_rate(conf, effect, sims=sims)


def _joint_ok(filt: Design | None, conf: Design, effect: float, sims: int, power: float) -> bool:
    """_joint(...) >= power, the filter run only when the confirmation alone reaches it."""
    if holdout_min_p(conf.n) >= conf.alpha:
        return False
    c = detection_rate(conf, effect, sims=sims)
    return c >= power and (filt is None or c * detection_rate(filt, effect, sims=sims) >= power)


def _filter_tasks_ok(n_train: int, alpha: float, train_filter: str) -> bool:
    """Whether the train filter can pass at all on n_train tasks (Wilcoxon: its exact p can reach alpha)."""
    if train_filter == "none":
        return True
    if train_filter == "positive":
        return n_train >= 1
    return n_train >= 1 and min_attainable_p(n_train, test="wilcoxon", alternative="greater") < alpha


@functools.lru_cache(maxsize=128)
def _unit_joint_mde(sigma: float, tau: float, n_train: int, n_holdout: int, alpha: float, level: float,
                    baseline_runs: int, holdout_runs: tuple[int, int], power: float, sims: int,
                    train_filter: str = "wilcoxon", futility_block: int = 0,
                    df: tuple[int | None, int | None] = (None, None), race: tuple[int, float] = (0, 1.0), look_power: float = 0.8) -> float:
    """The joint MDE for sigma + tau = 1 (decision_power scales it)."""
    filt, conf = _designs(sigma, tau, n_train, n_holdout, alpha, level, baseline_runs, holdout_runs, train_filter,
                          futility_block, df, race, look_power)
    if (train_filter != "none" and not n_train) or n_holdout < 2:
        return float("inf")
    start = conf.sd_diff + conf.tau
    if filt is not None:
        start = max(filt.sd_diff + filt.tau, start)
    return _smallest(lambda e: _joint_ok(filt, conf, e, sims, power), start, doublings=30)


@functools.lru_cache(maxsize=128)
def _unit_needed(sigma: float, tau: float, n_train: int, n_holdout: int, alpha: float, level: float,
                 baseline_runs: int, holdout_runs: tuple[int, int], power: float, sims: int,
                 train_filter: str = "wilcoxon", futility_block: int = 0,
                 df: tuple[int | None, int | None] = (None, None), race: tuple[int, float] = (0, 1.0), look_power: float = 0.8,
                 effect: float = 0.5) -> tuple[int, int] | None:
    """The fewest (train, holdout) tasks that reach `power` at `effect` (sigma + tau = 1), searched exactly (_fewest:
    the power grows with the tasks; a holdout whose sign-flip p cannot reach the level fails). The confirmation's p is
    never below the plain paired t's on the same simulated study (skew_test: p = max(t p, skew p)), so the plain t's
    fewest tasks, cheap to find, are where the confirmation's search starts: each size the confirmation is simulated
    at builds skew_test's reference tables for it (about 1 s at 12 tasks, 4-7 s past 60). Under a train filter both
    splits grow in the design's ratio (a best-of-N chosen on few train tasks carries a winner's curse to the
    holdout); under "none" only the holdout decides (train 0). The race and futility looks fall at the same
    fractions of each size (interim_looks), as the sweep places them."""
    if not n_holdout or (train_filter != "none" and not n_train):
        return None
    filt, conf = _designs(sigma, tau, n_train, n_holdout, alpha, level, baseline_runs, holdout_runs, train_filter,
                          futility_block, df, race, look_power)

    def split(h: int) -> tuple[int, int]:
        return (max(math.ceil(h * n_train / n_holdout), 1) if filt is not None else 0), h

    def ok(h: int, test: str = conf.test) -> bool:
        t, _ = split(h)
        f = dataclasses.replace(filt, n=t) if filt is not None else None
        c = dataclasses.replace(conf, n=h, test=test)
        return holdout_min_p(h) < level and _joint_ok(f, c, effect, sims, power)

    start = _fewest(lambda h: ok(h, "t"), 2) if conf.test == "t-skew" else 2
    h = _fewest(ok, start) if start is not None else None
    return split(h) if h is not None else None


def _fewest(ok: Callable[[int], bool], start: int) -> int | None:
    """The smallest size h >= start with ok(h), ok monotone and start - 1 known to fail (None: none up to MAX_TASKS):
    start, start + 1, start + 2, start + 4, ... (a size costs in proportion to it, and the answer is often near
    start) up to MAX_TASKS, then bisection between the last size that fails and the first that reaches it."""
    lo, h, step = start - 1, start, 1
    while not ok(h):
        if h >= MAX_TASKS:
            return None
        lo, h, step = h, min(start + step, MAX_TASKS), step * 2
    while h - lo > 1:
        mid = (lo + h) // 2
        lo, h = (lo, mid) if ok(mid) else (mid, h)
    return h


def _zero_noise_reachable(n_train: int, n_holdout: int, alpha: float, level: float,
                          train_filter: str = "wilcoxon") -> bool:
    return _filter_tasks_ok(n_train, alpha, train_filter) and holdout_min_p(n_holdout) < level


def _zero_noise_mde(n_train: int, n_holdout: int, alpha: float, level: float, train_filter: str = "wilcoxon") -> float:
    return 0.0 if _zero_noise_reachable(n_train, n_holdout, alpha, level, train_filter) else float("inf")


def _zero_noise_needed(n_train: int, n_holdout: int, alpha: float, level: float,
                       train_filter: str = "wilcoxon") -> tuple[int, int] | None:
    if not n_holdout or (train_filter != "none" and not n_train):
        return None
    for h in range(2, MAX_TASKS + 1):
        t = max(math.ceil(h * n_train / n_holdout), 1) if train_filter != "none" else 0
        if _zero_noise_reachable(t, h, alpha, level, train_filter):
            return t, h
    return None
