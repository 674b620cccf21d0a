"""Text for people: the greppable end-of-run blocks of the sweep, the A/B test and the calibration, and the number
formats they share (3 decimals, "n/a" for a missing or non-finite number, H:MM:SS)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from experiments.config import ExperimentConfig
from experiments.power import MAX_TASKS
from experiments.promotion import HoldoutRow, SplitScores
from experiments.stats import Comparison, NoiseFloor, variance_ratio
from experiments.textdiff import instruction_diff

SMOKE_LINE = "SMOKE RUN (embedded model): not research quality"
SUMMARY_BEGIN = "===== SWEEP SUMMARY ====="
SUMMARY_END = "===== END SWEEP SUMMARY ====="
AB_BEGIN = "===== A/B SUMMARY ====="
AB_END = "===== END A/B SUMMARY ====="
CALIBRATION_BEGIN, CALIBRATION_END = "===== CALIBRATION =====", "===== END CALIBRATION ====="


# -- numbers ---------------------------------------------------------------------------------------------------------


def num(x: Any, signed: bool = False, fmt: str = ".3f") -> str:
    """A number with `fmt` (a sign in front when signed), "n/a" for None, a non-number or a non-finite value."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "n/a"
    if not math.isfinite(v):
        return "n/a"
    return format(v, ("+" if signed else "") + fmt)


def ci_text(ci: tuple[float, float] | None, signed: bool = False) -> str:
    return f"[{num(ci[0], signed)}, {num(ci[1], signed)}]" if ci else "[CI n/a]"


def pval(p: Any) -> str:
    v = num(p, fmt=".4f")
    return "<0.0001" if v != "n/a" and float(p) < 1e-4 else v


def hms(seconds: float) -> str:
    s = int(max(seconds, 0))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def identity_text(identity: Mapping[str, Any]) -> str:
    """'producer backend/model, evaluator backend/model' from a backend identity."""
    def one(role: str) -> str:
        i = identity.get(role) or {}
        return f"{i.get('backend', '?')}/{i.get('model', '?')}"

    roles = [r for r in ("producer", "evaluator") if r in identity]
    return ", ".join(f"{r} {one(r)}" for r in roles) or "?"


# -- the sweep -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepSummary:
    sweep: str
    storage: str
    stop_reason: str
    trials: dict[str, int]
    new_trials: int
    baseline_train: float | None
    noise: NoiseFloor
    train_floor: float
    best_trial: int | None
    best_operator: str | None
    best_value: float | None
    best_comparison: Comparison | None
    holdout: tuple[HoldoutRow, ...]
    baseline_holdout: float | None
    promoted_trial: int | None
    promoted_hash: str
    promoted: bool
    best_instructions: dict[str, str]
    baseline_instructions: dict[str, str]
    llm_calls: int
    llm_calls_prepare: int
    calls_per_trial: float | None
    contexts: dict[str, int]
    smoke: bool
    paths: dict[str, str]
    mlflow_ui: str
    elapsed_s: float
    controls: dict[str, bool] = field(default_factory=dict)
    best_scores: tuple[SplitScores, ...] = ()
    mlflow_url: str = ""
    promoted_instructions: dict[str, str] = field(default_factory=dict)
    failed_out: bool = False  # stopped because too many trials failed: the CLI exits non-zero
    unconcluded: tuple[str, ...] = ()  # steps after the search that did not conclude (a failed race or holdout run)
    selection_bias: float | None = None  # mean over evaluated trials of (wiggum best - independent re-score)
    rescored: bool = False  # trial values are independent re-scores (a sampled judgement of each kept text)
    judge_failures: int = 0  # judge replies that could not be read, summed over the trials (user attr judge_failures)
    underpowered: str | None = None  # why this design cannot promote (run anyway: sweep.allow_underpowered)
    label: str | None = None  # experiments.calibration_store.run_label: the embedded model file, smoke or calibrated
    noise_source: str = ""  # where sigma came from: a stored calibration, or this study's baseline repeats
    registry: str = ""  # the Prompt Registry after promotion, or what was not registered and why (one line)
    best_runs: int = 1  # train runs behind best_value (2 when the final race re-ran it)
    train_candidates: int = 1  # candidates the best was chosen from (the train line is a filter over them)
    holdout_look: str = ""  # experiments.holdout_looks.Look.line: this conclusion's share of the study's alpha
    confirmable: str = ""  # what effect this design could have confirmed (experiments.power.design_power_line)


