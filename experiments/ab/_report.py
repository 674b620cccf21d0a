"""Markdown report and PNG plots of an A/B result (matplotlib Agg canvas, no global backend switch).

Everything shown as primary (per-task table, statistics, paired-difference plot, forest plot's first row) is the
pre-registered metric, result.primary.metric, and is labelled with its name.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from experiments.report import SMOKE_LINE, hms, num, pval
from experiments.stats import PairedStats, Preregistration

from ._cells import ABResult, metric_kind

REPORT_NAME = "ab_report.md"
DIFF_PNG = "ab_paired_diff.png"
FOREST_PNG = "ab_forest.png"
COLOR_POS, COLOR_NEG, COLOR_BAND, COLOR_MIN = "#2b7bba", "#d1495b", "#9ecae1", "#e08a00"


def _f(x: Any, digits: int = 3) -> str:
    if x is None:
        return "-"
    try:
        v = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(v):
        return "n/a"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if abs(v) >= 1e5 or 0 < abs(v) < 1e-3:
        return f"{v:.{digits}g}"
    text = f"{v:.{digits}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _p(p: float | None) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    return "<0.0001" if p < 1e-4 else f"{p:.4f}"


def _table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _stats_rows(family: dict[str, PairedStats]) -> list[list[str]]:
    return [
        [name, s.n, _f(s.mean_a), _f(s.mean_b), _f(s.mean_diff), f"[{_f(s.ci.low)}, {_f(s.ci.high)}]",
         _p(s.wilcoxon.pvalue), _p(s.ttest.pvalue), _p(s.p_holm), _f(s.dz, 2), _f(s.rank_biserial, 2)]
        for name, s in family.items()
    ]


def plot_paired_differences(result: ABResult, prereg: Preregistration, path: Path) -> Path:
    """Per-task differences (replicate-level spread as light dots), mean with its CI band, zero and minimum-effect lines."""
    s = result.primary
    tasks = sorted(result.tasks, key=lambda t: t.diff)
    a_name, b_name = result.arm_names
    fig = Figure(figsize=(max(8.0, 0.55 * len(tasks) + 4.5), 4.6), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    x = np.arange(len(tasks))
    if tasks and math.isfinite(s.ci.low):
        ax.axhspan(s.ci.low, s.ci.high, color=COLOR_BAND, alpha=0.35, lw=0,
                   label=f"{100 * s.ci.level:.0f}% CI of mean ({s.ci.method})")
    if tasks:
        ax.axhline(s.mean_diff, color=COLOR_POS, lw=1.5, label=f"mean diff {s.mean_diff:+.2f}")
    ax.axhline(0, color="black", lw=1)
    if prereg.min_effect > 0 and prereg.direction != "less":
        ax.axhline(prereg.min_effect, color=COLOR_MIN, lw=1.2, ls="--", label=f"min effect {prereg.min_effect:g}")
    if prereg.min_effect > 0 and prereg.direction != "greater":
        ax.axhline(-prereg.min_effect, color=COLOR_MIN, lw=1.2, ls="--",
                   label=None if prereg.direction == "two-sided" else f"min effect -{prereg.min_effect:g}")
    for i, t in enumerate(tasks):
        rep_diffs = np.subtract(t.reps_b, t.reps_a)
        if rep_diffs.size > 1:
            ax.scatter(np.full(rep_diffs.size, i), rep_diffs, s=14, color="grey", alpha=0.45, lw=0, zorder=2,
                       label="replicate pair" if i == 0 else None)
    colors = [COLOR_POS if t.diff >= 0 else COLOR_NEG for t in tasks]
    ax.scatter(x, [t.diff for t in tasks], s=46, color=colors, zorder=3, edgecolor="white", lw=0.8,
               label="task diff (mean over reps)")
    ax.set_xticks(x)
    crowded = len(tasks) > 6 or sum(len(t.task) for t in tasks) > 60  # labels would run into each other
    ax.set_xticklabels([t.task for t in tasks], rotation=30 if crowded else 0, ha="right" if crowded else "center",
                       rotation_mode="anchor", fontsize=8)
    ax.set_xlim(-0.6, max(len(tasks) - 0.4, 0.6))
    ax.set_ylabel(f"{s.metric}: {b_name} − {a_name}")
    ax.set_title(f"Paired differences per task: {s.metric} (n={s.n}, verdict: {result.verdict})", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    return path


def plot_forest(result: ABResult, prereg: Preregistration, path: Path) -> Path:
    """Mean difference with CI for the primary metric and every dimension; Holm-adjusted p at the right."""
    rows = [(f"{result.primary.metric} (primary)", result.primary)] + list(result.dimensions.items())
    fig = Figure(figsize=(7.5, 0.5 * len(rows) + 1.4), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    y = np.arange(len(rows))[::-1]
    for yi, (name, s) in zip(y, rows):
        ok = math.isfinite(s.ci.low) and math.isfinite(s.ci.high)
        sig = (s.p_holm if s.p_holm is not None else s.wilcoxon.pvalue) < prereg.alpha
        color = COLOR_POS if sig and s.mean_diff > 0 else COLOR_NEG if sig else "grey"
        if ok:
            ax.hlines(yi, s.ci.low, s.ci.high, color=color, lw=2)
        marker = "D" if yi == y[0] else "o"
        ax.plot([s.mean_diff], [yi], marker=marker, color=color, ms=7 if marker == "D" else 6, zorder=3)
    ax.axvline(0, color="black", lw=1)
    if len(rows) > 1:
        ax.axhline(y[0] - 0.5, color="grey", lw=0.6, ls=":")
    if prereg.min_effect > 0:
        sides = {"greater": (1,), "less": (-1,)}.get(prereg.direction, (-1, 1))
        for i, sign in enumerate(sides):
            ax.axvline(sign * prereg.min_effect, color=COLOR_MIN, ls="--", lw=1.1,
                       label=f"min effect {'±' if len(sides) > 1 else ''}{prereg.min_effect:g}" if i == 0 else None)
        ax.legend(fontsize=7, loc="best", frameon=True, framealpha=0.9)
    ax.set_yticks(y)
    ax.set_yticklabels([name for name, _ in rows], fontsize=8)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    a_name, b_name = result.arm_names
    ax.set_xlabel(f"mean difference {b_name} − {a_name} ({100 * result.primary.ci.level:.0f}% bootstrap CI)")
    test = "Wilcoxon" if prereg.test == "wilcoxon" else "paired t"
    ax.set_title(f"Per-dimension effects (p: {test}, Holm-adjusted)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    trans = ax.get_yaxis_transform()
    ax.text(1.02, len(rows) - 0.45, "Holm p", transform=trans, va="center", fontsize=7, weight="bold")
    for yi, (_, s) in zip(y, rows):
        ax.text(1.02, yi, _p(s.p_holm), transform=trans, va="center", fontsize=7)
    fig.tight_layout()
    fig.subplots_adjust(right=0.86)
    fig.savefig(path)
    return path


def cost_section(result: ABResult) -> list[str]:
    """The "Cost" table: per metric, both arms' mean cost per task over the complete pairs and B - A with its
    interval over tasks (experiments.stats.CostDiff); a metric no pair measured says so."""
    if not result.cost:
        return []
    a_name, b_name = result.arm_names
    level = next(iter(result.cost.values())).level
    out = ["", "## Cost (per task, over the complete pairs)", "",
           f"Each arm's mean cost per task; difference = {b_name} − {a_name}, paired over tasks, with a "
           f"{level:.0%} t interval over tasks. wall_s is the seconds spent in uncached model calls; "
           "llm_calls counts every model call (wiggum rounds included). Not measured: no pair recorded it.", ""]
    rows = []
    for metric, c in result.cost.items():
        if c.diff is None:
            rows.append([metric, 0, "not measured", "not measured", "-", "-", "-"])
            continue
        ci = f"[{_f(c.ci[0])}, {_f(c.ci[1])}]" if c.ci else "n/a (fewer than 2 tasks)"
        rel = "-" if c.ratio is None else f"{c.ratio:+.0%}" + (
            f" [{c.ratio_ci[0]:+.0%}, {c.ratio_ci[1]:+.0%}]" if c.ratio_ci else "")
        rows.append([metric, c.n, _f(c.base_mean), _f(c.cand_mean), _f(c.diff), ci, rel])
    return out + _table(["metric", "tasks", a_name, b_name, "diff", f"{level:.0%} CI", "relative"], rows)


def render_markdown(result: ABResult, prereg: Preregistration, *, plots: Sequence[str] = (DIFF_PNG, FOREST_PNG),
                    notes: Sequence[str] = (), arms: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The report; `notes` are lines shown under the title (e.g. a smoke-run warning), `arms` each arm's overrides."""
    s = result.primary
    a_name, b_name = result.arm_names
    out = [f"# A/B test: {b_name} vs {a_name}", ""]
    out += [f"> {n}" for n in notes] + ([""] if notes else [])
    out += [f"**Verdict: {result.verdict}** — {result.verdict_reason}", ""]
    if arms:
        out += ["## Arms", ""]
        out += _table(["arm", "overrides"], [[name, ", ".join(f"`{k}={v}`" for k, v in ov.items()) or "(base config)"]
                                            for name, ov in arms.items()])
        out += [""]
    out += ["## Pre-registration (written before data collection)", ""]
    out += _table(["field", "value"], [[k, f"`{v}`"] for k, v in prereg.to_dict().items()])
    pw = getattr(result, "pairwise", None)
    if pw is not None:
        out += ["", "## Side by side (compare=pairwise, pre-registered: the verdict rests on it)", "",
                f"Each (task, replication) pair's two answers judged side by side in both orders, blind; a "
                f"disagreement between the orders is a tie. Preference of {b_name} over {a_name}: +1 when both "
                f"orders prefer {b_name}, -1 when both prefer {a_name}; per task the mean over its judged "
                "replications. Test: exact two-sided sign-flip test over tasks. A preference counts which answer is "
                "better, not by how much: 'supported' means preferred on more tasks, not a higher mean score.", ""]
        out += [f"- {line}" for line in pw.lines(a_name, b_name)] + [""]
        out += _table(["task", f"mean preference ({b_name} over {a_name})"],
                      [[t, _f(v)] for t, v in pw.per_task.items()])
        out += ["", f"The pointwise {s.metric} below is shown beside it, not tested."]
    out += ["", f"## Per-task {s.metric}", "",
            (f"Primary metric: `{s.metric}` ({metric_kind(s.metric)}, pre-registered); the per-task values, the "
             "statistics, the paired-difference plot and the verdict are all on it." if pw is None else
             f"Pointwise metric: `{s.metric}` ({metric_kind(s.metric)}); the per-task values, the statistics and the "
             "plots below are on it, shown, not tested: the verdict rests on the side-by-side preferences above."),
            f"Difference = {b_name} − {a_name}; each arm's value is the mean over that task's complete replicate pairs.", ""]
    out += _table(
        ["task", "pairs", a_name, b_name, "diff"],
        [[t.task, t.n_pairs, _f(t.mean_a), _f(t.mean_b), _f(t.diff)] for t in result.tasks],
    )
    w, t = s.wilcoxon, s.ttest
    out += ["", f"## Statistics: {s.metric} (primary)", ""]
    rows = [
        ["n (task pairs)", s.n],
        [f"mean {a_name} / {b_name}", f"{_f(s.mean_a)} / {_f(s.mean_b)}"],
        ["mean difference", _f(s.mean_diff)],
        [f"{100 * s.ci.level:.0f}% CI (paired bootstrap, {s.ci.method}, {s.ci.n_resamples} resamples, seed {s.ci.seed})",
         f"[{_f(s.ci.low)}, {_f(s.ci.high)}]"],
        [f"Wilcoxon signed-rank ({w.method}; zeros dropped: {w.n_zero})",
         f"W = {_f(w.statistic)} (W+ {_f(w.w_plus)}, W− {_f(w.w_minus)}), p = {_p(w.pvalue)}"],
        ["paired t-test", f"t({t.df}) = {_f(t.statistic)}, p = {_p(t.pvalue)}"],
        ["Cohen's dz", _f(s.dz)],
        ["matched-pairs rank-biserial r", _f(s.rank_biserial)],
    ]
    if s.noise is not None and not math.isfinite(s.noise.floor):
        rows += [["noise floor", "n/a: needs at least 2 replications per task and arm (ab.replications)"]]
    elif s.noise is not None:
        nf = s.noise
        rows += [
            [f"noise: pooled within-task SD of replications ({a_name} / {b_name})",
             f"{_f(nf.sd_a)} / {_f(nf.sd_b)}"],
            ["noise: SD of one task's diff / of the mean diff, from noise alone",
             f"{_f(nf.sd_task_diff)} / {_f(nf.sd_mean_diff)}"],
            ["noise floor (2 × SD of mean diff)",
             f"{_f(nf.floor)} — mean diff {'clears' if nf.clears(s.mean_diff) else 'does not clear'} it"],
        ]
    out += _table(["statistic", "value"], rows)
    if result.looks:
        out += ["", f"## Sequential looks ({s.metric})", "", f"Method: {result.looks[0].method}.", ""]
        out += _table(
            ["look", "n", "mean", "nominal alpha", "alpha spent", "CI at nominal level", "action", "reason"],
            [[d.look, d.n, _f(d.mean), _f(d.nominal_alpha, 4), _f(d.spent_alpha, 4),
              f"[{_f(d.ci_low)}, {_f(d.ci_high)}]", d.action, d.reason] for d in result.looks],
        )
    header = ["metric", "n", a_name, b_name, "diff", "CI", "Wilcoxon p", "t p", "Holm p", "dz", "r_rb"]
    if result.dimensions:
        out += ["", "## Per-dimension results (Holm across dimensions)", ""]
        out += _table(header, _stats_rows(result.dimensions))
    if result.secondary:
        out += ["", "## Secondary metrics (Holm across secondary metrics)", ""]
        out += _table(header, _stats_rows(result.secondary))
    out += cost_section(result)
    out += ["", "## Plots", ""] + [f"![{Path(p).stem}]({p})" for p in plots]
    out += ["", "## Run", "",
            f"- cells run this invocation: {result.cells_run}; skipped (already in ledger): {result.cells_skipped}",
            f"- ledger: `{result.ledger_path}`"]
    if result.failed_cells or result.judge_failures:
        out += ["- missing per arm (arms that differ, or fail on different tasks, get no verdict unless the worst "
                "case gives it too): " + "; ".join(
                    f"{arm}: {result.failed_cells.get(arm, 0)} failed cell(s), {result.judge_failures.get(arm, 0)} "
                    f"unreadable judge reply(ies)" for arm in result.arm_names)]
    if any(result.failed_cells.values()):
        out += ["- failed tasks per arm: " + "; ".join(f"{arm}: {', '.join(_failed_tasks(result, arm)) or 'none'}"
                                                      for arm in result.arm_names)]
    if result.excluded_pairs:
        out += [f"- excluded pairs ({len(result.excluded_pairs)}):"]
        out += [f"  - {e['task']} rep {e['replication']}: {e['reason']}" for e in result.excluded_pairs]
    if result.excluded_tasks:
        out += [f"- tasks without a complete pair: {', '.join(result.excluded_tasks)}"]
    out += ["",
            "Tests are two-sided; the pre-registered direction decides which sign supports the hypothesis, and the "
            "sign is the test's own (Wilcoxon: W+ against W−; t: the t statistic). Supported: the primary test is "
            "significant (Holm) in the stated direction, and the mean difference lies on the same side and reaches "
            "the minimum effect. Not supported: a one-sided bound on the mean that holds its level on skewed "
            "differences (Hall's skewness-corrected t, calibrated on normal and lognormal spreads; the bootstrap CI "
            "shown above is descriptive) excludes the minimum effect, or the test is significant in the other "
            "direction. Inconclusive otherwise, and whenever the arms differ in failed cells or in judge "
            "replies that could not be read (a failure is an outcome of its arm), or fail as many cells on different "
            "tasks and the verdict does not hold with every failed cell scored at the most extreme value seen in the "
            "test, the one that works against it.", ""]
    return "\n".join(out)


