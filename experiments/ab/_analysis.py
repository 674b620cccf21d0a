"""An A/B test's analysis: per-task means over complete pairs, the statistics of every metric (the
pre-registered one primary, dimensions and secondary metrics as Holm families), and the verdict.

What each arm cost (experiments.stats): per metric, both arms' mean cost per task over the complete pairs and
the paired difference B - A with a t interval over tasks at the pre-registered level (result.cost).

What is missing is counted per arm (failed cells, judge replies that could not be read): arms that differ in
either get no verdict (experiments.stats.missing_imbalance), whatever the complete pairs say. Arms with as many
failed cells, on different cells (tasks or replications), keep the complete pairs' verdict only when the worst case
gives it too (worst_case_verdict): every failed cell scored at the value that works against the verdict.

Pure functions of the ledger's cells (experiments.ab.load_cells): a resumed or finished test is analysed again
from its ledger alone (load_result).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from experiments.stats import (COST_METRICS, CostDiff, Decision, PairedStats, Preregistration, bootstrap_ci, cohens_dz,
                               cost_by_task, explain_verdict, finite_array, holm, missing_imbalance, paired_cost,
                               paired_differences, paired_ttest, rank_biserial, replication_noise, sequential_decision,
                               wilcoxon_test)

from ._cells import SECONDARY, ABDesign, ABResult, TaskResult, cell_key, judge_failures_of, load_cells, metric_family
from ._pairwise import with_pairwise

# -- the A/B's statistics per metric --------------------------------------------------------------------------------


def with_holm(family: Mapping[str, PairedStats], test: str = "wilcoxon") -> dict[str, PairedStats]:
    """The family with Holm-adjusted p-values (of `test`) filled in."""
    names = list(family)
    adjusted = holm([family[k].p(test) for k in names])
    return {k: dataclasses.replace(family[k], p_holm=q, holm_test=test) for k, q in zip(names, adjusted)}


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
    xa, xb = finite_array(a, "a"), finite_array(b, "b")
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
        ttest=paired_ttest(d, exact_floor=True),  # never below the exact sign-flip floor 2 / 2^n
        dz=cohens_dz(d),
        rank_biserial=rank_biserial(d),
        diffs=tuple(float(x) for x in d),
        noise=replication_noise(reps_a, reps_b) if reps_a is not None and reps_b is not None else None,
    )



def family_of(metric: str, cells: Mapping[Any, Mapping[str, Any]]) -> str:
    """metric_family, also for a secondary metric a run_arm reports beyond SECONDARY (and no dimension has)."""
    ok = [c for c in cells.values() if c.get("status") == "ok"]
    dims = {k for c in ok for k in (c.get("dimensions") or {})}
    secs = {k for c in ok for k in (c.get("secondary") or {})} - dims
    return metric_family(metric, (*SECONDARY, *sorted(secs)))


def _value(rec: Mapping[str, Any], metric: str, family: str) -> float | None:
    if family == "score":
        return rec.get("score")
    return (rec.get(family) or {}).get(metric)


def task_results(
    cells: Mapping[tuple[str, str, int], Mapping[str, Any]],
    task_ids: Sequence[str],
    names: tuple[str, str],
    replications: int,
    metric: str,
    family: str = "score",
) -> tuple[list[TaskResult], list[dict[str, Any]]]:
    """Per-task means over complete pairs for one metric, and the pairs left out (with why)."""
    a, b = names
    results, excluded = [], []
    for tid in task_ids:
        ra, rb = [], []
        for rep in range(replications):
            ca, cb = cells.get(cell_key(tid, a, rep)), cells.get(cell_key(tid, b, rep))
            missing = [arm for arm, c in ((a, ca), (b, cb)) if c is None]
            failed = [f"{arm}: {c.get('error')}" for arm, c in ((a, ca), (b, cb)) if c and c.get("status") != "ok"]
            if missing or failed:
                why = "; ".join([f"{m}: not run" for m in missing] + failed)
                excluded.append({"task": tid, "replication": rep, "reason": why})
                continue
            va, vb = _value(ca, metric, family), _value(cb, metric, family)
            if va is None or vb is None:
                excluded.append({"task": tid, "replication": rep, "reason": f"{metric} missing in an arm"})
                continue
            ra.append(float(va))
            rb.append(float(vb))
        if ra:
            ma, mb = float(np.mean(ra)), float(np.mean(rb))
            results.append(TaskResult(tid, len(ra), tuple(ra), tuple(rb), ma, mb, mb - ma))
    return results, excluded


def missing_counts(
    cells: Mapping[tuple[str, str, int], Mapping[str, Any]], task_ids: Sequence[str], names: tuple[str, str],
) -> tuple[dict[str, int], dict[str, int], dict[str, list[str]]]:
    """Per arm, over the cells of these tasks: failed cells, judge replies that could not be read (a cell's
    judge_failures, absent = 0) and the tasks with a failed cell. A cell not run yet is neither."""
    ids = set(task_ids)
    failed = {arm: 0 for arm in names}
    judged = {arm: 0 for arm in names}
    where: dict[str, list[str]] = {arm: [] for arm in names}
    for (tid, arm, _), c in cells.items():
        if tid not in ids or arm not in failed:
            continue
        judged[arm] += judge_failures_of(c)
        if c.get("status") != "ok":
            failed[arm] += 1
            where[arm].append(tid)
    return failed, judged, where


def failed_cell_keys(
    cells: Mapping[tuple[str, str, int], Mapping[str, Any]], task_ids: Sequence[str], names: tuple[str, str],
) -> dict[str, set[tuple[str, int]]]:
    """Per arm, the (task, replication) of each failed cell over these tasks."""
    ids = set(task_ids)
    out: dict[str, set[tuple[str, int]]] = {arm: set() for arm in names}
    for (tid, arm, rep), c in cells.items():
        if tid in ids and arm in out and c.get("status") != "ok":
            out[arm].add((tid, rep))
    return out


def _filled(metric: str, family: str, value: float) -> dict[str, Any]:
    """A failed cell scored `value` on `metric` (where _value reads it): the worst case's stand-in."""
    if family == "score":
        return {"status": "ok", "score": value}
    return {"status": "ok", family: {metric: value}}