def format_sweep(s: SweepSummary) -> str:
    """The greppable end-of-sweep block."""
    lines = [SUMMARY_BEGIN]
    if s.label or s.smoke:
        lines.append(s.label or SMOKE_LINE)
    if s.underpowered:
        lines.append(f"UNDERPOWERED (sweep.allow_underpowered=true): nothing can be promoted; {s.underpowered}")
    t = s.trials
    lines += [
        f"sweep: {s.sweep}  storage: {s.storage}",
        f"stopped: {s.stop_reason}",
        f"trials: {t.get('total', 0)} total ({t.get('complete', 0)} complete, {t.get('pruned', 0)} pruned, "
        f"{t.get('failed', 0)} failed, {t.get('duplicate', 0)} duplicate"
        + (f"; {t['gated']} of the pruned gated out" if t.get("gated") else "") + f"), {s.new_trials} new in this run",
        f"baseline train mean: {num(s.baseline_train)}",
        f"noise floor (train): {s.train_floor:.3f}  [sigma {s.noise.sigma:.3f} over {s.noise.repeats} "
        f"{'calibration' if s.noise_source.startswith('calibration') else 'baseline'} runs, "
        f"{s.noise.n_tasks} tasks; range of run means {s.noise.range_of_means:.3f}]",
    ]
    if s.noise_source:
        lines.append(f"noise source: {s.noise_source}")
    if s.best_trial is not None:
        lines.append(f"best trial: #{s.best_trial} ({s.best_operator}) train mean {num(s.best_value)}"
                     + (f" (mean of {s.best_runs} runs: the final race)" if s.best_runs > 1 else ""))
        if s.best_comparison is not None:
            lines.append(f"best vs baseline (train filter): {s.best_comparison.filter_reason(s.train_candidates)}")
    else:
        lines.append("best trial: none beyond the baseline")
    if s.best_scores:
        lines.append(f"best trial #{s.best_trial} scores vs baseline (mean [95% bootstrap CI over tasks]):")
        for sc in s.best_scores:
            if sc.n == 0:
                lines.append(f"  {sc.split:<8} {sc.note}")
                continue
            lines.append(f"  {sc.split:<8} n={sc.n}: best {num(sc.mean)} {ci_text(sc.ci)}  baseline {num(sc.baseline_mean)} "
                         f"{ci_text(sc.baseline_ci)}  diff {num(sc.diff, signed=True)} {ci_text(sc.diff_ci, signed=True)}")
    lines.append(f"holdout baseline mean: {num(s.baseline_holdout)}")
    for row in s.holdout:
        lines.append(
            f"holdout trial #{row.trial} ({row.operator}, {row.hash}): train {num(row.train_mean)} holdout "
            f"{num(row.holdout_mean)} diff {num(row.holdout_diff, signed=True)}{holdout_test_text(row)} "
            f"{('HOLDS ON THESE TASKS' if row.fixed_task else 'WINS') if row.wins else 'does not win'}"
            + (f" error: {row.error}" if row.error else "")
        )
        if row.cost is not None and (row.held_by_cost or "off" not in row.cost.reason):
            lines.append(f"  cost guard: {row.cost.reason}" + (" (HELD BACK BY COST: the quality claim stands, "
                                                               "the candidate is not promoted)" if row.held_by_cost else ""))
    lines += cost_block(s.holdout, s.promoted_trial)
    if s.holdout_look:
        lines.append(s.holdout_look)
    if any(r.fixed_task for r in s.holdout):
        lines.append("holdout rule is a fixed-task statement (sweep.holdout_test=bound|floor): it says whether these "
                     "holdout tasks as they are scored above run noise, not whether tasks like them gain; it promotes "
                     "nothing (sweep.holdout_test=tasks does)")
    if s.confirmable:
        lines.append(s.confirmable)
    if s.promoted:
        lines.append(f"PROMOTED: trial #{s.promoted_trial} (hash {s.promoted_hash})")
    else:
        lines.append(f"PROMOTED: baseline (no change kept; hash {s.promoted_hash})")
    if s.registry:
        lines.append(f"registry: {s.registry}")
    lines.append(f"LLM calls: {s.llm_calls} uncached in this run ({s.llm_calls_prepare} for contexts); "
                 f"per search trial: {num(s.calls_per_trial)}; contexts {s.contexts.get('hits', 0)} reused, "
                 f"{s.contexts.get('computed', 0)} computed")
    if s.contexts.get("prepare_calls_train") is not None:
        lines.append(f"context reuse: saves {s.contexts['prepare_calls_train']} planning/research LLM calls per trial "
                     f"(counted when the train contexts were prepared)")
    lines.append(f"controls: reuse_context={s.controls.get('reuse_context')} memory_frozen={s.controls.get('memory_frozen')}")
    if s.selection_bias is not None and s.rescored:
        lines.append(f"selection bias (wiggum best round - trial value), mean over trials: "
                     f"{num(s.selection_bias, signed=True)}; trial values are independent re-scores of each kept text "
                     f"(a judge sample apart from the one that chose the round)")
    elif s.selection_bias is not None:
        lines.append("selection bias (wiggum best round - trial value): not measured (evaluator.rescore=false): trial "
                     "values are the loop's own best-round scores, flattered by the choice of that round")
    lines.append(f"judge failures: {s.judge_failures} judge replies could not be read over the trials (a task whose "
                 f"judged score stayed missing failed its trial)")
    lines.append(f"elapsed: {hms(s.elapsed_s)}")
    lines.append("best instruction:")
    for tt, text in sorted(s.best_instructions.items()):
        lines.append(f"  [{tt}] {text}")
    diff = instruction_diff(s.baseline_instructions, s.best_instructions)
    lines.append("diff vs baseline:" + ("\n" + diff if diff else " (identical)"))
    if s.promoted and s.promoted_trial != s.best_trial and s.promoted_instructions:
        lines.append(f"promoted instruction (trial #{s.promoted_trial}, best on the holdout among the winners):")
        for tt, text in sorted(s.promoted_instructions.items()):
            lines.append(f"  [{tt}] {text}")
        diff = instruction_diff(s.baseline_instructions, s.promoted_instructions)
        lines.append("promoted diff vs baseline:" + ("\n" + diff if diff else " (identical)"))
    for name, path in s.paths.items():
        lines.append(f"{name}: {path}")
    lines.append(f"MLflow UI: {s.mlflow_ui}")
    if s.mlflow_url:
        lines.append(f"MLflow runs: {s.mlflow_url}")
    lines.append(SUMMARY_END)
    return "\n".join(lines)


