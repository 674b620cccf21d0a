"""The design checks: a design that cannot answer its question is refused before anything runs, in one line with
the numbers and the fixes, unless its allow_underpowered is set.

The sweep cannot promote when its train filter cannot reach alpha over the train tasks, when it measures no noise
floor, or when its holdout is too small for the confirmation's first look (experiments.stats' reachability:
min_attainable_p, holdout_min_p); the calibration checks nothing when its A/A test or positive control cannot reach
alpha over its tasks.
"""

from __future__ import annotations

from experiments.stats import TESTS, holdout_min_p, holdout_tasks_needed, level, min_attainable_p, tasks_needed
from harness.compose import check_choice, check_range
from harness.config import ConfigError

from ._schema import ExperimentConfig


def check_calibrate_design(exp: ExperimentConfig) -> None:
    """ConfigError (one line) on an invalid calibrate.* value, or when the A/A test or the positive control over
    calibrate.tasks tasks cannot reach alpha (unless calibrate.allow_underpowered)."""
    c = exp.calibrate
    n_all = len(exp.benchmark.tasks)
    if n_all == 0:
        raise ConfigError(f"benchmark {exp.benchmark.name!r} has no tasks; expected at least 2 for sweep.kind=calibrate")
    check_range("calibrate.tasks", c.tasks, 0)
    if c.tasks > n_all:
        raise ConfigError(f"calibrate.tasks={c.tasks} is out of range; benchmark {exp.benchmark.name!r} has {n_all} "
                          f"task(s) (0 uses them all)")
    if c.generator_repeats < 2:
        raise ConfigError(f"calibrate.generator_repeats={c.generator_repeats} measures no generator variance; "
                          f"expected a value in [2, inf]")
    if c.judge_repeats < 2:
        raise ConfigError(f"calibrate.judge_repeats={c.judge_repeats} measures no judge variance; "
                          f"expected a value in [2, inf]")
    check_range("calibrate.replications", c.replications, 1)
    check_range("calibrate.sims", c.sims, 200)
    check_choice("calibrate.test", c.test, TESTS)
    for key, value in (("calibrate.alpha", c.alpha), ("calibrate.power", c.power)):
        if not 0.0 < value < 1.0:
            raise ConfigError(f"{key}={value!r} is out of range; expected a value in (0, 1)")
    if not c.power > c.alpha:
        raise ConfigError(f"calibrate.power={c.power!r} is not above calibrate.alpha={c.alpha!r}; expected power > alpha")
    if not c.target_effect > 0:
        raise ConfigError(f"calibrate.target_effect={c.target_effect!r} is out of range; expected a value > 0 "
                          f"(composite points)")
    if not c.harmful_instruction.strip():
        raise ConfigError("calibrate.harmful_instruction is empty; expected an instruction that makes outputs worse")
    decodings = list(c.decodings or ())  # the A/A' arm's decodings
    if not decodings or len(set(decodings)) != len(decodings) or not set(decodings) <= {"sampled", "greedy"}:
        raise ConfigError(f"calibrate.decodings={decodings!r} is not allowed; expected a list of distinct values from "
                          f"sampled, greedy")
    problem = calibrate_design_problem(exp)
    if problem and not c.allow_underpowered:
        raise ConfigError(problem)


def check_sweep_design(exp: ExperimentConfig) -> None:
    """ConfigError (one line: the numbers and the fixes) when the sweep cannot conclude, unless allowed."""
    problem = sweep_design_problem(exp)
    if problem and not exp.sweep.allow_underpowered:
        raise ConfigError(problem)


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

    Promotion needs (1) under sweep.train_filter "wilcoxon" (today's) the one-sided exact Wilcoxon over the train
    tasks to reach sweep.alpha (smallest p 1 / 2^n_train) and (2) a noise floor, i.e. sweep.baseline_repeats >= 2;
    under "positive" at least one train task (its train mean against the baseline's), under "none" nothing of the
    train split (neither filter uses the floor or the Wilcoxon); and (3) a holdout confirmation: under
    rule "tasks" enough holdout tasks that the exact sign-flip p of all of them moving the same way, 1 / 2^n_holdout
    (holdout_min_p), is below the first look's level alpha / 2 (6 tasks at alpha 0.05), and sweep.holdout_top_k >= 1.
    """
    sw = exp.sweep
    n_train, n_hold = len(exp.tasks("train")), len(exp.tasks("holdout"))
    rule = sw.train_filter
    p = min_attainable_p(n_train, test="wilcoxon", alternative="greater")
    if rule == "positive" and n_train < 1:
        return (f"sweep: benchmark {exp.benchmark.name!r} has no train task: the train filter 'positive' (train mean "
                f"above the baseline's) can pass no candidate; add split=train tasks, sweep.train_filter=none, or "
                f"sweep.allow_underpowered=true")
    if rule == "wilcoxon" and p >= sw.alpha:
        need = tasks_needed(sw.alpha, test="wilcoxon", alternative="greater")
        return (f"sweep: benchmark {exp.benchmark.name!r} has {n_train} train task(s) and {n_hold} holdout: the "
                f"smallest one-sided exact Wilcoxon p over {n_train} train tasks is {p:.4g} >= alpha {sw.alpha:g}, "
                f"so no candidate can ever be promoted; use >= {need} train tasks (benchmark=asyncio_practices has "
                f"12 train + 12 holdout), a larger sweep.alpha, or sweep.allow_underpowered=true for a first look")
    if rule == "wilcoxon" and sw.baseline_repeats < 2:
        return (f"sweep: baseline_repeats={sw.baseline_repeats} measures no noise floor (it needs >= 2 baseline runs), "
                f"so no difference can be told from noise; set sweep.baseline_repeats=2 or more, or "
                f"sweep.allow_underpowered=true")
    if n_hold < 2 and sw.holdout_test == "tasks" and sw.holdout_top_k >= 1:
        return (f"sweep: {n_hold} holdout task(s): the confirmation over tasks (a paired t over the holdout tasks) "
                f"needs at least 2 to measure their spread, so no candidate can be confirmed; add split=holdout "
                f"tasks, or sweep.allow_underpowered=true")
    first = level(sw.alpha, 1)  # the first look's level: the most any look of this design may spend
    if sw.holdout_test == "tasks" and sw.holdout_top_k >= 1 and holdout_min_p(n_hold) >= first:
        return (f"sweep: {n_hold} holdout tasks cannot reach the first holdout look's level {first:g} (alpha "
                f"{sw.alpha:g} / 2): every holdout task moving the same way is p = 1/2^{n_hold} = "
                f"{holdout_min_p(n_hold):.4g} by the exact sign-flip test, and a t over so few tasks confirms only "
                f"by trusting a normal spread; use >= {holdout_tasks_needed(first)} holdout tasks (add split=holdout "
                f"tasks), a larger sweep.alpha, or sweep.allow_underpowered=true")
    if n_hold < 1 or sw.holdout_top_k < 1:
        return (f"sweep: {n_hold} holdout task(s) and holdout_top_k={sw.holdout_top_k}: no candidate can be confirmed "
                f"on held-out tasks, so none can be promoted; add split=holdout tasks and set sweep.holdout_top_k >= 1, "
                f"or sweep.allow_underpowered=true")
    return None