def worst_case_verdict(
    cells: Mapping[tuple[str, str, int], Mapping[str, Any]], task_ids: Sequence[str], design: ABDesign,
    prereg: Preregistration, result: ABResult, claim: str,
) -> tuple[str, str, str]:
    """The verdict with every failed cell scored at the value that works against `claim`, and that value's text.

    The value is the extreme of the pre-registered metric over every ok cell of these tasks, both arms: the worst
    the test saw, since the metric's scale may have no bound (tokens). Against a claim that B is higher (supported
    with direction greater, or two-sided with a positive mean; not supported with direction less) B's failed cells
    get the lowest value and A's the highest; against a claim that B is lower, the reverse. A two-sided 'not
    supported' (|effect| below min_effect) must hold under both fills. Returns (verdict, reason, fill text); the
    verdict holds when it is `claim` under every fill."""
    names = design.arm_names
    a, b = names
    metric = prereg.metric
    family = family_of(metric, {k: c for k, c in cells.items() if k[0] in set(task_ids)})
    seen = [float(v) for (t, _, _), c in cells.items() if t in set(task_ids) and c.get("status") == "ok"
            for v in (_value(c, metric, family),) if v is not None]
    if not seen:
        return "inconclusive", "no ok cell to bound the failed ones with", ""
    lo, hi = min(seen), max(seen)
    up = result.primary.mean_diff >= 0 if prereg.direction == "two-sided" else prereg.direction != "less"
    if claim == "supported":
        fills = [-1 if up else 1]  # -1: B's failed cells low, A's high (against "B higher")
    elif prereg.direction == "two-sided":
        fills = [1, -1]
    else:
        fills = [1 if prereg.direction == "greater" else -1]  # against "B falls short": B's failed cells high
    failed = failed_cell_keys(cells, task_ids, names)
    texts = []
    for sign in fills:
        value_of = {b: hi if sign > 0 else lo, a: lo if sign > 0 else hi}
        filled = dict(cells)
        for arm in names:
            for tid, rep in failed[arm]:
                filled[cell_key(tid, arm, rep)] = _filled(metric, family, value_of[arm])
        st, tasks, _ = _metric_stats(filled, task_ids, names, design, prereg, metric, family, 0)
        st = with_holm({"p": st}, prereg.test)["p"]
        decision = result.decision
        if decision is not None:
            decision = sequential_decision([t.diff for t in tasks], look=decision.look, n_looks=decision.n_looks,
                                           alpha=prereg.alpha, min_effect=prereg.min_effect,
                                           direction=prereg.direction)
        v, why = explain_verdict(prereg, dataclasses.replace(result, primary=st, decision=decision))
        text = f"{b}'s failed cells at {value_of[b]:.4g} and {a}'s at {value_of[a]:.4g}"
        texts.append(text)
        if v != claim:
            return v, why, text
    return claim, "", " / ".join(texts)


