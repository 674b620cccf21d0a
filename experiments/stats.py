"""Paired statistics for A/B tests of harness variants.

Convention everywhere: a difference is arm B minus arm A, one value per task (the mean over that task's
replications in each arm). Tests are two-sided; a pre-registered direction decides which sign counts as support.

Methods, stated so a reviewer can check them:
- Wilcoxon signed-rank, zeros dropped (Wilcoxon's convention, as scipy's default). For up to 50 non-zero
  differences the null distribution is enumerated exactly over the 2^n sign assignments of the (mid)ranks, so the
  test stays exact with ties (conditional on the observed ranks); without ties it equals scipy's "exact". Above 50
  the normal approximation with tie correction (scipy "asymptotic") is used. The method used is recorded.
- Paired t-test (scipy.stats.ttest_1samp on the differences).
- Paired bootstrap CI of the mean difference: tasks resampled with replacement, numpy.random.default_rng(seed),
  BCa (bias-corrected and accelerated, jackknife acceleration) by default, percentile on request or when BCa is
  undefined (every resample on one side of the estimate).
- Effect sizes: Cohen's dz = mean(d) / sd(d, ddof=1); matched-pairs rank-biserial r = (W+ - W-) / (W+ + W-)
  (Kerby 2014).
- Noise floor: pooled within-task SD of replications per arm; from it the SD of one task's difference and of the
  mean difference that noise alone would produce.
- Holm-Bonferroni step-down adjusted p-values.
- Sequential mode: group-sequential, Lan-DeMets O'Brien-Fleming-type alpha spending over equally spaced looks.
  Each look's nominal level is the alpha newly spent at that look, so the levels sum to alpha and the union bound
  keeps the type I error at or below alpha without numerical integration (slightly conservative). O'Brien-Fleming
  spends almost nothing early, so an early stop needs overwhelming evidence and the final look keeps nearly the
  full alpha. The test at a look is the t-based CI of the mean difference (the Wilcoxon test cannot reach the tiny
  early nominal levels at small n). Futility (non-binding, so it cannot inflate type I error): stop when the
  (1 - alpha) CI lies entirely below the minimum effect in the stated direction.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats as sps

DIRECTIONS = ("greater", "less", "two-sided")
TESTS = ("wilcoxon", "t")
VERDICTS = ("supported", "not supported", "inconclusive")
EXACT_MAX_N = 50


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
    """What replication noise alone would do to the comparison."""

    sd_a: float  # pooled within-task SD of replications, arm A
    sd_b: float
    sd_within: float  # pooled over both arms
    reps_a: float  # mean replications per task used
    reps_b: float
    n_tasks: int
    sd_task_diff: float  # SD of one task's difference from noise alone
    sd_mean_diff: float  # SD of the mean difference over tasks from noise alone
    floor: float  # 1.96 * sd_mean_diff: a mean difference smaller than this is within noise

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
    noise: NoiseFloor | None = None
    p_holm: float | None = None  # Holm-adjusted p of the test named in `holm_test`, within its family
    holm_test: str = "wilcoxon"

    def p(self, test: str = "wilcoxon") -> float:
        if test not in TESTS:
            raise ValueError(f"test must be one of {TESTS}, got {test!r}")
        return self.wilcoxon.pvalue if test == "wilcoxon" else self.ttest.pvalue

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Decision:
    action: str  # "continue" | "stop_efficacy" | "stop_futility" | "stop_final"
    look: int
    n_looks: int
    n: int
    mean: float
    ci_low: float  # CI at the look's nominal level (efficacy boundary)
    ci_high: float
    futility_ci_high: float  # upper (or, direction "less", lower) bound of the (1 - alpha) CI
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
        if self.n_tasks < 1 or self.replications < 1 or self.sequential < 0:
            raise ValueError(
                f"n_tasks and replications must be >= 1 and sequential >= 0, got n_tasks={self.n_tasks}, "
                f"replications={self.replications}, sequential={self.sequential}"
            )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Preregistration":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - names
        if unknown:
            raise ValueError(f"unknown pre-registration fields {sorted(unknown)}; expected a subset of {sorted(names)}")
        return cls(**dict(data))


# -- basic pieces -------------------------------------------------------------------------------------------------


def _array(values: Sequence[float], name: str) -> np.ndarray:
    arr = np.asarray(values, dtype=float).ravel()
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite numbers, got {list(values)!r}")
    return arr


def paired_differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    """Per-pair differences b - a."""
    xa, xb = _array(a, "a"), _array(b, "b")
    if xa.shape != xb.shape:
        raise ValueError(f"paired samples need equal lengths, got {xa.size} (A) and {xb.size} (B)")
    return xb - xa


def _signed_ranks(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    nz = d[d != 0]
    return sps.rankdata(np.abs(nz)), nz


def wilcoxon_test(diffs: Sequence[float], *, alternative: str = "two-sided") -> WilcoxonTest:
    """Wilcoxon signed-rank test on paired differences (see module docstring for the method choice)."""
    if alternative not in ("two-sided", "greater", "less"):
        raise ValueError(f"alternative must be two-sided|greater|less, got {alternative!r}")
    d = _array(diffs, "diffs")
    ranks, nz = _signed_ranks(d)
    n, n_zero = int(nz.size), int(d.size - nz.size)
    w_plus = float(ranks[nz > 0].sum())
    w_minus = float(ranks[nz < 0].sum())
    two_sided_stat = min(w_plus, w_minus)
    stat = two_sided_stat if alternative == "two-sided" else w_plus
    if n == 0:
        return WilcoxonTest(0.0, 1.0, "degenerate (all differences zero)", 0, n_zero, 0.0, 0.0)
    ties = np.unique(ranks).size < n
    if n <= EXACT_MAX_N:
        doubled = np.rint(2 * ranks).astype(int)
        total = int(doubled.sum())
        dist = np.zeros(total + 1)
        dist[0] = 1.0
        for r in doubled:
            dist[r:] = 0.5 * dist[r:] + 0.5 * dist[: total + 1 - r].copy()
            dist[:r] *= 0.5
        obs = int(np.rint(2 * w_plus))
        cdf_le = dist[: obs + 1].sum()
        sf_ge = dist[obs:].sum()
        if alternative == "greater":
            p = sf_ge
        elif alternative == "less":
            p = cdf_le
        else:
            p = 2 * min(cdf_le, sf_ge)
        method = "exact (ties: conditional on midranks)" if ties else "exact"
        return WilcoxonTest(stat, float(min(p, 1.0)), method, n, n_zero, w_plus, w_minus)
    res = sps.wilcoxon(d, zero_method="wilcox", alternative=alternative, method="asymptotic")
    return WilcoxonTest(stat, float(res.pvalue), "asymptotic (tie-corrected)", n, n_zero, w_plus, w_minus)


def paired_ttest(diffs: Sequence[float]) -> TTest:
    """Two-sided one-sample t-test of the differences against 0 (the paired t-test)."""
    d = _array(diffs, "diffs")
    n = d.size
    if n < 2:
        return TTest(float("nan"), 1.0, max(n - 1, 0))
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0:
        return TTest(0.0 if mean == 0 else math.copysign(math.inf, mean), 1.0 if mean == 0 else 0.0, n - 1)
    res = sps.ttest_1samp(d, 0.0)
    return TTest(float(res.statistic), float(res.pvalue), n - 1)


def cohens_dz(diffs: Sequence[float]) -> float:
    """Standardised mean difference of paired data: mean(d) / sd(d, ddof=1)."""
    d = _array(diffs, "diffs")
    if d.size < 2:
        return float("nan")
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd == 0:
        return 0.0 if mean == 0 else math.copysign(math.inf, mean)
    return mean / sd


def rank_biserial(diffs: Sequence[float]) -> float:
    """Matched-pairs rank-biserial correlation (W+ - W-) / (W+ + W-), zeros dropped; 0 when all are zero."""
    ranks, nz = _signed_ranks(_array(diffs, "diffs"))
    total = float(ranks.sum())
    if total == 0:
        return 0.0
    return float((ranks[nz > 0].sum() - ranks[nz < 0].sum()) / total)


def bootstrap_ci(
    diffs: Sequence[float], *, level: float = 0.95, n_resamples: int = 2000, seed: int = 0, method: str = "bca"
) -> BootstrapCI:
    """Paired bootstrap CI of the mean difference (tasks resampled with replacement)."""
    if method not in ("bca", "percentile"):
        raise ValueError(f"method must be 'bca' or 'percentile', got {method!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    d = _array(diffs, "diffs")
    n = d.size
    if n < 2:
        return BootstrapCI(float("nan"), float("nan"), level, "undefined (n < 2)", n_resamples, seed)
    theta = float(d.mean())
    if np.all(d == d[0]):
        return BootstrapCI(theta, theta, level, "degenerate (all differences equal)", n_resamples, seed)
    rng = np.random.default_rng(seed)
    boot = d[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)
    tail = (1 - level) / 2
    probs = np.array([tail, 1 - tail])
    used = "percentile"
    if method == "bca":
        below = (np.sum(boot < theta) + 0.5 * np.sum(boot == theta)) / n_resamples
        if 0 < below < 1:
            z0 = sps.norm.ppf(below)
            jack = (d.sum() - d) / (n - 1)
            dev = jack.mean() - jack
            denom = 6.0 * float(np.sum(dev**2)) ** 1.5
            accel = float(np.sum(dev**3)) / denom if denom > 0 else 0.0
            z = sps.norm.ppf(probs)
            probs = sps.norm.cdf(z0 + (z0 + z) / (1 - accel * (z0 + z)))
            used = "bca"
    low, high = np.quantile(boot, probs)
    return BootstrapCI(float(low), float(high), level, used, n_resamples, seed)


def _pooled_sd(groups: Sequence[Sequence[float]]) -> tuple[float, float]:
    """Pooled SD over groups with >= 2 values (weights r_i - 1), and the mean group size over all groups."""
    ss, dof, sizes = 0.0, 0, []
    for g in groups:
        x = _array(g, "replications")
        sizes.append(x.size)
        if x.size >= 2:
            ss += float(np.sum((x - x.mean()) ** 2))
            dof += x.size - 1
    sd = math.sqrt(ss / dof) if dof else float("nan")
    return sd, (float(np.mean(sizes)) if sizes else float("nan"))


def noise_floor(reps_a: Sequence[Sequence[float]], reps_b: Sequence[Sequence[float]]) -> NoiseFloor:
    """Noise floor from replications within each arm; reps_x[i] are task i's replicate values in arm x."""
    if len(reps_a) != len(reps_b):
        raise ValueError(f"need the same tasks in both arms, got {len(reps_a)} (A) and {len(reps_b)} (B)")
    sd_a, r_a = _pooled_sd(reps_a)
    sd_b, r_b = _pooled_sd(reps_b)
    sd_within, _ = _pooled_sd(list(reps_a) + list(reps_b))
    n = len(reps_a)
    sd_task = math.sqrt(sd_a**2 / r_a + sd_b**2 / r_b) if n else float("nan")
    sd_mean = sd_task / math.sqrt(n) if n else float("nan")
    return NoiseFloor(sd_a, sd_b, sd_within, r_a, r_b, n, sd_task, sd_mean, 1.96 * sd_mean)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjusted p-values, in the input order (NaN treated as 1)."""
    p = np.array([1.0 if (v is None or not np.isfinite(v)) else float(v) for v in pvalues])
    m = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for rank, idx in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[idx]))
        adjusted[idx] = running
    return adjusted.tolist()


def holm_reject(pvalues: Sequence[float], alpha: float = 0.05) -> list[bool]:
    return [q <= alpha for q in holm(pvalues)]


def paired_stats(
    a: Sequence[float],
    b: Sequence[float],
    *,
    metric: str = "score",
    alpha: float = 0.05,
    n_boot: int = 2000,
    seed: int = 0,
    ci_method: str = "bca",
    reps_a: Sequence[Sequence[float]] | None = None,
    reps_b: Sequence[Sequence[float]] | None = None,
) -> PairedStats:
    """Every paired statistic for one metric; a[i], b[i] are task i's per-arm means."""
    d = paired_differences(a, b)
    xa, xb = _array(a, "a"), _array(b, "b")
    nan = float("nan")
    return PairedStats(
        metric=metric,
        n=int(d.size),
        mean_a=float(xa.mean()) if d.size else nan,
        mean_b=float(xb.mean()) if d.size else nan,
        mean_diff=float(d.mean()) if d.size else nan,
        sd_diff=float(d.std(ddof=1)) if d.size >= 2 else nan,
        ci=bootstrap_ci(d, level=1 - alpha, n_resamples=n_boot, seed=seed, method=ci_method),
        wilcoxon=wilcoxon_test(d),
        ttest=paired_ttest(d),
        dz=cohens_dz(d),
        rank_biserial=rank_biserial(d),
        diffs=tuple(float(x) for x in d),
        noise=noise_floor(reps_a, reps_b) if reps_a is not None and reps_b is not None else None,
    )


