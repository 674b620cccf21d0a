"""The calibration's summary: the controls, the spread across tasks and what the designs need."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from experiments.report import hms, identity_text, num
from experiments.stats import MAX_TASKS, variance_ratio

CALIBRATION_BEGIN, CALIBRATION_END = "===== CALIBRATION =====", "===== END CALIBRATION ====="


def spread_line(het: Mapping[str, float], mdes: Mapping[str, Mapping[str, Any]], needed: Mapping[str, Any],
                power: float) -> str:
    """The positive control's spread across tasks and what it does to the designs (experiments.stats)."""
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


def pairwise_line(pw: Mapping[str, Any]) -> str:
    """What calibrate.pairwise measured: position bias, the A/A's and the control's mean preference and g; the
    judge replies it could not read, how many and one as written; NOT MEASURED where no g could be had."""
    head = f"pairwise (both orders, {pw['n']} pairs, {pw['calls']} judge calls): "
    failures, reply = int(pw.get("judge_failures") or 0), str(pw.get("unreadable_reply") or "")
    shown = (f"; an unreadable reply: {' '.join(reply.split())[:120]!r} (no verdict A, B or tie could be read "
             f"from it)" if reply else "")
    if pw.get("not_measured"):
        return f"{head}NOT MEASURED: judge failed: {pw['not_measured']}{shown}; g not measured"
    judged = lambda key: sum(p is not None for p in pw.get(key) or [])  # noqa: E731
    missing = (f"; judge failures: {failures} unreadable repl{'y' if failures == 1 else 'ies'} ({judged('aa_preferences')}"
               f" of {pw['n']} A/A and {judged('control_preferences')} of {pw['n']} control pairs judged in both "
               f"orders; a pair not judged is missing, never a tie){shown}" if failures else "")
    rate = pw.get("position_bias")
    return (f"{head}position bias: the answer shown first won {pw['first_wins']} of {pw['decided']} decided verdicts"
            + (f" ({rate:.0%}; 50% is none)" if rate is not None else "")
            + f"; A/A preference {num(pw.get('aa_mean'), fmt='+.2f')}, control "
            f"{num(pw.get('control_mean'), fmt='+.2f')}; g {num(pw.get('g'), fmt='.2f')} (pairwise error / "
            f"pointwise on the same pairs; < 0.8 pays){missing}")


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
                       mlflow_ui: str = "", replaced: str = "") -> str:
    """The short greppable block; `replaced`: what the calibration stored before on this fingerprint measured and
    where it is kept (Calibration.write)."""
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
    dec = getattr(cal, "decomposition", None)
    if dec:  # where the spread comes from, and what it says about the levers
        from ._decompose import decomposition_line, lever_lines

        for name in ("sampled", "greedy"):
            if name in dec:
                lines.append(decomposition_line(name, dec[name]))
        pw = getattr(cal, "pairwise", None)
        if pw:
            lines.append(pairwise_line(pw))
        if dec.get("levers"):
            lines.append(lever_lines([(x["lever"], x["pays"], x["why"]) for x in dec["levers"]],
                                     dec.get("levers_from", "sampled")))
    edits = getattr(cal, "edits", None)
    if edits:  # calibrate.edits: the spread of edits the mutators proposed
        from ._edits import edits_line

        lines.append(edits_line(edits))
    co = cal.cost
    lines.append(f"cost per task run (median of {co.runs}): {co.llm_calls:g} LLM calls ({co.uncached_calls:g} "
                 f"uncached), {co.tokens:.0f} tokens, {co.wall_s:.1f}s; context preparation {co.prepare_calls:.1f} "
                 f"calls, {co.prepare_s:.1f}s; re-score {co.rescore_s:.1f}s")
    use = ("a sweep or A/B on this fingerprint uses this noise floor" if cal.passed
           else f"{cal.stop_reason}; it measures its own noise floor")
    if cal.passed and cal.pairwise_failure:
        use += "; g NOT MEASURED: the side-by-side judge failed (see pairwise above)"
    lines.append(f"stored: {cal.path} ({use})")
    if replaced:
        lines.append(replaced)
    if plots:
        lines.append(f"plots: {', '.join(str(p) for p in plots.values())}")
    if mlflow_ui:
        lines.append(f"MLflow UI: {mlflow_ui}")
    lines.append(f"elapsed: {hms(cal.elapsed_s)}")
    lines.append(CALIBRATION_END)
    return "\n".join(lines)
