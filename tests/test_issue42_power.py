"""Issue 42: the design power line and the design check model the new default design (train filter "positive",
12 + 12 tasks, 3 + 3 holdout runs per task, a futility stop every 4 holdout tasks), not today's Wilcoxon-and-floor
filter. On 3306971 the line priced the Wilcoxon filter and the noise floor into a design that has neither, and the
design check refused a design with no baseline repeat although nothing in its decision uses the floor."""

from __future__ import annotations

import re

import numpy as np

from conftest import OLD_DESIGN
from experiments.config import sweep_design_problem
from experiments.stats import compare, noise_floor
from experiments.promotion._confirmation import TaskDiffs
from experiments.promotion._futility import futility_stop
from experiments.sweep._preflight import confirmable_line, sweep_confirmable

SIGMA = 0.3  # the scripted test world's run noise (tests/scripted_harness.py), no task x variant spread


def _new_design(exp):
    """The new default design on a 12 + 12 benchmark (attributes set directly, as the config would)."""
    sw = exp.sweep
    sw.train_filter, sw.holdout_futility_block = "positive", 4
    sw.holdout_candidate_runs = sw.holdout_baseline_runs = 3
    sw.baseline_repeats = 1
    return exp


def _mde(line: str) -> float:
    m = re.search(r"confirms a mean effect of ([0-9.]+) composite points", line)
    assert m, line
    return float(m.group(1))


def _real_rule_rate(effect: float, *, worlds: int, seed: int = 42) -> float:
    """P(promoted) of one proposal with a constant mean effect in the test world, through the real pieces: the
    train filter "positive" on experiments.stats.compare (train mean above the baseline's, one candidate and one
    baseline run per train task), the sweep's futility stop (experiments.promotion._futility.futility_stop with the arguments
    experiments/sweep/_reruns.py passes: looks after 4 and 8 of 12 holdout tasks, conditional power below 0.1) and
    the confirmation of experiments.promotion._confirmation.TaskDiffs (skew_test: max of the paired t's p and the skew-calibrated p)
    on per-task means of 3 runs per arm at 0.025."""
    rng = np.random.default_rng(seed)
    train, hold = [f"t{i}" for i in range(12)], [f"h{i}" for i in range(12)]
    hits = 0
    for _ in range(worlds):
        cand_t = dict(zip(train, effect + rng.normal(0.0, SIGMA, 12)))
        if not compare(cand_t, dict(zip(train, rng.normal(0.0, SIGMA, 12))), floor=0.0, alpha=0.05).diff > 0:
            continue
        cand = dict(zip(hold, effect + rng.normal(0.0, SIGMA, (3, 12)).mean(0)))
        base = dict(zip(hold, rng.normal(0.0, SIGMA, (3, 12)).mean(0)))
        if futility_stop(cand, base, hold, 4, level=0.025, power=0.8) is not None:
            continue
        td = TaskDiffs.of(cand, base)
        hits += td.p is not None and td.p < 0.025
    return hits / worlds


def test_the_new_design_power_line_is_the_new_path_s_detectable_effect(make_exp):
    """3306971's line for this design priced the Wilcoxon filter with its floor over one baseline run: it
    reported 0.359 composite points (the new path confirms that 0.99 of the time); the new path's is 0.22."""
    exp = _new_design(make_exp(n_train=12, n_holdout=12))
    line = confirmable_line(exp, sigma=SIGMA, sigma_source="2 baseline runs", baseline_runs=1, candidate_diffs=(),
                            calibration=None, level=0.025)
    mde = _mde(line)
    rate = _real_rule_rate(mde, worlds=3000)  # binomial SE 0.007; the MDE's own Monte Carlo error about 0.02
    assert 0.75 <= rate <= 0.85, (mde, rate, line)
    assert "futility stop every 4 holdout tasks" in line and "3 candidate + 3 baseline run(s)" in line, line
    # 12, not the plain t's 6: the confirmation's skew-calibrated p (never below the t's, and read against the
    # noisy references and the loss tail too: 10 with the three noise-free ones only) needs more tasks
    assert "an effect of 0.5 needs 12 holdout tasks" in line, line

    today = make_exp(*OLD_DESIGN, n_train=16, n_holdout=8)  # 3306971's design: Wilcoxon filter and floor, 2 runs
    today_line = confirmable_line(today, sigma=SIGMA, sigma_source="2 baseline runs", baseline_runs=2,
                                  candidate_diffs=(), calibration=None, level=0.025)
    assert _mde(today_line) > 1.8 * mde, (today_line, line)
    assert "train filter on 16 tasks and confirmation over 8 holdout tasks" in today_line


def test_the_futility_stop_costs_power_in_the_line(make_exp):
    """The stop is non-binding but turns some would-be confirmations into none: the line's effect is at least as
    large with it as without, and the figures without it match the simulation without it."""
    from experiments.stats import decision_power

    kw = dict(n_train=12, n_holdout=12, alpha=0.05, level=0.025, baseline_runs=1, holdout_runs=(3, 3),
              train_filter="positive", sims=2000)
    with_stop = decision_power(1.455, 1.271, futility_block=4, **kw)
    without = decision_power(1.455, 1.271, futility_block=0, **kw)
    assert with_stop.mde >= without.mde
    # <=, not <: the conditional-power stop (below 0.1 under the detectable effect) stops almost no study that would
    # confirm, and at 12 tasks its cost is below what 2,000 simulated studies can measure
    assert with_stop.rate(without.mde) <= without.rate(without.mde)


def test_the_design_check_accepts_the_new_design_without_repeats_and_still_refuses_today_s(make_exp):
    """3306971 refused the new design: "baseline_repeats=1 measures no noise floor", though a positive train
    filter uses no floor. Today's design without repeats is still refused."""
    exp = _new_design(make_exp(n_train=12, n_holdout=12))
    assert sweep_design_problem(exp) is None

    today = make_exp(*OLD_DESIGN, n_train=12, n_holdout=12)
    today.sweep.baseline_repeats = 1
    assert "measures no noise floor" in sweep_design_problem(today)
    few = _new_design(make_exp(n_train=12, n_holdout=4))  # the holdout-size refusal holds for the new design
    assert "cannot reach the first holdout look's level" in sweep_design_problem(few)


def test_the_summary_line_takes_the_run_noise_from_the_baseline_s_holdout_runs_without_repeats(make_exp):
    """With no baseline repeat and no calibration (the new default) the summary had no noise and printed no
    design power line; the baseline's 3 holdout runs measure it."""
    exp = _new_design(make_exp(n_train=12, n_holdout=12))
    rng = np.random.default_rng(3)
    runs = [{f"t{12 + i}": float(x) for i, x in enumerate(5.0 + rng.normal(0.0, SIGMA, 12))} for _ in range(3)]
    line = sweep_confirmable(exp, noise=noise_floor(runs[:1]), baseline_runs=1, cands=(), reference={},
                             calibration=None, look=None, holdout_baseline=runs)
    assert line.startswith("design power: this design confirms"), line
    assert "from the baseline's 3 holdout runs" in line and f"sigma {noise_floor(runs).sigma:.3f}" in line, line