def with_holm(family: Mapping[str, PairedStats], test: str = "wilcoxon") -> dict[str, PairedStats]:
    """The family with Holm-adjusted p-values (of `test`) filled in."""
    names = list(family)
    adjusted = holm([family[k].p(test) for k in names])
    return {k: dataclasses.replace(family[k], p_holm=q, holm_test=test) for k, q in zip(names, adjusted)}


# -- sequential ---------------------------------------------------------------------------------------------------


def obf_spent(t: float, alpha: float) -> float:
    """Lan-DeMets O'Brien-Fleming-type cumulative alpha spent at information fraction t in (0, 1]."""
    if t <= 0:
        return 0.0
    t = min(t, 1.0)
    return float(2 * (1 - sps.norm.cdf(sps.norm.ppf(1 - alpha / 2) / math.sqrt(t))))


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
    d = _array(diffs, "diffs")
    spent = obf_spent(look / n_looks, alpha)
    nominal = spent - obf_spent((look - 1) / n_looks, alpha)
    final = look == n_looks
    nan = float("nan")
    if d.size < 2:
        action = "stop_final" if final else "continue"
        return Decision(action, look, n_looks, int(d.size), float(d.mean()) if d.size else nan, nan, nan, nan,
                        nominal, spent, f"{d.size} pair(s): too few to test")
    mean = float(d.mean())
    lo, hi = _t_ci(d, 1 - nominal)
    flo, fhi = _t_ci(d, 1 - alpha)
    sign = -1.0 if direction == "less" else 1.0
    fut_bound = fhi if direction != "less" else flo
    if direction == "two-sided":
        efficacy = lo > 0 or hi < 0
        futile = -min_effect < flo and fhi < min_effect
    else:
        efficacy = (lo > 0) if sign > 0 else (hi < 0)
        futile = sign * fut_bound < min_effect
    level = f"{100 * (1 - nominal):.3g}%"
    if efficacy:
        return Decision("stop_efficacy", look, n_looks, int(d.size), mean, lo, hi, fut_bound, nominal, spent,
                        f"{level} CI [{lo:.3g}, {hi:.3g}] excludes 0")
    if futile:
        return Decision("stop_futility", look, n_looks, int(d.size), mean, lo, hi, fut_bound, nominal, spent,
                        f"{100 * (1 - alpha):.3g}% CI cannot reach the minimum effect {min_effect:g}")
    action = "stop_final" if final else "continue"
    return Decision(action, look, n_looks, int(d.size), mean, lo, hi, fut_bound, nominal, spent,
                    "last look, no boundary crossed" if final else "no boundary crossed")


