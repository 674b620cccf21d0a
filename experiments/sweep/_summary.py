"""Text for people: the greppable end-of-run blocks of the sweep, the A/B test and the calibration, and the number
formats they share (3 decimals, "n/a" for a missing or non-finite number, H:MM:SS)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from experiments.config import ExperimentConfig
from experiments.promotion import GENERATED, OWN, HoldoutRow, SplitScores
from experiments.report import SMOKE_LINE, ci_text, hms, num, pval
from experiments.stats import Comparison, NoiseFloor, holdout_tasks_for_harm
from experiments.tracking import instruction_diff


SUMMARY_BEGIN = "===== SWEEP SUMMARY ====="
SUMMARY_END = "===== END SWEEP SUMMARY ====="


# -- numbers ---------------------------------------------------------------------------------------------------------


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
    label: str | None = None  # experiments.storage.run_label: the embedded model file, smoke or calibrated
    noise_source: str = ""  # where sigma came from: a stored calibration, or this study's baseline repeats
    registry: str = ""  # the Prompt Registry after promotion, or what was not registered and why (one line)
    best_runs: int = 1  # train runs behind best_value (2 when the final race re-ran it)
    train_candidates: int = 1  # candidates the best was chosen from (the train line is a filter over them)
    holdout_look: str = ""  # experiments.stats.Look.line: this conclusion's share of the study's alpha
    confirmable: str = ""  # what effect this design could have confirmed (experiments.stats.design_power_line)
    train_filter: str = "wilcoxon"  # sweep.train_filter: which top-k candidates the holdout tests
    pairwise: tuple[str, ...] = ()  # sweep.holdout_compare=pairwise: a line per candidate on its judged pairs


def noise_line(s: SweepSummary) -> str:
    """The train noise floor and what it rests on; an unmeasured one (fewer than 2 runs of one text) says so
    instead of printing 0 (a floor of 0 would read as "no noise")."""
    runs = "calibration" if s.noise_source.startswith("calibration") else "baseline"
    if s.noise.repeats < 2:
        return (f"noise floor (train): not measured ({s.noise.repeats} {runs} run; two runs of one text measure it: "
                "sweep.baseline_repeats >= 2 or a stored calibration)")
    return (f"noise floor (train): {s.train_floor:.3f}  [sigma {s.noise.sigma:.3f} over {s.noise.repeats} {runs} runs, "
            f"{s.noise.n_tasks} tasks; range of run means {s.noise.range_of_means:.3f}]")


def gated_words(t: dict) -> str:
    """"; g of the pruned gated out" (the minibatch gate), "... raced out" (the race) or both."""
    gated, raced = t.get("gated", 0), min(t.get("raced", 0), t.get("gated", 0))
    if not gated:
        return ""
    if not raced or raced == gated:
        return f"; {gated} of the pruned {'raced' if raced else 'gated'} out"
    return f"; {gated - raced} of the pruned gated out, {raced} raced out"


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
        + gated_words(t) + f"), {s.new_trials} new in this run",
        f"baseline train mean: {num(s.baseline_train)}",
        noise_line(s),
    ]
    if s.noise_source:
        lines.append(f"noise source: {s.noise_source}")
    if s.best_trial is not None:
        lines.append(f"best trial: #{s.best_trial} ({s.best_operator}) train mean {num(s.best_value)}"
                     + (f" (mean of {s.best_runs} runs: the final race)" if s.best_runs > 1 else ""))
        if s.best_comparison is not None:
            lines.append(f"best vs baseline (train filter): {train_filter_text(s)}")
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
            f"{num(row.holdout_mean)} diff {num(row.holdout_diff, signed=True)}{worst_text(row)}"
            f"{holdout_test_text(row)} "
            f"{('HOLDS ON THESE TASKS' if row.fixed_task else 'WINS') if row.wins else 'does not win'}"
            + (f" error: {row.error}" if row.error else "")
        )
        lines += [f"  {ln}" for ln in row_notes(row)]
    lines += [*s.pairwise, *cost_block(s.holdout, s.promoted_trial)]
    if s.holdout_look:
        lines.append(s.holdout_look)
    if any(r.fixed_task for r in s.holdout):
        lines.append("holdout rule is a fixed-task statement (sweep.holdout_test=bound|floor): it says whether these "
                     "holdout tasks as they are scored above run noise, not whether tasks like them gain; it promotes "
                     "nothing (sweep.holdout_test=tasks does)")
    if s.confirmable:
        lines.append(s.confirmable)
    if s.unconcluded or s.failed_out:  # what is printed below is not this sweep's answer yet
        lines.append(f"NOT CONCLUDED: {'; '.join(s.unconcluded)[:300] or s.stop_reason}: the same command resumes")
    if s.promoted:
        row = promoted_row(s)
        held = (f"; task types held back (baseline text kept): {', '.join(sorted(row.held_types))}"
                if row is not None and row.held_types else "")
        standing = " (the study's standing winner from an earlier look)" if row is not None and row.standing else ""
        lines.append(f"PROMOTED: trial #{s.promoted_trial} (hash {s.promoted_hash}){standing}{held}")
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


def train_filter_text(s: SweepSummary) -> str:
    """The train filter's line for the best candidate: the Wilcoxon filter's reason (sweep.train_filter=wilcoxon),
    else which filter ran, whether the best passes it, and that the holdout alone confirms."""
    cmp = s.best_comparison
    if s.train_filter == "wilcoxon":
        return cmp.filter_reason(s.train_candidates)
    chose = (f"the best of {s.train_candidates} candidates" if s.train_candidates > 1 else "one candidate")
    if s.train_filter == "positive":
        ok = bool(cmp.n) and cmp.diff > 0
        return (f"positive (sweep.train_filter=positive): {'passes' if ok else 'does not pass'}: train mean "
                f"{cmp.diff:+.3f} {'above' if ok else 'not above'} the baseline's over {cmp.n} tasks ({chose}; the "
                f"holdout alone confirms; Wilcoxon p {cmp.p_value:.4f}, not used)")
    return (f"none (sweep.train_filter=none): every top-k candidate is tested on the holdout, which alone confirms "
            f"(train mean difference {cmp.diff:+.3f} over {cmp.n} tasks, {chose})")


def promoted_row(s: SweepSummary) -> HoldoutRow | None:
    """The holdout row the promotion rests on (a standing winner's row when it was carried forward)."""
    rows = [r for r in s.holdout if r.trial == s.promoted_trial and r.promotes]
    return rows[-1] if rows else None


def worst_text(row: HoldoutRow) -> str:
    """The worst holdout task's difference, printed beside the mean (the mean hides a wrecked task)."""
    if row.worst_diff is None:
        return ""
    return f" (worst task {row.worst_task} {num(row.worst_diff, signed=True)})"


def row_notes(row: HoldoutRow) -> list[str]:
    """The guard and per-type lines under a holdout row: cost guard, worst-task guard, task types held back, and
    what a standing winner rests on."""
    out = []
    if row.cost is not None and (row.held_by_cost or "off" not in row.cost.reason):
        out.append(f"cost guard: {row.cost.reason}" + (" (HELD BACK BY COST: the quality claim stands, the candidate "
                                                       "is not promoted)" if row.held_by_cost else ""))
    if row.max_task_loss is not None and row.worst_diff is not None and row.wins:
        if row.held_by_task_loss:
            out.append(f"task-loss guard: worst holdout task {row.worst_task} {num(row.worst_diff, signed=True)} "
                       f"< -{row.max_task_loss:g} (sweep.max_task_loss) (HELD BACK BY A TASK LOSS: the quality claim "
                       f"stands, the candidate is not promoted)")
        else:
            out.append(f"task-loss guard: passes: worst holdout task {num(row.worst_diff, signed=True)} >= "
                       f"-{row.max_task_loss:g} (sweep.max_task_loss)")
    if row.wins and row.held_types:
        for tt, why in sorted(row.held_types.items()):
            out.append(f"task type {tt} HELD BACK (its alias does not move, its baseline text is kept): {why}")
        if not row.promotes and not (row.held_by_cost or row.held_by_task_loss):
            out.append("every task type it changed is held back: nothing is promoted")
    unseen = unseen_harm_text(row)
    if unseen:
        out.append(unseen)
    rests = rests_on_text(row)
    if rests:
        out.append(rests)
    if row.standing:
        out.append(row.standing)
    return out


HARM_SHARES = (4, 8)  # "1 task in k" harms the summary prices


def unseen_harm_text(row: HoldoutRow) -> str:
    """Under a confirmation over tasks: what its n holdout tasks cannot see, a harm to 1 task in k that none of them
    drew (probability ((k-1)/k)^n; then every sampled task gains and any test confirms), and the holdout size that
    bounds that chance by the level the row had to reach (experiments.stats.holdout_tasks_for_harm)."""
    if not (row.wins and row.holdout_rule == "tasks" and row.holdout_level and row.holdout_n >= 2):
        return ""
    n, lv = row.holdout_n, row.holdout_level
    parts = [f"1 in {k}: missed by all {n} with p {((k - 1) / k) ** n:.3f}, {holdout_tasks_for_harm(k, lv)} holdout "
             f"tasks bound it by {lv:.4g}" for k in HARM_SHARES]
    return ("unseen harm: a loss on 1 task in k that none of these holdout tasks drew is confirmed by any test: "
            + "; ".join(parts))


def rests_on_text(row: HoldoutRow) -> str:
    """Under a confirmation over tasks whose holdout holds generated tasks: what it rests on, the generated tasks and
    the user's own (imported or hand-written) apart, each with its mean difference. Descriptive: the one test is the
    row's, over all its tasks; a benchmark of the user's own tasks alone says nothing here."""
    if not (row.wins and row.holdout_rule == "tasks" and GENERATED in row.source_diffs):
        return ""
    gen, own = row.source_diffs[GENERATED], row.source_diffs.get(OWN)
    if own is None:
        return (f"rests on: confirmed on {gen.n} generated tasks (none of your own; mean diff {gen.mean:+.3f}): tasks "
                f"a model wrote may favour that model; keep tasks of your own as a holdout "
                f"(+sweep=generate_tasks tasks.examples=FILE tasks.own_holdout=true)")
    return (f"rests on: {gen.n} generated tasks (mean diff {gen.mean:+.3f}) and {own.n} of your own (mean diff "
            f"{own.mean:+.3f}); the confirmation's test is over all {gen.n + own.n}; the two means describe it, "
            f"neither is tested on its own")


def holdout_test_text(row: HoldoutRow) -> str:
    """What the holdout test saw: runs (candidate/baseline), SE, and the p against its Holm level or the floor; or
    where a futility stop ended it."""
    if row.stopped_after is not None:
        return (f" [runs {row.runs[0]}/{row.runs[1]}, {row.futility_text}: not confirmed; the look still counts"
                + ("" if row.holdout_level is not None else "; did not pass the train filter") + "]")
    if row.cut_by_filter:
        return " [no holdout run; not tested: did not pass the train filter]"
    if row.holdout_se is None and row.holdout_p is None:
        if row.holdout_rule == "tasks" or (row.holdout_n and row.holdout_n < 2):
            return f" [runs {row.runs[0]}/{row.runs[1]}, {row.holdout_n} holdout task(s): nothing measured]"
        return ""
    se = f", se {num(row.holdout_se)}" if row.holdout_se is not None else ", se not measured"
    text = f" [runs {row.runs[0]}/{row.runs[1]}{se}"
    if row.preference is not None:  # sweep.holdout_compare=pairwise: the sign-flip test on preferences
        text = (f" [over {row.holdout_n} tasks (pairwise: mean preference {row.preference:+.3f}, exact sign-flip), "
                f"runs {row.runs[0]}/{row.runs[1]}")
    elif row.holdout_rule == "tasks" or (not row.holdout_rule and row.holdout_df is not None
                                         and row.holdout_df == row.holdout_n - 1):
        text = (f" [over {row.holdout_n} tasks (paired t, {row.holdout_df} df, and skew-calibrated), runs "
                f"{row.runs[0]}/{row.runs[1]}{se}")
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
    row = promoted_row(s) if s.promoted else None
    held = (f" (task types held back by their own holdout tasks, baseline text kept: "
            f"{', '.join(sorted(row.held_types))})" if row is not None and row.held_types else "")
    standing = " (the study's standing winner, confirmed at an earlier look)" if row is not None and row.standing \
        else ""
    head = (f"# Promoted by sweep {s.sweep}: trial #{s.promoted_trial}{standing}{held}\n" if s.promoted
            else f"# Sweep {s.sweep}: no candidate cleared the noise floor and the holdout; the baseline is kept\n")
    return head + OmegaConf.to_yaml(OmegaConf.create(node))


# -- the A/B test ------------------------------------------------------------------------------------------------


# -- the calibration ---------------------------------------------------------------------------------------------


def cost_block(rows: Sequence[Any], promoted_trial: int | None) -> list[str]:
    """The promoted candidate's (else the first holdout row's) holdout cost against the baseline, every metric
    paired over tasks (experiments.stats.CostDiff.line): 'cost vs baseline (holdout, 8 tasks):' and one line each."""
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