def usage_of(rec: Mapping[str, Any], metric: str) -> float | None:
    """A cell's cost on one metric (experiments.stats.COST_METRICS): its "usage" field; for llm_calls, else the
    meta's count (HarnessCells kept it there before "usage" existed). Not recorded: None, never 0."""
    usage = rec.get("usage") or {}
    name = "latency_s" if metric == "wall_s" else metric
    value = usage.get(name)
    if value is None and metric == "llm_calls":
        value = (rec.get("meta") or {}).get("llm_calls")
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def arm_costs(
    cells: Mapping[tuple[str, str, int], Mapping[str, Any]], task_ids: Sequence[str], names: tuple[str, str],
    replications: int, *, level: float = 0.95, metrics: Sequence[str] = COST_METRICS,
) -> dict[str, CostDiff]:
    """Per cost metric, B against A over the replicate pairs where both cells are ok and both measured it: each
    arm's per-task mean (experiments.stats.cost_by_task) and the paired difference with its interval over tasks."""
    a, b = names
    out = {}
    for metric in metrics:
        name = "latency_s" if metric == "wall_s" else metric  # cost_by_task reads TaskScore's field names
        rows: dict[str, list[dict[str, Any]]] = {a: [], b: []}
        for tid in task_ids:
            for rep in range(replications):
                ca, cb = cells.get(cell_key(tid, a, rep)), cells.get(cell_key(tid, b, rep))
                if not ca or not cb or ca.get("status") != "ok" or cb.get("status") != "ok":
                    continue
                va, vb = usage_of(ca, metric), usage_of(cb, metric)
                if va is not None and vb is not None:
                    rows[a].append({"task_id": tid, name: va})
                    rows[b].append({"task_id": tid, name: vb})
        out[metric] = paired_cost(cost_by_task([rows[b]], metric), cost_by_task([rows[a]], metric), metric,
                                  level=level)
    return out


def _metric_stats(cells, task_ids, names, design, prereg, metric, family, seed_offset) -> tuple[PairedStats, list, list]:
    tasks, excluded = task_results(cells, task_ids, names, design.replications, metric, family)
    st = paired_stats(
        [t.mean_a for t in tasks], [t.mean_b for t in tasks], metric=metric, alpha=prereg.alpha,
        n_boot=design.n_boot, seed=design.seed + seed_offset, ci_method=design.ci_method,
        reps_a=[t.reps_a for t in tasks], reps_b=[t.reps_b for t in tasks],
    )
    return st, tasks, excluded


