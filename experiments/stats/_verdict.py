"""The A/B's pre-registered decision rule: the pre-registration, the sequential looks and the verdict.

Sequential mode: group-sequential, Lan-DeMets O'Brien-Fleming-type alpha spending over equally spaced looks. Each
look's nominal level is the alpha newly spent at that look, so the levels sum to alpha and the union bound keeps
the type I error at or below alpha without numerical integration (slightly conservative). O'Brien-Fleming spends
almost nothing early, so an early stop needs overwhelming evidence and the final look keeps nearly the full alpha.
The test at a look is the t-based CI of the mean difference (the Wilcoxon test cannot reach the tiny early nominal
levels at small n). Futility (non-binding, so it cannot inflate the type I error of 'supported'): stop when the
skew-robust bound below (one-sided, level alpha / (2 n_looks) per look, so that 'not supported' over every look
keeps alpha / 2) lies below the minimum effect in the stated direction.

'Not supported' says the mean difference is below the minimum effect; it must hold its level (alpha / 2, one side of
the (1 - alpha) interval) at a true effect equal to min_effect also when the per-task differences are skewed: a
skewed spread hides its long tail from a few tasks, the sample mean falls short of the true one, and the bootstrap
BCa interval says 'not supported' 0.206 / 0.175 / 0.142 of the time at n = 6 / 8 / 12 (0.060 / 0.060 / 0.043 on
normal data) against 0.025 (bench/power/ab_min_effect_boundary.py, 2,000 worlds each). The bound (mean_bound) is Hall's
(1992) monotone skewness-corrected t, g(T) = T + a/6 + a T^2/3 + a^2 T^3/27 with a = sample skewness / sqrt(n),
inverted at a critical value calibrated in simulation (skew_critical): the lowest quantile of g(T) over the
reference spreads, normal and a lognormal with sigma 1 (skewness 6.2), at a true mean on the boundary. Its level
then holds for both (bench/power/ab_min_effect_boundary.py: 0.018 / 0.022 / 0.029 skewed and 0.001 / 0.000 / 0.002 normal over 2,000
worlds, the bound alone 0.025 / 0.024 / 0.025 skewed over 40,000) and for milder skew; the price is power at small n
(on normal data 1 sd below min_effect, 'not supported' 0.119 / 0.219 / 0.472 of the time at n = 6 / 8 / 12, against
0.716 / 0.834 / 0.930 with the undercovering interval). A heavier tail is what few tasks cannot see: an effect
carried by 1 task in k is missed with probability ((k - 1)/k)^n.

The statistics the rule reads (PairedStats: tests, bootstrap CI, Holm) come from experiments.stats.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats as sps

from ._skew import SkewTest, _hall, skew_test
from ._tests import DIRECTIONS, TESTS, PairedStats, finite_array, min_attainable_p, no_spread

COMPARES = ("pointwise", "pairwise")  # how an A/B compares its arms (Preregistration.compare)

VERDICTS = ("supported", "not supported", "inconclusive")
SKEW_REFERENCE = ("normal", "lognormal sigma 1")  # the spreads skew_critical holds the level for
CALIBRATION_WORLDS = 100_000
CALIBRATION_SEED = 40


@dataclass(frozen=True)
class Decision:
    action: str  # "continue" | "stop_efficacy" | "stop_futility" | "stop_final"
    look: int
    n_looks: int
    n: int
    mean: float
    ci_low: float  # CI at the look's nominal level (efficacy boundary)
    ci_high: float
    futility_ci_high: float  # skew-robust upper (direction "less": lower) bound at alpha / (2 n_looks)
    nominal_alpha: float
    spent_alpha: float
    reason: str
    method: str = "group-sequential, Lan-DeMets O'Brien-Fleming spending, Bonferroni over looks, t-based CI"

    @property
    def stop(self) -> bool:
        return self.action != "continue"


@dataclass(frozen=True)
class Preregistration:
    """The hypothesis and decision rule, fixed before any data is collected."""

    hypothesis: str
    metric: str = "score"
    min_effect: float = 0.5
    alpha: float = 0.05
    direction: str = "greater"  # sign of mean(B - A) the hypothesis predicts
    n_tasks: int = 8
    replications: int = 3
    sequential: int = 0  # number of equally spaced interim looks; 0 or 1 = fixed sample
    test: str = "wilcoxon"  # primary test in fixed-sample mode: "wilcoxon" | "t"
    # pointwise: the test above on the metric's per-task differences; pairwise: the two arms' answers judged side by
    # side (experiments.ab._pairwise), the sign-flip test on the per-task mean preference of B, which must reach
    # min_preference (in [-1, 1] units: +1 every comparison prefers B) instead of min_effect
    compare: str = "pointwise"
    min_preference: float = 0.1

    def __post_init__(self) -> None:
        if not self.hypothesis.strip():
            raise ValueError("Preregistration.hypothesis must be a non-empty sentence")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.test not in TESTS:
            raise ValueError(f"test must be one of {TESTS}, got {self.test!r}")
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha!r}")
        if self.min_effect < 0:
            raise ValueError(f"min_effect is a magnitude and must be >= 0, got {self.min_effect!r}")
        if self.compare not in COMPARES:
            raise ValueError(f"compare must be one of {COMPARES}, got {self.compare!r}")
        if not 0 <= self.min_preference < 1:
            raise ValueError(f"min_preference is a preference magnitude in [0, 1), got {self.min_preference!r}")
        if self.compare == "pairwise" and self.sequential > 1:
            raise ValueError("compare=pairwise has no sequential looks (its sign-flip test is fixed-sample); "
                             "set sequential to 0")
        if self.n_tasks < 1 or self.replications < 1 or self.sequential < 0:
            raise ValueError(
                f"n_tasks and replications must be >= 1 and sequential >= 0, got n_tasks={self.n_tasks}, "
                f"replications={self.replications}, sequential={self.sequential}"
            )

    def to_dict(self) -> dict[str, Any]:
        """The fields; a pointwise registration leaves out compare and min_preference, so that a ledger registered
        before pairwise judging existed resumes under the same registration."""
        out = dataclasses.asdict(self)
        if self.compare == "pointwise":
            del out["compare"], out["min_preference"]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Preregistration":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown pre-registration fields {sorted(unknown)}; expected a subset of {sorted(names)}")
        return cls(**dict(data))


# -- sequential ---------------------------------------------------------------------------------------------------


def obf_spent(t: float, alpha: float) -> float:
    """Lan-DeMets O'Brien-Fleming-type cumulative alpha spent at information fraction t in (0, 1]."""
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    return float(2 * (1 - sps.norm.cdf(sps.norm.ppf(1 - alpha / 2) / math.sqrt(t))))


