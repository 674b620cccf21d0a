"""Reachability: can a design's test reach alpha at all, and the designs that cannot answer.

A design whose test can never reach alpha (min_attainable_p, the test's own floor, in experiments.stats._tests; for
the holdout's t, holdout_min_p: the sign-flip p 1 / 2^n of all holdout tasks moving the same way) is refused by
experiments.config.validate unless allowed: sweep_design_problem and calibrate_design_problem say why, in one line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._tests import min_attainable_p

if TYPE_CHECKING:  # annotations only, never imported at run time: experiments.config imports stats (its checks)
    from experiments.config import ExperimentConfig


# -- reachability: can the test reach alpha at all? -----------------------------------------------------------


def holdout_min_p(n: int) -> float:
    """The smallest p the holdout's confirmation over n tasks can honestly give: the exact one-sided sign-flip p of
    n differences all of one sign, 1 / 2^n (experiments.sweep's TaskDiffs gives it when the differences are all
    equal). The paired t has no floor, but below this it rests on a normal spread alone: differences drawn from
    {-2, -1, +1, +2} (mean 0) are confirmed at level 0.025 0.045 / 0.055 / 0.029 of the time over 3 / 4 / 5 tasks,
    0.026 / 0.023 over 6 / 8 (20,000 draws each). 1 below 2 tasks."""
    return 0.5 ** n if n >= 2 else 1.0


def holdout_tasks_needed(level: float) -> int:
    """The fewest holdout tasks whose confirmation can reach `level` (holdout_min_p(n) < level)."""
    n = 2
    while holdout_min_p(n) >= level:
        n += 1
    return n


def tasks_needed(alpha: float, *, test: str = "wilcoxon", alternative: str = "two-sided") -> int:
    """The fewest tasks with which `test` can return p < alpha."""
    n = 1
    while min_attainable_p(n, test=test, alternative=alternative) >= alpha:
        n += 1
    return n


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

    Promotion needs (1) under sweep.train_filter "wilcoxon" (today's) the one-sided exact Wilcoxon over the train
    tasks to reach sweep.alpha (smallest p 1 / 2^n_train) and (2) a noise floor, i.e. sweep.baseline_repeats >= 2;
    under "positive" at least one train task (its train mean against the baseline's), under "none" nothing of the
    train split (neither filter uses the floor or the Wilcoxon); and (3) a holdout confirmation: under
    rule "tasks" enough holdout tasks that the exact sign-flip p of all of them moving the same way, 1 / 2^n_holdout
    (holdout_min_p), is below the first look's level alpha / 2 (6 tasks at alpha 0.05), and sweep.holdout_top_k >= 1.
    """
    sw = exp.sweep
    n_train, n_hold = len(exp.tasks("train")), len(exp.tasks("holdout"))
    rule = getattr(sw, "train_filter", "wilcoxon")  # the key issue 42 adds (experiments.config.SweepConfig)
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
    first = sw.alpha / 2.0  # experiments.stats.level(alpha, 1): the most any look of this design may spend
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