def holdout_test_text(row: HoldoutRow) -> str:
    """What the holdout test saw: runs (candidate/baseline), SE, and the p against its Holm level or the floor."""
    if row.holdout_se is None and row.holdout_p is None:
        if row.holdout_rule == "tasks" or (row.holdout_n and row.holdout_n < 2):
            return f" [runs {row.runs[0]}/{row.runs[1]}, {row.holdout_n} holdout task(s): nothing measured]"
        return ""
    se = f", se {num(row.holdout_se)}" if row.holdout_se is not None else ", se not measured"
    text = f" [runs {row.runs[0]}/{row.runs[1]}{se}"
    if row.holdout_rule == "tasks" or (not row.holdout_rule and row.holdout_df is not None
                                       and row.holdout_df == row.holdout_n - 1):
        text = f" [over {row.holdout_n} tasks (paired t, {row.holdout_df} df), runs {row.runs[0]}/{row.runs[1]}{se}"
    if row.holdout_level is None:  # not in the family: the train comparison did not claim
        return text + f", p {pval(row.holdout_p)}; not tested: did not pass the train filter]"
    if row.holdout_rule == "floor":
        return text + f", floor {num(row.holdout_level)}; fixed-task statement]"
    fixed = "; fixed-task statement" if row.fixed_task else ""
    return text + f", one-sided p {pval(row.holdout_p)} vs Holm level {num(row.holdout_level, fmt='.4f')}{fixed}]"