def analyse(
    cells: Mapping[tuple[str, str, int], Mapping[str, Any]],
    design: ABDesign,
    prereg: Preregistration,
    *,
    task_ids: Sequence[str] | None = None,
    decision: Decision | None = None,
    looks: tuple[Decision, ...] = (),
    orders: Mapping[str, list[str]] | None = None,
    cells_run: int = 0,
    cells_skipped: int = 0,
    ledger_path: str = "",
) -> ABResult:
    """Statistics for the pre-registered metric, every dimension and every secondary metric, plus the verdict.

    The primary statistics, the per-task table (result.tasks) and the excluded pairs are those of the
    pre-registered metric; its entry in the dimension or secondary family shares its bootstrap seed.
    """
    names = design.arm_names
    ids = list(task_ids if task_ids is not None else design.task_ids)
    ok = [c for (t, _, _), c in cells.items() if t in ids and c.get("status") == "ok"]
    dim_names = sorted({k for c in ok for k in (c.get("dimensions") or {})})
    sec_names = sorted({k for c in ok for k in (c.get("secondary") or {})}, key=lambda s: (SECONDARY.index(s) if s in SECONDARY else len(SECONDARY), s))
    family = family_of(prereg.metric, {k: c for k, c in cells.items() if k[0] in ids})
    primary, tasks, excluded = _metric_stats(cells, ids, names, design, prereg, prereg.metric, family, 0)
    dims = {d: primary if (family, d) == ("dimensions", prereg.metric)
            else _metric_stats(cells, ids, names, design, prereg, d, "dimensions", 1 + i)[0]
            for i, d in enumerate(dim_names)}
    secs = {s: primary if (family, s) == ("secondary", prereg.metric)
            else _metric_stats(cells, ids, names, design, prereg, s, "secondary", 101 + i)[0]
            for i, s in enumerate(sec_names)}
    dims = with_holm(dims, prereg.test) if dims else {}
    secs = with_holm(secs, prereg.test) if secs else {}
    primary = with_holm({"p": primary}, prereg.test)["p"]  # family of one: the pre-registered metric
    done = {t.task for t in tasks}
    result = ABResult(
        arm_names=names, tasks=tuple(tasks), primary=primary, dimensions=dims, secondary=secs,
        excluded_pairs=tuple(excluded), excluded_tasks=tuple(t for t in ids if t not in done),
        decision=decision, looks=tuple(looks), orders=dict(orders or {}), cells_run=cells_run,
        cells_skipped=cells_skipped, ledger_path=ledger_path,
    )
    failed, judged, where = missing_counts(cells, ids, names)
    failed_tasks = {arm: tuple(sorted(set(where[arm]))) for arm in names}
    v, why = explain_verdict(prereg, result)
    refusal = missing_imbalance(names, failed, judged, where)
    keys = failed_cell_keys(cells, ids, names)
    if refusal:  # the complete pairs' answer is shown, never given
        v, why = "inconclusive", f"{refusal}; on the complete pairs alone the rule would say '{v}' ({why})"
    elif keys[names[0]] != keys[names[1]] and v != "inconclusive":  # as many failed cells, on different ones
        shown = "; ".join(f"{arm} failed on {', '.join(failed_tasks[arm])}" for arm in names)
        bound, bound_why, fill = worst_case_verdict(cells, ids, design, prereg, result, v)
        if bound != v:
            v, why = "inconclusive", (
                f"failed cells fall on different tasks ({shown}): with {fill} (the worst case) the rule says "
                f"'{bound}' ({bound_why}); on the complete pairs alone it would say '{v}' ({why}); rerun the same "
                "command to retry failed cells")
        else:
            why = f"{why}; failed cells fall on different tasks ({shown}) and the verdict holds with {fill}"
    cost = arm_costs(cells, ids, names, design.replications, level=1 - prereg.alpha)
    return dataclasses.replace(result, verdict=v, verdict_reason=why, failed_cells=failed, judge_failures=judged,
                               failed_tasks=failed_tasks, cost=cost)


def load_result(design: ABDesign, prereg: Preregistration, ledger_path: str | Path) -> ABResult:
    """Analyse a ledger without running anything (e.g. to re-render a report)."""
    cells = load_cells(Path(ledger_path))
    return with_pairwise(analyse(cells, design, prereg, ledger_path=str(ledger_path)), design, prereg, ledger_path)