def _failed_tasks(result: ABResult, arm: str) -> tuple[str, ...]:
    return tuple(result.failed_tasks.get(arm, ()))


def write_report(result: ABResult, prereg: Preregistration, out_dir: str | Path, *, notes: Sequence[str] = (),
                 arms: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    """Write ab_report.md with its two PNGs into out_dir; returns the Markdown path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plot_paired_differences(result, prereg, out / DIFF_PNG)
    plot_forest(result, prereg, out / FOREST_PNG)
    path = out / REPORT_NAME
    path.write_text(render_markdown(result, prereg, notes=notes, arms=arms), encoding="utf-8")
    return path


AB_BEGIN = "===== A/B SUMMARY ====="


AB_END = "===== END A/B SUMMARY ====="


def format_ab(*, name: str, result: Any, prereg: Any, design: Any, smoke: bool, paths: Any, report: Path, ui: str,
              elapsed_s: float, children: int | None, ui_url: str = "", label: str | None = None,
              note: str | None = None, power_line: str | None = None) -> str:
    """The A/B's greppable block (result: experiments.ab.ABResult, prereg: experiments.stats.Preregistration,
    design: ABDesign, paths: experiments.ab.ABPaths; note: why the test cannot reach alpha, if so; power_line: the
    design power from this A/B's own spread, experiments.ab._design.observed_power_line)."""
    s = result.primary
    pw = getattr(result, "pairwise", None)  # compare=pairwise: the verdict rests on it
    a, b = result.arm_names
    total = len(design.tasks) * design.replications * 2
    failed = sum(1 for e in result.excluded_pairs if "not run" not in e["reason"])
    lines = [AB_BEGIN]
    if label or smoke:
        lines.append(label or SMOKE_LINE)
    lines += [
        f"test: {name}",
        f"arms: A={a} {json.dumps(design.arms[a], sort_keys=True)}  B={b} {json.dumps(design.arms[b], sort_keys=True)}",
        f"hypothesis: {prereg.hypothesis}",
        f"pre-registered: metric={prereg.metric} alpha={prereg.alpha:g} min_effect={prereg.min_effect:g} "
        f"direction={prereg.direction} test={prereg.test} sequential_looks={prereg.sequential}"
        f"{' compare=pairwise' if prereg.compare == 'pairwise' else ''}",
        f"cells: {total} in design; run in this invocation: {result.cells_run}; skipped (already in ledger): "
        f"{result.cells_skipped}",
        (f"primary metric: {s.metric} ({metric_kind(s.metric)}, pre-registered): the statistics, looks and "
         f"verdict below are on {s.metric}" if pw is None else
         f"pointwise metric: {s.metric} ({metric_kind(s.metric)}): its statistics below are shown, not tested; the "
         "verdict rests on the side-by-side preferences (compare=pairwise)"),
        f"pairs: {s.n} tasks with complete pairs; excluded pairs: {len(result.excluded_pairs)} ({failed} with a failed cell)",
        f"{s.metric}: mean {a}: {num(s.mean_a)}  mean {b}: {num(s.mean_b)}  diff (B-A): {num(s.mean_diff, True)}  "
        f"{100 * s.ci.level:.0f}% CI [{num(s.ci.low, True)}, {num(s.ci.high, True)}]",
        f"{s.metric}: Wilcoxon p={pval(s.wilcoxon.pvalue)} ({s.wilcoxon.method})  t p={pval(s.ttest.pvalue)}  "
        f"dz={num(s.dz)}  r_rb={num(s.rank_biserial)}",
    ]
    if pw is not None:
        lines.append(f"compare: pairwise (pre-registered, min_preference={prereg.min_preference:g}): the verdict "
                     f"rests on the side-by-side judgements; the pointwise {s.metric} above is shown, not tested")
        lines += pw.lines(a, b)
    for d in result.looks:
        lines.append(f"{s.metric}: look {d.look}/{d.n_looks} n={d.n} mean diff {num(d.mean, True)}: {d.action} "
                     f"({d.reason})")
    if s.noise is not None:
        lines.append(f"{s.metric}: noise floor (replications): {num(s.noise.floor)}" if math.isfinite(s.noise.floor)
                     else f"{s.metric}: noise floor (replications): n/a (needs ab.replications >= 2)")
    if power_line:
        lines.append(f"{s.metric}{' (pointwise reading, not the test)' if pw is not None else ''}: {power_line}")
    for metric, st in result.secondary.items():
        lines.append(f"secondary {metric}: {num(st.mean_a)} -> {num(st.mean_b)} (diff {num(st.mean_diff, True)}, "
                     f"Holm p={pval(st.p_holm)})")
    for c in getattr(result, "cost", {}).values():  # per task, B - A paired over tasks, arm A as the baseline
        lines.append(f"cost (B-A) {c.line()}")
    if any(result.failed_cells.values()):
        lines.append("failed cells: " + "; ".join(
            f"{arm} {result.failed_cells.get(arm, 0)} ({', '.join(_failed_tasks(result, arm)) or 'none'})"
            for arm in result.arm_names))
    if note:
        lines.append(f"note: {note}")
    lines += [
        f"VERDICT: {result.verdict} -- {result.verdict_reason}",
        f"report: {report}",
        f"plots: {report.parent / 'ab_paired_diff.png'} {report.parent / 'ab_forest.png'}",
        f"ledger: {paths.ledger}",
        f"pre-registration: {paths.prereg}",
        f"MLflow child runs (cells): {children if children is not None else 'n/a'}",
        f"elapsed: {hms(elapsed_s)}",
        f"MLflow UI: {ui}" + (f"  then open {ui_url}" if ui_url else ""),
        AB_END,
    ]
    return "\n".join(lines)