def synth_yaml(exp: ExperimentConfig, instructions: Mapping[str, str], s: SweepSummary) -> str:
    """The promoted instructions as a conf/synth/<name>.yaml file (copy it there to use it)."""
    from omegaconf import OmegaConf

    node = {
        "variant": f"{s.sweep}-{s.promoted_hash}" if s.promoted else exp.synth.variant,
        "temperature": exp.synth.temperature,
        "max_tokens": exp.synth.max_tokens,
        "count_retry": exp.synth.count_retry,
        "instructions": {**exp.synth.instructions, **dict(instructions)},
    }
    head = (f"# Promoted by sweep {s.sweep}: trial #{s.promoted_trial}\n" if s.promoted
            else f"# Sweep {s.sweep}: no candidate cleared the noise floor and the holdout; the baseline is kept\n")
    return head + OmegaConf.to_yaml(OmegaConf.create(node))


# -- the A/B test ------------------------------------------------------------------------------------------------


def format_ab(*, name: str, result: Any, prereg: Any, design: Any, smoke: bool, paths: Any, report: Path, ui: str,
              elapsed_s: float, children: int | None, ui_url: str = "", label: str | None = None,
              note: str | None = None) -> str:
    """The A/B's greppable block (result: experiments.ab.ABResult, prereg: experiments.verdict.Preregistration,
    design: ABDesign, paths: experiments.ab_design.ABPaths; note: why the test cannot reach alpha, if so)."""
    from experiments.ab import metric_kind

    s = result.primary
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
        f"direction={prereg.direction} test={prereg.test} sequential_looks={prereg.sequential}",
        f"cells: {total} in design; run in this invocation: {result.cells_run}; skipped (already in ledger): "
        f"{result.cells_skipped}",
        f"primary metric: {s.metric} ({metric_kind(s.metric)}, pre-registered): the statistics, looks and "
        f"verdict below are on {s.metric}",
        f"pairs: {s.n} tasks with complete pairs; excluded pairs: {len(result.excluded_pairs)} ({failed} with a failed cell)",
        f"{s.metric}: mean {a}: {num(s.mean_a)}  mean {b}: {num(s.mean_b)}  diff (B-A): {num(s.mean_diff, True)}  "
        f"{100 * s.ci.level:.0f}% CI [{num(s.ci.low, True)}, {num(s.ci.high, True)}]",
        f"{s.metric}: Wilcoxon p={pval(s.wilcoxon.pvalue)} ({s.wilcoxon.method})  t p={pval(s.ttest.pvalue)}  "
        f"dz={num(s.dz)}  r_rb={num(s.rank_biserial)}",
    ]
    for d in result.looks:
        lines.append(f"{s.metric}: look {d.look}/{d.n_looks} n={d.n} mean diff {num(d.mean, True)}: {d.action} "
                     f"({d.reason})")
    if s.noise is not None:
        lines.append(f"{s.metric}: noise floor (replications): {num(s.noise.floor)}" if math.isfinite(s.noise.floor)
                     else f"{s.metric}: noise floor (replications): n/a (needs ab.replications >= 2)")
    for metric, st in result.secondary.items():
        lines.append(f"secondary {metric}: {num(st.mean_a)} -> {num(st.mean_b)} (diff {num(st.mean_diff, True)}, "
                     f"Holm p={pval(st.p_holm)})")
    for c in getattr(result, "cost", {}).values():  # per task, B - A paired over tasks, arm A as the baseline
        lines.append(f"cost (B-A) {c.line()}")
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


# -- the calibration ---------------------------------------------------------------------------------------------


