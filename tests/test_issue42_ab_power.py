"""The A/B's power model counts the task x variant spread (issue 42: preflight and summary print the design power).

An A/B averages `replications` runs per task and arm, which shrinks run noise sigma; how differently the two texts
suit each task (the spread tau the calibration's A/A' arm measures) does not shrink with replications. The model
took a task's difference sd as sigma * sqrt(2 / replications) alone, so with tau > 0 it promised effects the real
verdict sees far less often than `power`, and said more replications could buy any effect.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from experiments.ab._analysis import paired_stats
from experiments.stats import Preregistration, ab_design, detection_rate, mde, replications_for_effect
from experiments.stats._verdict import verdict

SIGMA, TAU, N, REPS = 0.5, 0.8, 12, 3


def supported_rate(effect: float, *, sigma: float, tau: float, n: int, reps: int, prereg: Preregistration,
                   worlds: int = 400, seed: int = 42) -> float:
    """The real verdict's 'supported' rate where each task's true difference is effect + N(0, tau) and each run
    adds N(0, sigma): per-task means of `reps` runs per arm, as the A/B analyses them."""
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(worlds):
        base = 5.0 + rng.normal(0, 1.0, n)
        a = base + rng.normal(0, sigma, (reps, n)).mean(axis=0)
        b = base + effect + rng.normal(0, tau, n) + rng.normal(0, sigma, (reps, n)).mean(axis=0)
        hits += verdict(prereg, paired_stats(a, b, n_boot=100)) == "supported"
    return hits / worlds


def test_the_ab_design_adds_the_spread_replications_do_not_shrink():
    d = ab_design(SIGMA, N, alpha=0.05, replications=REPS, test="t", tau=TAU)
    assert d.sd_diff == pytest.approx(math.sqrt(TAU ** 2 + 2 * SIGMA ** 2 / REPS))
    many = ab_design(SIGMA, N, alpha=0.05, replications=10_000, test="t", tau=TAU)
    assert many.sd_diff == pytest.approx(TAU, rel=1e-3)  # replications take run noise away, never the spread
    # an effect the spread alone keeps out of reach over 12 tasks: no number of replications buys it (was: some)
    assert replications_for_effect(SIGMA, N, 0.3, alpha=0.05, test="t", sims=1000, tau=TAU) is None
    assert replications_for_effect(SIGMA, N, 0.3, alpha=0.05, test="t", sims=1000) is not None
    r = replications_for_effect(SIGMA, N, 1.7, alpha=0.05, test="t", sims=2000, tau=TAU)
    at = lambda k: detection_rate(ab_design(SIGMA, N, alpha=0.05, replications=k, test="t", tau=TAU),  # noqa: E731
                                  1.7, sims=2000)
    assert r is not None and at(r) >= 0.8 and (r == 1 or at(r - 1) < 0.8)


def test_the_ab_preflight_counts_the_calibrations_spread_and_its_figure_holds_under_the_real_verdict(
        make_exp, monkeypatch):
    """The preflight's detectable effect, read from a calibration whose A/A' arm measured tau, is detected by the
    real verdict with about the stated power; the figure without tau (what the preflight printed before) is
    detected far less often."""
    from scripted_harness import ScriptedRunner

    import experiments.ab._preflight as preflight
    from experiments.calibration import run_calibration
    from experiments.config import compose_config, load_tasks, to_experiment, validate
    from experiments.ab._preflight import ab_preflight_lines

    exp = make_exp()
    cal = to_experiment(compose_config(["+sweep=calibrate", "backend=fake"]))
    cal.benchmark, cal.synth.instructions, cal.mlflow.enabled = exp.benchmark, dict(exp.synth.instructions), False
    runner = ScriptedRunner(load_tasks(exp.benchmark))
    stored = run_calibration(validate(cal), runner, out=lambda s: None)
    measured = dataclasses.replace(stored, sigma=SIGMA, decomposition={"sampled": {"tau": TAU, "n": 12, "sigma": SIGMA}})
    monkeypatch.setattr(preflight, "find_calibration", lambda *a, **k: (measured, ""))
    exp.ab.min_effect, exp.ab.test, exp.ab.alpha = 0.0, "t", 0.05
    lines = ab_preflight_lines(exp, runner.identity(), load_tasks(exp.benchmark), n_tasks=N, replications=REPS)
    detect = next(ln for ln in lines if "detectable effect" in ln)
    assert f"task x variant spread tau {TAU:.3f} from the calibration's A/A' arm (12 tasks)" in detect
    stated = float(detect.split("detectable effect ")[1].split(" ")[0])
    prereg = Preregistration("B higher", min_effect=0.0, direction="greater", n_tasks=N, replications=REPS, test="t")
    observed = supported_rate(stated, sigma=SIGMA, tau=TAU, n=N, reps=REPS, prereg=prereg)
    assert 0.72 <= observed <= 0.88, (stated, observed)
    blind = mde(ab_design(SIGMA, N, alpha=0.05, replications=REPS, test="t"), power=0.8, sims=2000)
    assert blind < 0.6 * stated  # what the preflight said before: 0.36 against 0.80 here
    assert supported_rate(blind, sigma=SIGMA, tau=TAU, n=N, reps=REPS, prereg=prereg) < 0.45

    # no decomposition stored (a calibration from before issue 42): the positive control's spread, else 0, named
    old = dataclasses.replace(measured, decomposition=None, heterogeneity=None)
    monkeypatch.setattr(preflight, "find_calibration", lambda *a, **k: (old, ""))
    lines = ab_preflight_lines(exp, runner.identity(), load_tasks(exp.benchmark), n_tasks=N, replications=REPS)
    assert "tau 0.000 from nothing (not measured; taken as 0: an optimistic figure)" in next(
        ln for ln in lines if "detectable effect" in ln)

    # the positive control's spread alone: tau is that spread, and the line for an effect that varies as the control
    # did counts it once (as its share of the effect), not again on top of tau
    ctl = dataclasses.replace(old, heterogeneity={"tau": 0.6, "n": 4, "effect_cv": 0.5, "mean": 1.2})
    monkeypatch.setattr(preflight, "find_calibration", lambda *a, **k: (ctl, ""))
    exp.calibrate.sims = 2000
    lines = ab_preflight_lines(exp, runner.identity(), load_tasks(exp.benchmark), n_tasks=N, replications=REPS)
    assert "tau 0.600 from the calibration's positive control (4 tasks)" in lines[2]
    varied = float(next(ln for ln in lines if "varies across tasks" in ln).rsplit(" ", 1)[1])
    once = mde(dataclasses.replace(ab_design(SIGMA, N, alpha=0.05, replications=REPS, test="t"), effect_cv=0.5),
               power=0.8, sims=2000)
    assert varied == pytest.approx(once, abs=1e-3)


def test_the_ab_summary_s_design_power_is_what_its_own_spread_lets_the_real_verdict_see():
    from experiments.ab._design import observed_power_line

    prereg = Preregistration("B higher", min_effect=0.1, direction="greater", n_tasks=N, replications=REPS, test="t")
    rng = np.random.default_rng(7)
    a = 5.0 + rng.normal(0, 1, N)
    stats = paired_stats(a, a + rng.normal(0, 0.9, N), n_boot=100)
    line = observed_power_line(stats, prereg, power=0.8, target=0.5, sims=2000)
    assert line is not None and line.startswith("design power: this A/B detects a mean effect of ")
    stated = float(line.split("effect of ")[1].split(" ")[0])
    assert f"sd of the per-task differences {stats.sd_diff:.3f}" in line and "an effect of 0.5 needs" in line
    # the figure holds for the real verdict in worlds whose per-task differences have that sd (predictive power,
    # the sd an estimate on 11 df: a little above the known-sd figure)
    sd = stats.sd_diff
    observed = supported_rate(stated, sigma=0.0, tau=sd, n=N, reps=1, prereg=prereg)
    assert 0.75 <= observed <= 0.92, (stated, observed)
    assert observed_power_line(paired_stats(a[:2], a[:2] + 1.0, n_boot=50), prereg, power=0.8, target=0.5,
                               sims=200) is None  # two pairs: no spread worth a design line
    # a test that cannot reach alpha on these tasks (exact two-sided Wilcoxon over 5: smallest p 0.0625) says so in
    # words (it read "detects a mean effect of no effect (unreachable)")
    wilcoxon = Preregistration("B differs", min_effect=0.3, n_tasks=5, replications=2, test="wilcoxon")
    five = observed_power_line(paired_stats(a[:5], a[:5] + rng.normal(0, 2, 5), n_boot=50), wilcoxon, power=0.8,
                               target=0.5, sims=500)
    # (the floor every test shares: the exact sign-flip 2/2^n)
    assert five == ("design power: this A/B detects no effect (5 tasks: no two-sided p can go below 2/2^5 = 0.0625 "
                    ">= alpha 0.05)"), five


def test_the_a_a_arm_s_tau_is_read_one_way_for_the_calibration_and_the_preflight():
    """experiments.storage.aa_tau: the sampled A/A' arm's tau, None where it was not measured; a NaN (too few tasks
    to take a variance) is not measured either, never an sd of NaN in a design."""
    from experiments.storage import aa_tau

    assert aa_tau({"sampled": {"tau": 0.8, "n": 12}}) == 0.8
    assert aa_tau({"sampled": {"tau": 0.0}}) == 0.0
    assert aa_tau({"sampled": {"tau": float("nan")}}) is None
    assert aa_tau({"greedy": {"tau": 2.1}}) is None and aa_tau(None) is None and aa_tau({}) is None
