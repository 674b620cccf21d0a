"""Paired statistics against published examples, hand computations and properties."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats as sps

from experiments.ab._analysis import paired_stats
from experiments.stats import (bootstrap_ci, cohens_dz, holm, paired_differences, paired_ttest, rank_biserial,
                               replication_noise, variance_ratio, wilcoxon_test)
from experiments.stats import min_attainable_p, tasks_needed
from experiments.stats import Preregistration, explain_verdict, sequential_decision
from experiments.stats._floors import holm_reject
from experiments.stats._verdict import obf_spent, verdict

# scipy.stats.wilcoxon docstring: Darwin's corn heights (cross- minus self-fertilised)
DARWIN = [6, 8, 14, 16, 23, 24, 28, 29, 41, -48, 49, 56, 60, -67, 75]


def test_wilcoxon_matches_scipy_documented_example():
    two = wilcoxon_test(DARWIN)
    assert (two.statistic, two.pvalue, two.method) == (24.0, pytest.approx(0.041259765625, abs=1e-12), "exact")
    greater = wilcoxon_test(DARWIN, alternative="greater")
    assert (greater.statistic, greater.pvalue) == (96.0, pytest.approx(0.0206298828125, abs=1e-12))
    assert (two.w_plus, two.w_minus, two.n_nonzero, two.n_zero) == (96.0, 24.0, 15, 0)


def test_wilcoxon_exact_equals_scipy_exact_without_ties():
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(60):
        x = rng.normal(size=int(rng.integers(3, 25))).round(4)
        if np.unique(np.abs(x)).size < x.size or np.any(x == 0):
            continue
        for alt in ("two-sided", "greater", "less"):
            assert wilcoxon_test(x, alternative=alt).pvalue == pytest.approx(
                sps.wilcoxon(x, method="exact", alternative=alt).pvalue, abs=1e-12
            )
        checked += 1
    assert checked > 40


def test_wilcoxon_with_ties_and_zero_is_exact_permutation():
    d = [1, 1, 2, -2, 3, 3, 3, -1, 0]
    res = wilcoxon_test(d)
    assert res.method.startswith("exact (ties") and (res.n_nonzero, res.n_zero) == (8, 1)
    # 2^8 sign flips enumerated by scipy's permutation method: same exact conditional p
    ref = sps.wilcoxon(d, method=sps.PermutationMethod(n_resamples=10**6))
    assert (res.statistic, res.pvalue) == (ref.statistic, pytest.approx(ref.pvalue, abs=1e-12))


def test_wilcoxon_all_zero_and_large_n():
    assert wilcoxon_test([0, 0, 0, 0]).pvalue == 1.0
    assert wilcoxon_test([0, 0, 0, 0]).method.startswith("degenerate")
    x = np.random.default_rng(0).normal(0.3, 1, size=80)
    res = wilcoxon_test(x)
    assert res.method.startswith("asymptotic")
    assert res.pvalue == pytest.approx(sps.wilcoxon(x, method="asymptotic").pvalue)


def test_ttest_and_dz_by_hand():
    # d = [1, 2, 3, 6]: mean 3, sd sqrt(14/3), t = 3 / (sd / 2); df = 3 Student CDF has a closed form
    d = [1, 2, 3, 6]
    sd = math.sqrt(14 / 3)
    t = 3 / (sd / 2)
    u = t / math.sqrt(3)
    cdf = 0.5 + (u / (1 + u * u) + math.atan(u)) / math.pi
    res = paired_ttest(d)
    assert (res.statistic, res.df) == (pytest.approx(t, rel=1e-12), 3)
    assert res.pvalue == pytest.approx(2 * (1 - cdf), rel=1e-9)
    assert cohens_dz(d) == pytest.approx(3 / sd, rel=1e-12)


@pytest.mark.parametrize(
    "d, expected",
    [
        ([1, -2, 3, 4], 0.6),  # ranks 1..4: W+ = 8, W- = 2 -> (8 - 2) / 10
        ([1, 2, 3], 1.0),
        ([-1, -2, -3], -1.0),
        ([0, 5, -5], 0.0),  # tie at rank 1.5 each side, zero dropped
        ([0, 0], 0.0),
    ],
)
def test_rank_biserial_known_cases(d, expected):
    assert rank_biserial(d) == pytest.approx(expected)


def test_holm_textbook_example():
    # Wikipedia "Holm-Bonferroni method": p = (0.01, 0.04, 0.03, 0.005), alpha 0.05 -> reject H1 and H4 only
    p = [0.01, 0.04, 0.03, 0.005]
    assert holm(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm_reject(p, 0.05) == [True, False, False, True]
    assert holm([0.5]) == [0.5] and holm([0.04, 0.02]) == [0.04, 0.04] and holm([0.9, 0.6]) == [1.0, 1.0] and holm([float("nan"), 0.01]) == [1.0, 0.02]


def test_bootstrap_bca_equals_scipy_bootstrap_and_is_reproducible():
    ref = sps.bootstrap((np.array(DARWIN, float),), np.mean, method="BCa", n_resamples=9999, rng=1)
    ours = bootstrap_ci(DARWIN, n_resamples=9999, seed=1)
    assert ours.method == "bca"
    assert (ours.low, ours.high) == (
        pytest.approx(ref.confidence_interval.low, abs=1e-9), pytest.approx(ref.confidence_interval.high, abs=1e-9)
    )
    assert bootstrap_ci(DARWIN, seed=5) == bootstrap_ci(DARWIN, seed=5)
    assert bootstrap_ci(DARWIN, seed=5) != bootstrap_ci(DARWIN, seed=6)
    pct = bootstrap_ci(DARWIN, seed=5, method="percentile")
    assert pct.method == "percentile" and pct.low < np.mean(DARWIN) < pct.high
    assert bootstrap_ci([2, 2, 2]).method.startswith("degenerate")
    assert math.isnan(bootstrap_ci([1.0]).low)


def test_swapping_arms_flips_signs():
    rng = np.random.default_rng(11)
    a = rng.normal(5, 1, 10)
    b = a + rng.normal(0.7, 0.6, 10)
    ab = paired_stats(a, b, seed=4, ci_method="percentile")
    ba = paired_stats(b, a, seed=4, ci_method="percentile")
    assert ba.mean_diff == pytest.approx(-ab.mean_diff)
    assert ba.dz == pytest.approx(-ab.dz) and ba.rank_biserial == pytest.approx(-ab.rank_biserial)
    assert ba.ttest.statistic == pytest.approx(-ab.ttest.statistic)
    assert (ba.ci.low, ba.ci.high) == (pytest.approx(-ab.ci.high), pytest.approx(-ab.ci.low))
    assert ba.wilcoxon.pvalue == pytest.approx(ab.wilcoxon.pvalue) and ba.ttest.pvalue == pytest.approx(ab.ttest.pvalue)


def test_identical_arms_are_not_significant():
    a = [5.0, 6.5, 7.0, 4.0, 8.0]
    s = paired_stats(a, a)
    assert (s.mean_diff, s.wilcoxon.pvalue, s.ttest.pvalue, s.dz, s.rank_biserial) == (0.0, 1.0, 1.0, 0.0, 0.0)
    assert (s.ci.low, s.ci.high) == (0.0, 0.0)
    prereg = Preregistration("B beats A", min_effect=0.5)
    # every difference equal (0): no spread was measured, so no bound can say the effect is below min_effect
    assert verdict(prereg, s) == "inconclusive"


def test_paired_differences_validates():
    assert paired_differences([1, 2], [3, 5]).tolist() == [2, 3]
    with pytest.raises(ValueError, match="equal lengths"):
        paired_differences([1, 2], [1])
    with pytest.raises(ValueError, match="finite"):
        paired_differences([1, float("nan")], [1, 2])


def test_noise_floor_by_hand():
    # arm A: task reps (1, 3) and (2, 4): pooled var = (2 + 2) / 2 = 2; arm B: (5, 5), (6, 6): 0
    nf = replication_noise([[1, 3], [2, 4]], [[5, 5], [6, 6]])
    assert (nf.sd_a, nf.sd_b, nf.reps_a, nf.n_tasks) == (pytest.approx(math.sqrt(2)), 0.0, 2.0, 2)
    assert nf.sd_task_diff == pytest.approx(1.0)  # sqrt(2 / 2 + 0 / 2)
    assert nf.sd_mean_diff == pytest.approx(1 / math.sqrt(2))
    assert nf.floor == pytest.approx(2 / math.sqrt(2))  # stats.FLOOR_SE: the sweep's two standard errors
    assert nf.clears(1.5) and not nf.clears(1.0)
    assert math.isnan(replication_noise([[1], [2]], [[1], [2]]).sd_a)  # one replication: no within-task noise estimate


def test_obf_spending_and_sequential_decisions():
    assert obf_spent(1.0, 0.05) == pytest.approx(0.05)
    assert obf_spent(1 / 3, 0.05) < 0.001 < obf_spent(2 / 3, 0.05) < 0.05
    nominals = [sequential_decision([1, 2], look=k, n_looks=3, alpha=0.05, min_effect=0).nominal_alpha for k in (1, 2, 3)]
    assert sum(nominals) == pytest.approx(0.05)
    strong = [1.0 + 0.01 * i for i in range(12)]  # 12: the exact floor 2/2^12 is below look 1's level
    assert sequential_decision(strong, look=1, n_looks=3, alpha=0.05, min_effect=0.5).action == "stop_efficacy"
    weak = [0.02, -0.03, 0.01, 0.0, -0.01, 0.02, -0.02, 0.01]
    fut = sequential_decision(weak, look=1, n_looks=3, alpha=0.05, min_effect=0.5)
    assert fut.action == "stop_futility" and fut.futility_ci_high < 0.5
    noisy = [1.5, -1.0, 0.8, 0.3]
    assert sequential_decision(noisy, look=1, n_looks=3, alpha=0.05, min_effect=0.5).action == "continue"
    assert sequential_decision(noisy, look=3, n_looks=3, alpha=0.05, min_effect=0.5).action == "stop_final"
    harm = [-1.0 - 0.01 * i for i in range(12)]
    assert sequential_decision(harm, look=1, n_looks=3, alpha=0.05, min_effect=0.5).action == "stop_futility"
    assert sequential_decision(harm, look=1, n_looks=3, alpha=0.05, min_effect=0.5,
                               direction="less").action == "stop_efficacy"
    with pytest.raises(ValueError, match="look must be"):
        sequential_decision(strong, look=4, n_looks=3, alpha=0.05, min_effect=0.5)


def test_preregistration_frozen_serialisable_and_validated():
    p = Preregistration("prior knowledge raises the score", min_effect=0.3, sequential=3)
    assert Preregistration.from_dict(json.loads(p.to_json())) == p
    with pytest.raises(Exception):
        p.alpha = 0.1  # type: ignore[misc]
    for bad, match in [({"direction": "up"}, "direction"), ({"alpha": 1.5}, "alpha"),
                       ({"min_effect": -1}, "min_effect"), ({"test": "z"}, "test")]:
        with pytest.raises(ValueError, match=match):
            Preregistration("h", **bad)
    with pytest.raises(ValueError, match="unknown pre-registration fields"):
        Preregistration.from_dict({"hypothesis": "h", "colour": "red"})


def _stats(diffs, seed=0):
    d = np.asarray(diffs, float)
    return paired_stats(np.zeros_like(d), d, seed=seed)


@pytest.mark.parametrize(
    "diffs, direction, expected",
    [
        ([0.9, 1.1, 0.8, 1.2, 1.0, 0.95, 1.05, 0.85], "greater", "supported"),
        ([0.2, 0.25, 0.3, 0.15, 0.22, 0.28, 0.18, 0.2], "greater", "not supported"),  # significant, too small: CI < 0.5
        ([-0.9, -1.1, -0.8, -1.2, -1.0, -0.95, -1.05, -0.85], "greater", "not supported"),  # other direction
        ([-0.9, -1.1, -0.8, -1.2, -1.0, -0.95, -1.05, -0.85], "less", "supported"),
        ([-0.9, -1.1, -0.8, -1.2, -1.0, -0.95, -1.05, -0.85], "two-sided", "supported"),
        ([2.0, -1.5, 1.8, -0.5, 1.2, -1.0, 0.9, 0.4], "greater", "inconclusive"),
        ([0.5, 0.7], "greater", "inconclusive"),  # n=2: Wilcoxon cannot reach 0.05, CI wide
    ],
)
def test_verdict_table(diffs, direction, expected):
    prereg = Preregistration("h", min_effect=0.5, direction=direction)
    v, reason = explain_verdict(prereg, _stats(diffs))
    assert v == expected, reason


def test_min_attainable_p_is_what_the_exact_test_returns_when_every_task_agrees():
    for n in (3, 5, 6, 8):
        two = wilcoxon_test(np.arange(1.0, n + 1)).pvalue  # every difference positive, distinct ranks
        one = wilcoxon_test(np.arange(1.0, n + 1), alternative="greater").pvalue
        assert min_attainable_p(n) == pytest.approx(two) and min_attainable_p(n, alternative="greater") == pytest.approx(one)
    assert (min_attainable_p(5), min_attainable_p(6)) == (0.0625, 0.03125)
    assert min_attainable_p(2, test="t") == 0.0 and min_attainable_p(1, test="t") == 1.0
    assert tasks_needed(0.05) == 6 and tasks_needed(0.05, alternative="greater") == 5 and tasks_needed(0.05, test="t") == 2


def test_variance_ratio_rejects_at_alpha_when_both_sds_estimate_the_same_variance():
    # the calibration's design: 4 outputs re-scored 3x (8 df) against 4 tasks run twice (4 df)
    rng = np.random.default_rng(7)
    sims, rejected = 4000, 0
    for _ in range(sims):
        judge = rng.normal(0.0, 0.5, (4, 3))
        gen = rng.normal(0.0, 0.5, (4, 2))
        sd_j = math.sqrt(np.sum((judge - judge.mean(1, keepdims=True)) ** 2) / 8)
        sd_g = math.sqrt(np.sum((gen - gen.mean(1, keepdims=True)) ** 2) / 4)
        rejected += variance_ratio(sd_j, 8, sd_g, 4)[1] < 0.05
    assert abs(rejected / sims - 0.05) < 0.012
    f, p = variance_ratio(0.4, 8, 0.2, 4)
    assert f == pytest.approx(4.0) and 0.05 < p < 0.2  # 4x the variance on 8 and 4 df is not rare
    assert variance_ratio(2.0, 8, 0.2, 4)[1] < 0.001
    assert all(math.isnan(x) for x in variance_ratio(0.4, 0, 0.2, 4) + variance_ratio(0.4, 8, 0.0, 4))