def spread_line(het: Mapping[str, float], mdes: Mapping[str, Mapping[str, Any]], needed: Mapping[str, Any],
                power: float) -> str:
    """The positive control's spread across tasks and what it does to the designs (experiments.power)."""
    head = (f"effect spread (positive control, {het['n']} tasks, a rough estimate): per-task differences sd "
            f"{het['sd']:.3f} where the runs' noise alone gives {het['noise_sd']:.3f}: tau {het['tau']:.3f}, "
            f"{het['effect_cv']:.2f}x its mean effect" + (
                f"; a control this size and spread is detected on {het['n']} tasks with probability "
                f"{het['control_power']:.2f}" if "control_power" in het else ""))
    parts = []
    for name, key, what in (("sweep_spread", "sweep_train_tasks_spread", "train tasks"), ("ab_spread", "ab_tasks_spread",
                                                                                         "tasks")):
        m = mdes.get(name)
        if not m:
            continue
        label = "sweep" if name.startswith("sweep") else "A/B"
        size = (f"MDE {m['mde']:.3f}" if math.isfinite(m["mde"])
                else f"no effect size reaches power {power:g} on {m['n']} {what}")
        n = needed.get(key)
        parts.append(f"{label} {size}, target needs {n if n is not None else f'more than {MAX_TASKS}'} {what}")
    if not parts:
        return head
    return head + "; for an effect that varies as much: " + "; ".join(parts)


def _share_note(cal: Any, share: float) -> str:
    """Why a judge share above 100% is printed at all: the generator SD contains the judge's, so above 100% is
    either the two estimates' own noise (few degrees of freedom) or a judge that scores a text alone differently
    from inside a run; the one-sided F test says which the data support."""
    if not share > 1:
        return ""
    d = cal.design
    df_judge, df_gen = d["tasks"] * (d["judge_repeats"] - 1), cal.n_tasks * (cal.repeats - 1)
    f, p = variance_ratio(cal.judge_sigma, df_judge, cal.sigma, df_gen)
    if not math.isfinite(p):
        return ""
    test = f"F {f:.2f} on {df_judge} and {df_gen} df, p {p:.3g}"
    if p >= d["alpha"]:
        return f" (above 100% within the two estimates' noise: {test})"
    return (f" (above 100% beyond the two estimates' noise: {test}: the judge scores an output alone differently "
            f"from inside a run; compare evaluator settings of runs and re-scores)")