# -- verdict ------------------------------------------------------------------------------------------------------


def _primary(prereg: Preregistration, result: Any) -> PairedStats:
    if isinstance(result, PairedStats):
        return result
    if hasattr(result, "stats_for"):
        return result.stats_for(prereg.metric)
    raise TypeError(f"verdict needs PairedStats or an object with stats_for(metric), got {type(result).__name__}")


def explain_verdict(prereg: Preregistration, result: Any) -> tuple[str, str]:
    """(verdict, reason) from the pre-registered rule. `result` is PairedStats or has stats_for(metric)."""
    s = _primary(prereg, result)
    decision: Decision | None = getattr(result, "decision", None)
    if s.n < 2 or not np.isfinite(s.mean_diff):
        return "inconclusive", f"only {s.n} complete task pair(s)"
    sign = -1.0 if prereg.direction == "less" else 1.0
    effect = abs(s.mean_diff) if prereg.direction == "two-sided" else sign * s.mean_diff
    if prereg.sequential > 1 and decision is not None:
        p_sig = decision.action == "stop_efficacy"
        alpha_txt = f"sequential look {decision.look}/{decision.n_looks}, nominal alpha {decision.nominal_alpha:.3g}"
        sig_sign = np.sign(decision.mean)
    else:
        p = s.p_holm if s.p_holm is not None else s.p(prereg.test)
        p_sig = p < prereg.alpha
        alpha_txt = f"{prereg.test} p (Holm) = {p:.3g} vs alpha {prereg.alpha:g}"
        sig_sign = np.sign(s.mean_diff)
    right_way = prereg.direction == "two-sided" or sig_sign == sign
    if p_sig and right_way and effect >= prereg.min_effect:
        return "supported", f"{alpha_txt}; mean diff {s.mean_diff:+.3g} meets the minimum effect {prereg.min_effect:g}"
    if p_sig and not right_way:
        return "not supported", f"{alpha_txt}; significant in the opposite direction (mean diff {s.mean_diff:+.3g})"
    lo, hi = s.ci.low, s.ci.high
    if np.isfinite(lo) and np.isfinite(hi):
        if prereg.direction == "two-sided":
            smaller = -prereg.min_effect < lo and hi < prereg.min_effect
        else:
            smaller = (hi if sign > 0 else -lo) < prereg.min_effect
        if smaller:
            return "not supported", (
                f"{100 * s.ci.level:.3g}% CI [{lo:.3g}, {hi:.3g}] excludes the minimum effect {prereg.min_effect:g}"
            )
    if decision is not None and decision.action == "stop_futility":
        return "not supported", f"stopped for futility at look {decision.look}: {decision.reason}"
    if p_sig:
        return "inconclusive", f"{alpha_txt}; but mean diff {s.mean_diff:+.3g} is below the minimum effect"
    return "inconclusive", f"{alpha_txt}; CI [{lo:.3g}, {hi:.3g}] still includes the minimum effect"


def verdict(prereg: Preregistration, result: Any) -> str:
    """'supported' | 'not supported' | 'inconclusive' from the pre-registered rule."""
    return explain_verdict(prereg, result)[0]


# -- reachability: can the design reach alpha at all? --------------------------------------------------------------


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
