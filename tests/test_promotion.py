"""Promotion as a pure function: ranked candidates, holdout scores and floors in, the verdict out."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import random

import numpy as np
from scipy import stats as sps

from experiments.stats import noise_floor
from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
from experiments.promotion._decide import Candidate, decide, race
from experiments.promotion._decide import candidates, holdout_runs, race_runs

TRAIN = [f"t{i}" for i in range(8)]
HOLD = ["h0", "h1", "h2", "h3"]
REF = {t: 5.0 for t in TRAIN}  # the baseline's per-task train reference


def cand(number: int, train: float, h: str) -> Candidate:
    scores = {t: train + 0.01 * i for i, t in enumerate(TRAIN)}  # every task above the reference: p = 1/256
    return Candidate(number, h, "op", sum(scores.values()) / len(scores), scores, {"research": f"text {h}"})


def hold(value: float) -> HoldoutScores:
    return HoldoutScores({t: value for t in HOLD})


# the earlier rule: diff > 2 SE with one run each, i.e. 2 * sigma * sqrt(2 / 4); sigma chosen for a floor of 0.2
FLOOR_02 = HoldoutTest(0.2 / (2 * 0.5 ** 0.5), None, 0.05, "floor")


def _decide(top, holdout, base=hold(5.0), **kw):
    args = dict(train_floor=0.3, alpha=0.05, test=FLOOR_02) | kw
    return decide(top, REF, base, holdout, **args)


@pytest.mark.parametrize(
    "train, held, wins",
    [
        (7.0, 6.0, True),  # claimed on train, +1.0 on the holdout > floor 0.2
        (7.0, 5.1, False),  # claimed on train, holdout +0.1 within its floor
        (5.1, 7.0, False),  # holdout far ahead, but train +0.1 + within the train floor 0.3
    ],
)
def test_a_candidate_wins_only_when_train_claims_and_holdout_clears_its_floor(train, held, wins):
    verdict = _decide([cand(3, train, "a")], {"a": hold(held)})
    (row,) = verdict.rows
    assert row.wins is wins and (verdict.pick is row) is wins
    assert verdict.winner is None and (row.fixed_task or not row.train.claimed)  # never moves an alias
    assert row.holdout_diff == pytest.approx(held - 5.0) and row.train.claimed is (train > 5.3)
    assert row.holdout_level == (pytest.approx(0.2) if train > 5.3 else None)  # unclaimed: not tested


def test_among_winners_the_best_holdout_mean_is_promoted_and_the_earlier_trial_on_a_tie():
    top = [cand(2, 7.5, "a"), cand(5, 7.2, "b"), cand(4, 7.0, "c")]
    verdict = _decide(top, {"a": hold(6.0), "b": hold(6.5), "c": hold(6.5)})
    assert [r.trial for r in verdict.rows] == [2, 5, 4] and all(r.wins for r in verdict.rows)
    assert verdict.pick.trial == 4  # b and c tie at 6.5 on the holdout: the earlier trial


def test_no_holdout_or_no_candidate_promotes_nothing_and_a_failed_baseline_holdout_fails_every_row():
    assert _decide([cand(1, 7.0, "a")], {}, base=None).rows == ()
    assert _decide([], {}).pick is None
    verdict = _decide([cand(1, 7.0, "a")], {"a": hold(9.0)}, base=HoldoutScores(None, "task 'h0' failed: boom"))
    (row,) = verdict.rows
    assert verdict.pick is None and not row.wins and row.holdout_mean is None and row.error == "task 'h0' failed: boom"


def test_candidates_are_complete_distinct_non_baseline_trials_best_first():
    def trial(number, value, state="COMPLETE", **attrs):
        attrs.setdefault("instruction_hash", f"h{number}")
        return SimpleNamespace(number=number, value=value, state=SimpleNamespace(name=state),
                               user_attrs={"operator": "op", **attrs})

    trials = [trial(0, 5.0, operator="baseline", instruction_hash="base"), trial(1, 6.0), trial(2, 7.0),
              trial(3, 7.0), trial(4, 9.0, state="PRUNED"), trial(5, 7.0, duplicate_of=2),
              trial(6, 8.0, instruction_hash="base")]
    assert [c.number for c in candidates(trials, "base")] == [2, 3, 1]


# -- the holdout test: repeats, a one-sided bound, Holm over the train-claimed candidates -------------------------

SIGMA, DF = 0.64, 16  # the simulated benchmark's run noise; 3 baseline runs x 8 train tasks measure it


def runs_of(value: float, n: int) -> HoldoutScores:
    """n holdout runs of one text, every task at `value` on average (+-0.1 alternating between runs)."""
    return HoldoutScores.of_runs([{t: value + (0.1 if k % 2 else -0.1) * (n > 1) for t in HOLD} for k in range(n)])


@pytest.mark.parametrize(
    "gain, test, runs, wins",
    [
        # the simulation's best candidate (+1.1) clears the earlier rule's floor 2 x 0.64 x sqrt(2/4) = 0.905, and the
        # bound with the baseline and candidate run twice (SE 0.32, t_16 at 0.05: +0.559)
        (1.1, "floor", 1, True),
        (1.1, "bound", 2, True),
        # +0.8: short of the earlier floor, clear of the repeated bound: the power the repeats buy
        (0.8, "floor", 1, False),
        (0.8, "bound", 2, True),
        # +0.3 is what noise alone gives about once in six (p 0.18 at SE 0.32): never promoted
        (0.3, "bound", 2, False),
        (0.3, "floor", 1, False),
        (0.0, "bound", 2, False),
    ],
)
def test_a_planted_holdout_gain_is_promoted_by_the_repeated_bound_and_a_noise_sized_one_is_not(gain, test, runs, wins):
    holdout = HoldoutTest(SIGMA, DF, 0.05, test)
    verdict = _decide([cand(3, 7.0, "a")], {"a": runs_of(5.0 + gain, runs)}, base=runs_of(5.0, runs), test=holdout)
    (row,) = verdict.rows
    assert row.wins is wins and (verdict.pick is not None) is wins
    assert row.runs == (runs, runs) and row.holdout_diff == pytest.approx(gain)
    # "bound" pools sigma with the holdout's own repeats: two texts x 4 tasks x (runs - 1) more df, each run 0.1
    # from its task mean
    extra_df = 2 * len(HOLD) * (runs - 1) if test == "bound" else 0
    sigma = ((SIGMA ** 2 * DF + 2 * len(HOLD) * runs * 0.1 ** 2) / (DF + extra_df)) ** 0.5 if extra_df else SIGMA
    assert row.holdout_se == pytest.approx(sigma * ((2 / runs) / 4) ** 0.5)
    if test == "bound":
        assert row.holdout_p == pytest.approx(sps.t.sf(gain / row.holdout_se, DF + extra_df))
        assert row.holdout_level == 0.05
    else:
        assert row.holdout_level == pytest.approx(2 * row.holdout_se)


def _p_gain(p: float, se: float) -> float:
    """The holdout gain whose one-sided p is p at this SE."""
    return se * sps.t.isf(p, DF)


def test_holm_over_the_train_claimed_candidates_only():
    holdout = HoldoutTest(SIGMA, DF, 0.05, "bound")
    se = holdout.se(4, 1, 2)
    held = lambda p: HoldoutScores({t: 5.0 + _p_gain(p, se) for t in HOLD})  # noqa: E731
    base = HoldoutScores({t: 5.0 for t in HOLD}, runs=2)
    # two claimed candidates at p 0.03 and 0.04: Holm asks 0.025 of the smaller, so neither is confirmed ...
    two = _decide([cand(1, 7.2, "a"), cand(2, 7.0, "b")], {"a": held(0.03), "b": held(0.04)}, base=base, test=holdout)
    assert [r.holdout_p for r in two.rows] == [pytest.approx(0.03), pytest.approx(0.04)]
    assert two.pick is None and [r.holdout_level for r in two.rows] == [0.025, 0.05]
    # ... while p 0.02 and 0.04 confirm both (0.02 < 0.025, then 0.04 < 0.05): the better holdout mean wins
    both = _decide([cand(1, 7.2, "a"), cand(2, 7.0, "b")], {"a": held(0.04), "b": held(0.02)}, base=base, test=holdout)
    assert all(r.wins for r in both.rows) and both.pick.trial == 2
    # a candidate whose train comparison does not claim is outside the family: it cannot win and raises no bar
    one = _decide([cand(1, 7.2, "a"), cand(2, 5.1, "b")], {"a": held(0.03), "b": held(0.001)}, base=base, test=holdout)
    assert one.pick.trial == 1 and [r.wins for r in one.rows] == [True, False]
    assert [r.holdout_level for r in one.rows] == [0.05, None]


@pytest.mark.parametrize("top_k", [1, 2])
def test_with_no_real_gain_the_bound_promotes_at_most_alpha_of_the_time(top_k):
    """Monte Carlo: sigma estimated with 16 df (3 baseline runs x 8 train tasks: sigma * sqrt(chi2_16 / 16)), normal
    run noise, the baseline and each candidate run twice on 4 holdout tasks, every candidate claimed on train
    (selection is the worst case), no true holdout difference. The t quantile and Holm keep false promotions at
    alpha (without Holm two candidates would be promoted about 9.5% of the time)."""
    rng = random.Random(14)
    np_rng = np.random.default_rng(14)
    promoted, sims = 0, 1000
    top = [cand(i, 7.0 - 0.1 * i, f"c{i}") for i in range(top_k)]
    for _ in range(sims):
        test = HoldoutTest(SIGMA * (np_rng.chisquare(DF) / DF) ** 0.5, DF, 0.05, "bound")
        run = lambda n: HoldoutScores.of_runs([{t: rng.gauss(5, SIGMA) for t in HOLD} for _ in range(n)])  # noqa: E731
        verdict = _decide(top, {c.hash: run(2) for c in top}, base=run(2), test=test)
        promoted += verdict.pick is not None
    assert promoted / sims <= 0.05 + 2.5 * (0.05 * 0.95 / sims) ** 0.5  # alpha plus 2.5 binomial SE
    assert promoted / sims >= (0.03 if top_k == 1 else 0.02)  # and the test is not vacuous: it does spend alpha


def test_holdout_scores_average_runs_and_the_test_takes_sigma_and_its_df_from_the_noise_floor():
    runs = [{"h0": 5.0, "h1": 6.0}, {"h0": 6.0, "h1": 7.0, "h2": 1.0}]
    # within-task spread: each run 0.5 from its task's mean on 2 tasks: 4 x 0.25 = 1.0 on 2 x (2 - 1) df
    assert HoldoutScores.of_runs(runs) == HoldoutScores({"h0": 5.5, "h1": 6.5}, None, 2, 1.0, 2)
    nf = noise_floor([{"a": 5.0, "b": 6.0}, {"a": 5.2, "b": 6.2}, {"a": 4.8, "b": 5.8}])
    assert HoldoutTest.of(nf, alpha=0.05) == HoldoutTest(pytest.approx(0.2), 4, 0.05, "tasks")
    assert HoldoutTest.of(noise_floor([{"a": 5.0}]), alpha=0.05).sigma == 0.0  # one run measures nothing
    sw = SimpleNamespace(holdout_top_k=2, holdout_baseline_runs=3, holdout_candidate_runs=2)
    assert holdout_runs(sw, 4) == 4 * (3 + 2 * 2) and holdout_runs(sw, 0) == 0


def test_an_unknown_holdout_rule_is_refused_in_one_line():
    with pytest.raises(ValueError, match="holdout test rule must be one of"):
        HoldoutTest(0.5, 4, 0.05, "two-sided")


# -- sigma pooled with the holdout's repeats; the final race ---------------------------------------------------


def test_pooled_sigma_adds_the_holdout_repeats_degrees_of_freedom_and_leaves_other_tests_alone():
    base = HoldoutScores.of_runs([{"h0": 5.0, "h1": 6.0}, {"h0": 5.4, "h1": 6.4}, {"h0": 5.2, "h1": 6.2}])
    cand_ = HoldoutScores.of_runs([{"h0": 7.0, "h1": 7.0}, {"h0": 7.6, "h1": 7.6}])
    assert (base.within_df, cand_.within_df) == (4, 2)
    assert base.within_ss == pytest.approx(2 * (0.04 + 0.04 + 0.0)) and cand_.within_ss == pytest.approx(4 * 0.09)
    test = HoldoutTest(0.5, 8, 0.05, "bound")
    pooled = test.pooled([base, cand_])
    assert pooled.df == 14 and pooled.sigma == pytest.approx(((0.25 * 8 + 0.16 + 0.36) / 14) ** 0.5)
    # one run each adds nothing; a known sigma (df None), the floor rule and a missing holdout are kept as they are
    one = HoldoutScores({"h0": 5.0})
    assert test.pooled([one, one]) is test
    assert HoldoutTest(0.5, None, 0.05, "bound").pooled([base, cand_]).sigma == 0.5
    assert HoldoutTest(0.5, 8, 0.05, "floor").pooled([base, cand_]).df == 8
    assert test.pooled([None, HoldoutScores(None, "failed"), cand_]).df == 10


def test_with_no_real_gain_the_pooled_bound_still_promotes_at_most_alpha_and_gains_power_at_a_real_one():
    """Monte Carlo over the shipped design (sigma from 2 baseline runs x 8 train tasks: 8 df; the baseline 3 and the
    candidate 2 runs on 4 holdout tasks): pooling the holdout's within-task spread gives 20 df. Under normal noise a
    sample variance is independent of the sample means, so the false-confirmation rate stays at alpha; at a real
    gain of 2.5 SE the pooled test confirms more often than the test on the 8 df alone."""
    rng = np.random.default_rng(21)
    df0, sims = 8, 4000

    def rate(gain: float, pool: bool) -> float:
        won = 0
        for _ in range(sims):
            test = HoldoutTest(SIGMA * (rng.chisquare(df0) / df0) ** 0.5, df0, 0.05, "bound")
            runs = lambda n, mu: HoldoutScores.of_runs(  # noqa: E731
                [{t: float(x) for t, x in zip(HOLD, rng.normal(mu, SIGMA, len(HOLD)))} for _ in range(n)])
            base, held = runs(3, 5.0), runs(2, 5.0 + gain)
            if not pool:  # the same scores with their spread hidden: the test on the noise floor's df alone
                base, held = HoldoutScores(base.scores, None, 3), HoldoutScores(held.scores, None, 2)
            won += _decide([cand(1, 7.0, "a")], {"a": held}, base=base, test=test).pick is not None
        return won / sims

    se = SIGMA * ((1 / 2 + 1 / 3) / 4) ** 0.5
    assert rate(0.0, True) <= 0.05 + 2.5 * (0.05 * 0.95 / sims) ** 0.5
    assert rate(0.0, True) >= 0.035  # it does spend alpha
    pooled, alone = rate(2.5 * se, True), rate(2.5 * se, False)
    assert pooled > alone + 0.03, (pooled, alone)


def test_the_final_race_ranks_on_the_mean_of_a_candidates_runs_and_leaves_the_others_alone():
    a, b, c = cand(1, 7.4, "a"), cand(2, 7.2, "b"), cand(3, 6.9, "c")
    # a's re-run comes out low, b's holds up: b leads on the mean of two runs; c, not raced, keeps its one run and
    # ranks after the raced ones (a one-run mean is not comparable with a two-run one)
    out = race([a, b, c], {"a": [{t: 6.0 for t in TRAIN}], "b": [{t: 7.2 for t in TRAIN}]})
    assert [x.hash for x in out] == ["b", "a", "c"]
    assert out[0].runs == 2 and out[0].train_mean == pytest.approx(7.2 + 0.035 / 2)
    assert out[1].train_scores["t0"] == pytest.approx((7.4 + 6.0) / 2) and out[2] is c
    # a re-run with fewer tasks averages over the tasks every run has; an empty re-run changes nothing
    part = race([a], {"a": [{"t0": 8.0, "t1": 8.0}]})[0]
    assert set(part.train_scores) == {"t0", "t1"} and part.train_scores["t0"] == pytest.approx(7.7)
    assert race([a], {"a": [{}]})[0] is a
    sw = SimpleNamespace(race_top=2)
    assert race_runs(sw, 8) == 16 and race_runs(sw, 0) == 0 and race_runs(SimpleNamespace(race_top=0), 8) == 0