def format_calibration(cal: Any, *, smoke_line: str = "", plots: Mapping[str, Path] | None = None,
                       mlflow_ui: str = "") -> str:
    """The short greppable block."""
    d = cal.design
    lines = [CALIBRATION_BEGIN]
    if smoke_line:
        lines.append(smoke_line)
    dims = lambda m: "; ".join(f"{k} {v:.3f}" for k, v in sorted(m.items()))  # noqa: E731
    share = (cal.judge_sigma ** 2 / cal.sigma ** 2) if cal.sigma > 0 else float("nan")
    lines += [
        f"fingerprint {cal.key}: models {identity_text(cal.fingerprint.get('backend', {}))}; evaluator composite "
        f"{cal.fingerprint.get('evaluator', {}).get('composite', '?')}; benchmark {d['benchmark']} "
        f"({len(cal.fingerprint.get('benchmark', {}).get('ids', []))} tasks)",
        f"design: {d['tasks']} task(s) ({', '.join(cal.tasks)}), generator runs r={d['generator_repeats']}, judge "
        f"re-scores k={d['judge_repeats']}, control replications {d['replications']}, test {d['test']}, alpha "
        f"{d['alpha']:g}, power {d['power']:g}",
        f"judge variance (each output re-scored {d['judge_repeats']}x): composite sd {cal.judge_sigma:.3f}"
        + (f"; {dims(cal.judge_dimensions)}" if cal.judge_dimensions else ""),
        f"generator variance ({cal.repeats} seeds): composite sd {cal.sigma:.3f} [95% CI {num(cal.sigma_ci[0])}-"
        f"{num(cal.sigma_ci[1])}, {cal.n_tasks * (cal.repeats - 1)} df]; judge share of the variance "
        f"{num(100 * share, fmt='.0f')}%" + _share_note(cal, share)
        + (f"; {dims(cal.generator_dimensions)}" if cal.generator_dimensions else ""),
        cal.aa.line(d["alpha"]),
        cal.control.line(d["alpha"]),
        cal.judge_control.line(d["alpha"]) if cal.judge_control is not None
        else "judge on the positive control: no rubric ran (evaluator.composite=deterministic)",
    ]
    sw, ab = cal.mde.get("sweep"), cal.mde.get("ab")
    floor = f"; a sweep on {sw['n']} train tasks (one baseline run) has floor {sw['floor']:.3f}" if sw else ""
    lines.append(f"noise floor: sigma {cal.sigma:.3f} per task run{floor}")
    parts = []
    lo, hi = (cal.sigma_ci[0] / cal.sigma, cal.sigma_ci[1] / cal.sigma) if cal.sigma > 0 else (float("nan"),) * 2
    if sw:  # the MDE scales with sigma: its range over sigma's CI shows what one calibration's estimate is worth
        parts.append(f"sweep {num(sw['mde'])} [{num(sw['mde'] * lo)}-{num(sw['mde'] * hi)} over sigma's CI] "
                     f"({sw['n']} train tasks, one-sided wilcoxon and > floor)")
    if ab:
        parts.append(f"A/B {num(ab['mde'])} ({ab['n']} tasks x {cal.needed.get('ab_replications_now')} "
                     f"replications, two-sided {ab['test']})")
    lines.append(f"minimum detectable effect (alpha {d['alpha']:g}, power {d['power']:g}; simulated): "
                 + ("; ".join(parts) or "n/a"))
    nd = cal.needed

    def count(v: Any, what: str) -> str:
        return f"{v} {what}" if v is not None else f"more than {MAX_TASKS} {what}"

    need = []
    if sw:
        need.append(f"sweep needs {count(nd.get('sweep_train_tasks'), 'train tasks')} (has {sw['n']})")
    if ab:
        reps = nd.get("ab_replications")
        need.append(f"A/B needs {count(nd.get('ab_tasks'), 'tasks')} at {nd.get('ab_replications_now')} replications,"
                    f" or {reps if reps is not None else 'no number of'} replications on {ab['n']} tasks")
    lines.append(f"target effect {nd['target_effect']:g}: " + "; ".join(need))
    het = getattr(cal, "heterogeneity", None)
    if het:
        lines.append(spread_line(het, cal.mde, nd, d["power"]))
    co = cal.cost
    lines.append(f"cost per task run (median of {co.runs}): {co.llm_calls:g} LLM calls ({co.uncached_calls:g} "
                 f"uncached), {co.tokens:.0f} tokens, {co.wall_s:.1f}s; context preparation {co.prepare_calls:.1f} "
                 f"calls, {co.prepare_s:.1f}s; re-score {co.rescore_s:.1f}s")
    use = ("a sweep or A/B on this fingerprint uses this noise floor" if cal.passed
           else f"{cal.stop_reason}; it measures its own noise floor")
    lines.append(f"stored: {cal.path} ({use})")
    if plots:
        lines.append(f"plots: {', '.join(str(p) for p in plots.values())}")
    if mlflow_ui:
        lines.append(f"MLflow UI: {mlflow_ui}")
    lines.append(f"elapsed: {hms(cal.elapsed_s)}")
    lines.append(CALIBRATION_END)
    return "\n".join(lines)


def cost_block(rows: Sequence[Any], promoted_trial: int | None) -> list[str]:
    """The promoted candidate's (else the first holdout row's) holdout cost against the baseline, every metric
    paired over tasks (experiments.cost.CostDiff.line): 'cost vs baseline (holdout, 8 tasks):' and one line each."""
    row = next((r for r in rows if r.trial == promoted_trial and r.cost_diffs), None) if promoted_trial is not None \
        else None
    row = row or next((r for r in rows if r.cost_diffs), None)
    if row is None:
        return []
    n = max((d.n for d in row.cost_diffs.values()), default=0)
    if n == 0:
        return [f"cost vs baseline (holdout, trial #{row.trial}): not measured (holdout runs stored without cost)"]
    return ([f"cost vs baseline (holdout, trial #{row.trial}, {n} tasks; candidate - baseline per task, 95% t "
             f"interval over tasks):"] + [f"  {d.line()}" for d in row.cost_diffs.values()])