def look_level(look: int, n_looks: int, alpha: float) -> float:
    """The nominal level of look `look` (1-based) of `n_looks` equally spaced looks: the alpha newly spent there."""
    return obf_spent(look / n_looks, alpha) - obf_spent((look - 1) / n_looks, alpha)


# -- the skew-robust bound on the mean ('not supported') -------------------------------------------------------------


def _parts(d: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of d: mean, standard error, a = skewness / sqrt(n) (third central moment over sd^3, sd with n - 1)."""
    n = d.shape[-1]
    mean = d.mean(-1)
    sd = d.std(-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(sd > 0, ((d - mean[..., None]) ** 3).mean(-1) / sd**3, 0.0) / math.sqrt(n)
    return mean, sd / math.sqrt(n), a


@functools.lru_cache(maxsize=512)
def skew_critical(n: int, tail: float) -> float:
    """The `tail` quantile (lower) of Hall's corrected t over n differences whose true mean is 0, the lowest over
    the reference spreads (SKEW_REFERENCE), from seeded simulation (CALIBRATION_WORLDS worlds each, fewer above 50
    tasks; the order statistic 2 Monte Carlo sd below, so that the simulation's error errs conservative). A test
    that rejects 'mean >= m' when g(T) < skew_critical holds level `tail` for both spreads."""
    if n < 2 or not 0 < tail < 0.5:
        raise ValueError(f"skew_critical needs n >= 2 and 0 < tail < 0.5, got n={n}, tail={tail}")
    worlds = max(20_000, min(CALIBRATION_WORLDS, 5_000_000 // n))
    rng = np.random.default_rng([CALIBRATION_SEED, n])
    out = []
    for shape in SKEW_REFERENCE:
        stats = []
        for start in range(0, worlds, 10_000):
            size = (min(10_000, worlds - start), n)
            e = rng.standard_normal(size) if shape == "normal" else rng.lognormal(0.0, 1.0, size) - math.exp(0.5)
            mean, se, a = _parts(e)
            stats.append(_hall(mean / se, a))
        values = np.sort(np.concatenate(stats))
        # the order statistic 2 Monte Carlo sd below the quantile's: the simulation's own error errs conservative
        k = max(0, int(math.floor(tail * values.size - 2 * math.sqrt(tail * (1 - tail) * values.size))))
        out.append(float(values[k]))
    return min(out)


def mean_bound(diffs: Sequence[float], tail: float, side: str = "upper") -> float:
    """One-sided bound on the mean of `diffs` that a true mean passes with probability at most `tail`, for the
    reference spreads (skew_critical): Hall's corrected t inverted, upper = mean - x_c * se with g(x_c) = critical
    value. "lower" is the upper bound of the negated differences, negated (a long left tail is the risk there).
    NaN below 2 differences; their common value when every difference is equal.

    x_c = 3 / a * (cbrt(1 + a (c - a / 6)) - 1) is computed as 3 / a * expm1(log1p(z) / 3): for a sample skewness
    that is 0 up to rounding (a = -2e-17 on a symmetric sample) the plain form cancels to x_c = 0, a bound at the
    sample mean, and 'not supported' came 0.03 of the time at a true mean on the boundary (pairwise preferences,
    12 tasks, tail 0.025)."""
    if side not in ("upper", "lower"):
        raise ValueError(f"side must be 'upper' or 'lower', got {side!r}")
    d = finite_array(diffs, "diffs")
    if d.size < 2:
        return float("nan")
    x = d if side == "upper" else -d
    mean, se, a = (float(v[0]) for v in _parts(x[None, :]))
    if no_spread(d):
        return float(d.mean())
    c = skew_critical(int(d.size), tail)
    z = a * (c - a / 6)
    if a == 0:
        x_c = c
    elif z > -1:
        x_c = 3 / a * math.expm1(math.log1p(z) / 3)
    else:
        x_c = 3 / a * (float(np.cbrt(1 + z)) - 1)
    bound = mean - x_c * se
    return bound if side == "upper" else -bound


def _t_ci(d: np.ndarray, level: float) -> tuple[float, float]:
    mean, se = float(d.mean()), float(d.std(ddof=1)) / math.sqrt(d.size)
    if se == 0:
        return mean, mean
    half = float(sps.t.ppf(1 - (1 - level) / 2, d.size - 1)) * se
    return mean - half, mean + half


def sequential_decision(
    diffs: Sequence[float],
    *,
    look: int,
    n_looks: int,
    alpha: float,
    min_effect: float,
    direction: str = "greater",
) -> Decision:
    """Stop or continue at interim look `look` (1-based) of `n_looks`; see the module docstring for the method."""
    if not 1 <= look <= n_looks:
        raise ValueError(f"look must be in 1..n_looks={n_looks}, got {look}")
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
    d = finite_array(diffs, "diffs")
    spent = obf_spent(look / n_looks, alpha)
    nominal = look_level(look, n_looks, alpha)
    final = look == n_looks
    nan = float("nan")
    if d.size < 2:
        action = "stop_final" if final else "continue"
        return Decision(action, look, n_looks, int(d.size), float(d.mean()) if d.size else nan, nan, nan, nan,
                        nominal, spent, f"{d.size} pair(s): too few to test")
    mean = float(d.mean())
    lo, hi = _t_ci(d, 1 - nominal)
    tail = alpha / (2 * n_looks)  # 'not supported' over every look keeps alpha / 2
    flo, fhi = mean_bound(d, tail, "lower"), mean_bound(d, tail, "upper")
    sign = -1.0 if direction == "less" else 1.0
    fut_bound = fhi if direction != "less" else flo
    if direction == "two-sided":
        efficacy = lo > 0 or hi < 0
        futile = -min_effect < flo and fhi < min_effect
    else:
        efficacy = (lo > 0) if sign > 0 else (hi < 0)
        futile = sign * fut_bound < min_effect
    level = f"{100 * (1 - nominal):.3g}%"
    floor = min_attainable_p(int(d.size), test="wilcoxon", alternative="two-sided")  # exact, 2 / 2^n
    spread = not no_spread(d)
    if efficacy and floor >= nominal:  # the t's CI alone (no spread: [mean, mean]) claims more than n pairs can
        efficacy = False
        capped = (f"the {level} CI [{lo:.3g}, {hi:.3g}] excludes 0, but {d.size} pairs cannot give an exact p below "
                  f"2/2^{d.size} = {floor:.3g} >= the look's level {nominal:.3g}")
    else:
        capped = ""
    futile = futile and spread  # no spread measured: no bound excludes the minimum effect
    if efficacy:
        return Decision("stop_efficacy", look, n_looks, int(d.size), mean, lo, hi, fut_bound, nominal, spent,
                        f"{level} CI [{lo:.3g}, {hi:.3g}] excludes 0")
    if futile:
        return Decision("stop_futility", look, n_looks, int(d.size), mean, lo, hi, fut_bound, nominal, spent,
                        f"the skew-robust {100 * (1 - tail):.4g}% bound {_bounds_text(flo, fhi, direction)} cannot "
                        f"reach the minimum effect {min_effect:g}")
    action = "stop_final" if final else "continue"
    why = "last look, no boundary crossed" if final else "no boundary crossed"
    if capped or not spread:
        why += f" ({capped or 'every difference equal: no spread to bound the mean with'})"
    return Decision(action, look, n_looks, int(d.size), mean, lo, hi, fut_bound, nominal, spent, why)



# -- verdict ------------------------------------------------------------------------------------------------------


def _primary(prereg: Preregistration, result: Any) -> PairedStats:
    if isinstance(result, PairedStats):
        return result
    if hasattr(result, "stats_for"):
        return result.stats_for(prereg.metric)
    raise TypeError(f"verdict needs PairedStats or an object with stats_for(metric), got {type(result).__name__}")


def _test_sign(s: PairedStats, test: str) -> float:
    """The direction the significance test itself finds (+1: B higher, -1: B lower, 0: none).

    Wilcoxon: the larger of the signed-rank sums W+ and W- (the side whose tail gives the two-sided p); t: the sign
    of the t statistic. The mean can point the other way (one task's outlier), so it never supplies the direction of
    a significance it did not produce.
    """
    if test == "wilcoxon":
        return float(np.sign(s.wilcoxon.w_plus - s.wilcoxon.w_minus))
    return 0.0 if math.isnan(s.ttest.statistic) else float(np.sign(s.ttest.statistic))


def _test_direction_text(s: PairedStats, test: str) -> str:
    if test == "wilcoxon":
        return f"W+ {s.wilcoxon.w_plus:g} vs W- {s.wilcoxon.w_minus:g}"
    return f"t = {s.ttest.statistic:+.3g}"


def explain_verdict(prereg: Preregistration, result: Any) -> tuple[str, str]:
    """(verdict, reason) from the pre-registered rule. `result` is PairedStats or has stats_for(metric).

    'supported' needs the test significant, in the hypothesis's direction as the TEST finds it (the signed-rank
    sums for Wilcoxon, the t statistic for t, the look's t-based CI in sequential mode), the mean difference on the
    same side, and the mean reaching min_effect. A two-sided test whose direction the mean contradicts supports
    nothing: the direction comes from the test that gives the significance.
    """
    s = _primary(prereg, result)
    decision: Decision | None = getattr(result, "decision", None)
    if s.n < 2 or not np.isfinite(s.mean_diff):
        return "inconclusive", f"only {s.n} complete task pair(s)"
    sign = -1.0 if prereg.direction == "less" else 1.0
    effect = abs(s.mean_diff) if prereg.direction == "two-sided" else sign * s.mean_diff
    mean_sign = float(np.sign(s.mean_diff))
    looks = prereg.sequential > 1 and decision is not None  # a sequential design: its look decides
    if looks:
        p_sig = decision.action == "stop_efficacy"
        alpha_txt = f"sequential look {decision.look}/{decision.n_looks}, nominal alpha {decision.nominal_alpha:.3g}"
        sig_sign, sig_txt = float(np.sign(decision.mean)), f"look mean {decision.mean:+.3g}"
    else:
        p = s.p_holm if s.p_holm is not None else s.p(prereg.test)
        p_sig = p < prereg.alpha
        alpha_txt = f"{prereg.test} p (Holm) = {p:.3g} vs alpha {prereg.alpha:g}"
        sig_sign, sig_txt = _test_sign(s, prereg.test), _test_direction_text(s, prereg.test)
    right_way = prereg.direction == "two-sided" or sig_sign == sign
    agree = sig_sign == mean_sign
    if p_sig and right_way and agree and effect >= prereg.min_effect:
        skewed = None if looks else _skew_side(s.diffs, mean_sign)
        if skewed is None or skewed.p is None or skewed.p < prereg.alpha / 2:
            return "supported", (f"{alpha_txt}; mean diff {s.mean_diff:+.3g} meets the minimum effect "
                                 f"{prereg.min_effect:g}")
        return "inconclusive", (
            f"{alpha_txt}; but the skew-calibrated one-sided p {skewed.p:.3g} is not below {prereg.alpha / 2:g}: the "
            f"per-task differences (skewness {skewed.skewness or 0.0:+.2g}) may be a zero-mean spread whose few "
            "losing tasks were not drawn; more tasks tell them apart")
    if p_sig and not right_way:
        return "not supported", (f"{alpha_txt}; significant in the opposite direction ({sig_txt}; mean diff "
                                 f"{s.mean_diff:+.3g})")
    if p_sig and not agree:
        return "inconclusive", (f"{alpha_txt}; the test finds B {'higher' if sig_sign > 0 else 'lower'} ({sig_txt}) "
                                f"but the mean diff {s.mean_diff:+.3g} points the other way: no direction to claim")
    lo, hi = s.ci.low, s.ci.high
    tail = prereg.alpha / 2
    if not looks:  # sequential: the looks' futility bound decides
        bound = excluding_bound(s.diffs, alpha=prereg.alpha, direction=prereg.direction, minimum=prereg.min_effect)
        if bound is not None:
            return "not supported", (
                f"the skew-robust {100 * (1 - tail):.3g}% bound {_bounds_text(*bound, prereg.direction)} on "
                f"the mean diff {s.mean_diff:+.3g} excludes the minimum effect {prereg.min_effect:g}")
    if decision is not None and decision.action == "stop_futility":
        return "not supported", f"stopped for futility at look {decision.look}: {decision.reason}"
    if p_sig:
        return "inconclusive", f"{alpha_txt}; but mean diff {s.mean_diff:+.3g} is below the minimum effect"
    return "inconclusive", f"{alpha_txt}; CI [{lo:.3g}, {hi:.3g}] still includes the minimum effect"


def _skew_side(diffs: Sequence[float], side: float) -> SkewTest:
    """experiments.stats.skew_test (the sweep's confirmation over tasks) of a mean on `side` (+1: B higher, -1: B
    lower). 'supported' needs its p as well: on a left-skewed spread of zero mean (most tasks gain a little, a few
    lose a lot) a sample of 8-12 tasks often holds none of the losers and the paired t alone supports B 0.066-0.081
    of the time at 0.025 a side (bench/power/level_with_noise.py --ab, docs/VERDICTS.md)."""
    return skew_test(finite_array(diffs, "diffs") * (1.0 if side >= 0 else -1.0))


def excluding_bound(values: Sequence[float], *, alpha: float, direction: str,
                    minimum: float) -> tuple[float, float] | None:
    """The skew-robust bounds (lower, upper) on the mean of `values`, each at alpha / 2, when they exclude an effect
    of `minimum` in `direction` (two-sided: both bounds inside (-minimum, minimum)), else None: 'not supported'.

    None when every value is equal, up to float rounding (experiments.stats.no_spread): with no spread measured
    nothing bounds the mean (the bound would be that value, and at a true mean equal to `minimum` on a coarse metric
    2 / 3 / 4 equal values fall below it 0.25 / 0.14 / 0.066 of the time)."""
    tail = alpha / 2
    x = finite_array(values, "values")
    if x.size < 2 or no_spread(x):
        return None
    lo, hi = mean_bound(x, tail, "lower"), mean_bound(x, tail, "upper")
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return None
    if direction == "two-sided":
        smaller = -minimum < lo and hi < minimum
    else:
        smaller = (hi if direction != "less" else -lo) < minimum
    return (lo, hi) if smaller else None


def _bounds_text(lower: float, upper: float, direction: str) -> str:
    if direction == "greater":
        return f"mean <= {upper:.3g}"
    if direction == "less":
        return f"mean >= {lower:.3g}"
    return f"{lower:.3g} <= mean <= {upper:.3g}"


def missing_imbalance(arms: Sequence[str], failed: Mapping[str, int], judge_failures: Mapping[str, int],
                      failed_tasks: Mapping[str, Sequence[str]] | None = None) -> str | None:
    """Why the arms' missing values refuse a verdict, or None when both arms miss the same number.

    A failed cell, or a judge reply that could not be read, is an outcome of its arm, not noise: an arm that fails
    on the hard tasks leaves only its easy ones in the complete pairs, and a verdict on those pairs would credit the
    failing arm. Equal counts leave no arm favoured by what is missing.
    """
    a, b = arms
    parts = []
    if failed.get(a, 0) != failed.get(b, 0):
        where = {arm: sorted(set((failed_tasks or {}).get(arm, ()))) for arm in (a, b)}
        shown = "".join(f"; {arm} failed on {', '.join(where[arm])}" for arm in (a, b) if where[arm])
        parts.append(f"failed cells differ between arms ({a} {failed.get(a, 0)}, {b} {failed.get(b, 0)}{shown})")
    if judge_failures.get(a, 0) != judge_failures.get(b, 0):
        parts.append(f"judge replies that could not be read differ between arms ({a} {judge_failures.get(a, 0)}, "
                     f"{b} {judge_failures.get(b, 0)})")
    if not parts:
        return None
    return (f"{' and '.join(parts)}: a failure is an outcome of its arm, so the complete pairs are a sample it "
            "chose; rerun the same command to retry failed cells")


def verdict(prereg: Preregistration, result: Any) -> str:
    """'supported' | 'not supported' | 'inconclusive' from the pre-registered rule."""
    return explain_verdict(prereg, result)[0]

