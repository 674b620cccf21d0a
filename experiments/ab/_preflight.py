"""The A/B's preflight: what its cells will cost and what its pre-registered test detects, from the stored
calibration of the fingerprint (experiments.storage), before the first cell runs."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from experiments.config import ExperimentConfig
from experiments.report import hms, num, spread_effect_line
from experiments.stats import ab_design, detection_rate, mde
from experiments.storage import aa_tau, find_calibration


def ab_preflight_lines(exp: ExperimentConfig, identity: Mapping[str, Any], tasks: Sequence[Any], *, n_tasks: int,
                       replications: int | None = None, cells_prepare: bool = True) -> list[str]:
    """What an A/B will cost and detect, printed before its first cell, as a sweep's preflight does.

    `identity` is the runner's (or arm A's) backend identity and `tasks` the benchmark's tasks, as for a sweep;
    n_tasks: tasks in the test. Projects 2 arms x n_tasks x replications task runs (each with a context
    preparation when cells_prepare), and the detectable effect of the pre-registered test from the stored
    calibration: the effect at which 'supported' (significant AND mean diff >= ab.min_effect) has probability
    power, with a warning that a true effect of ab.min_effect itself is detected with less (half at best)."""
    ab = exp.ab
    reps = replications or ab.replications
    cal, note = find_calibration(exp, identity, tasks)
    runs = 2 * n_tasks * reps
    lines = [f"preflight: A/B {n_tasks} tasks x 2 arms x {reps} replication(s) = {runs} task runs"]
    if ab.compare == "pairwise":
        pw = (getattr(cal, "pairwise", None) or {}) if cal is not None else {}
        g = (f"calibration {cal.key} measured g {pw['g']:.2f} on {pw.get('n')} pairs (its levers say whether "
             "pairwise pays)"
             if cal is not None and isinstance(pw.get("g"), (int, float)) else
             f"g not measured: calibration {cal.key}'s side-by-side judge failed ({pw['not_measured']})"
             if cal is not None and pw.get("not_measured") else
             "g not measured (+sweep=calibrate calibrate.pairwise=true measures it)")
        lines.append(f"preflight: compare=pairwise: + {2 * n_tasks * reps} judge calls (both orders of the "
                     f"{n_tasks * reps} answer pairs; more on a re-ask); the verdict rests on the sign-flip test of "
                     f"the preferences; the detectable effect below is the pointwise test's; {g}")
    if cal is None:
        lines.append(f"preflight: cost and detectable effect unknown ({note})")
        return lines
    co = cal.cost
    per_run_s = co.wall_s + (co.prepare_s if cells_prepare else 0.0)
    per_run_calls = co.uncached_calls + (co.prepare_calls if cells_prepare else 0.0)
    lines.append(f"preflight: ~{runs * per_run_calls:.0f} uncached LLM calls, ~{runs * co.tokens:.0f} tokens, wall "
                 f"~{hms(runs * per_run_s)} (from calibration {cal.key})")
    power = exp.calibrate.power
    tau, tau_source, from_control = ab_spread(cal)
    d = ab_design(cal.sigma, n_tasks, alpha=ab.alpha, replications=reps, test=ab.test, min_effect=ab.min_effect,
                  tau=tau)
    m = mde(d, power=power, sims=exp.calibrate.sims)
    lines.append(f"preflight: detectable effect {num(m)} at power {power:g} ('supported': two-sided {ab.test} "
                 f"p < {ab.alpha:g}, the skew-calibrated one-sided p < {ab.alpha / 2:g} and mean diff >= min_effect "
                 f"{ab.min_effect:g}; run noise sigma {cal.sigma:.3f} "
                 f"from calibration {cal.key}, shrinking with replications; task x variant spread tau {tau:.3f} "
                 f"from {tau_source}, which replications do not shrink)")
    if cal.effect_cv > 0:
        # the control's spread as a share of its effect; where tau is that same spread it is counted once, here
        noise_only = ab_design(cal.sigma, n_tasks, alpha=ab.alpha, replications=reps, test=ab.test,
                               min_effect=ab.min_effect)
        lines.append("preflight: " + spread_effect_line(
            dataclasses.replace(noise_only if from_control else d, effect_cv=cal.effect_cv), "", "tasks",
            power=power, sims=exp.calibrate.sims))
    at_min = detection_rate(d, ab.min_effect, sims=exp.calibrate.sims) if ab.min_effect > 0 else None
    if at_min is not None and at_min < power:
        lines.append(f"preflight: WARNING: the pre-registered minimum effect {ab.min_effect:g}, as the true effect, "
                     f"is called 'supported' with probability {at_min:.2f} only (the observed mean must reach it); "
                     f"effects of {num(m)} or more are detected at power {power:g}: add tasks or replications to "
                     f"bring that down, or pre-register a min_effect below the effect that matters")
    return lines


def ab_spread(calibration: Any) -> tuple[float, str, bool]:
    """(tau, where it came from, whether it is the positive control's spread): the task x variant spread an A/B's
    power model adds to each task's difference, from the calibration's A/A' arm (sampled decoding, as an A/B runs),
    else its positive control's spread, else 0 ("not measured": an optimistic figure)."""
    decomposition = getattr(calibration, "decomposition", None)
    tau = aa_tau(decomposition)
    if tau is not None:
        return tau, f"the calibration's A/A' arm ({decomposition['sampled'].get('n', '?')} tasks)", False
    het = getattr(calibration, "heterogeneity", None) or {}
    if het.get("tau") is not None:
        return float(het["tau"]), f"the calibration's positive control ({het['n']} tasks)", True
    return 0.0, "nothing (not measured; taken as 0: an optimistic figure)", False
