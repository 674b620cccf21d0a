"""Preflight: what the rest of a sweep's budget will cost and detect, before a trial runs.

The cost per task run comes from the stored calibration of the fingerprint (experiments.storage), else
from the first measured task; the detectable effect from experiments.stats.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from experiments.config import ExperimentConfig
from experiments.promotion import holdout_runs, race_runs
from experiments.report import decision_power_line, hms, num, spread_effect_line
from experiments.stats import decision_power, mde, spread_from_trials, sweep_design
from experiments.storage import Cost, find_calibration

from ._holdout_looks import NEXT_FAMILY, first_level, next_level

HANDFUL = 5  # fewer proposals than this and the preflight warns
PAIRWISE_POWER = ("design power: not modelled for sweep.holdout_compare=pairwise (the sign-flip test on "
                  "preferences confirms 'preferred on more tasks', not a mean effect); its power and false "
                  "promotions in simulation: docs/SENSITIVITY.md, lever a")


@dataclass(frozen=True)
class Projection:
    trials_left: int
    baseline_pending: bool
    proposals: int  # search trials the budget allows (n_trials, then timeout / LLM-call caps when the cost is known)
    limited_by: str
    task_runs: int
    llm_calls: float | None  # uncached (what sweep.max_llm_calls counts), mutation calls included
    tokens: float | None
    wall_s: float | None
    source: str  # where the cost per task run comes from
    at_once: int = 1  # task runs side by side (concurrency, at most the train tasks)


def project_sweep(exp: ExperimentConfig, *, finished: int, baseline_done: bool, repeats_left: int,
                  holdout_left: int, cost: Cost | None, source: str, used_calls: int = 0, elapsed_s: float = 0.0,
                  mutation_calls: int = 0, concurrency: int = 1) -> Projection:
    """Task runs, LLM calls, tokens and wall time the rest of a sweep's budget will take (an upper bound: a pruned
    trial stops early and a duplicate costs nothing), and how many proposals it allows. With `concurrency` N the
    tasks of a trial run N at once: wall time is divided by min(N, train tasks), which assumes the backend serves
    N requests at once as fast as one (a measured cost per task run taken at concurrency N already includes the
    slow-down of sharing it)."""
    sw = exp.sweep
    n_train = len(exp.tasks("train"))
    left = max(sw.n_trials - finished, 0)
    pending = (not baseline_done) and left > 0
    proposals, limited = max(left - int(pending), 0), f"n_trials={sw.n_trials}"
    fixed_runs = (int(pending) + repeats_left) * n_train
    at_once = max(min(int(concurrency), n_train), 1)
    if cost is not None:
        per_trial_calls = n_train * cost.uncached_calls + mutation_calls
        per_trial_s = n_train * cost.wall_s / at_once
        if sw.max_llm_calls is not None and per_trial_calls > 0:
            room = sw.max_llm_calls - used_calls - fixed_runs * cost.uncached_calls
            cap = max(math.ceil(room / per_trial_calls), 0)
            if cap < proposals:
                proposals, limited = cap, f"max_llm_calls={sw.max_llm_calls}"
        if sw.timeout_s is not None and per_trial_s > 0:
            room = sw.timeout_s - elapsed_s - fixed_runs * cost.wall_s / at_once
            cap = max(math.ceil(room / per_trial_s), 0)
            if cap < proposals:
                proposals, limited = cap, f"timeout_s={sw.timeout_s:g}"
    runs = fixed_runs + proposals * n_train + holdout_left
    if cost is None:
        return Projection(left, pending, proposals, limited, runs, None, None, None, source)
    return Projection(left, pending, proposals, limited, runs, runs * cost.uncached_calls + proposals * mutation_calls,
                      runs * cost.tokens, runs * cost.wall_s / at_once, source, at_once)


def preflight_lines(exp: ExperimentConfig, proj: Projection, *, sigma: float | None, baseline_runs: int,
                    noise_source: str, effect_cv: float = 0.0, calibration: Any = None,
                    level: float | None = None, sigma_df: int | None = None) -> list[str]:
    """The preflight block: budget, projected cost, what the configured design detects, and a warning on a tiny
    budget.

    The detectable effect is the configured design's (design_effect_lines): where the holdout confirms over tasks,
    the design power line of the train filter and the confirmation together at `level` (None: a new study's first
    look), the line the summary prints; else the train filter's own figure by the rule it runs."""
    sw = exp.sweep
    n_train = len(exp.tasks("train"))
    lines = [f"preflight: budget n_trials={sw.n_trials} ({proj.trials_left} left: "
             f"{'baseline + ' if proj.baseline_pending else ''}{proj.proposals} proposal(s)), timeout_s="
             f"{sw.timeout_s if sw.timeout_s is not None else 'none'}, max_llm_calls="
             f"{sw.max_llm_calls if sw.max_llm_calls is not None else 'none'}"]
    if proj.llm_calls is None:
        lines.append(f"preflight: {proj.task_runs} task runs projected; LLM calls, tokens and wall time follow from "
                     f"the first measured task ({proj.source})")
    else:
        side = f", {proj.at_once} at once" if proj.at_once > 1 else ""
        lines.append(f"preflight: {proj.task_runs} task runs: ~{proj.llm_calls:.0f} uncached LLM calls, "
                     f"~{proj.tokens:.0f} tokens, wall ~{hms(proj.wall_s or 0.0)} (cost per task run from "
                     f"{proj.source}{side}; an upper bound: a pruned trial stops early)")
    if sigma is not None and n_train:
        lines += ["preflight: " + ln for ln in design_effect_lines(
            exp, sigma=sigma, noise_source=noise_source, baseline_runs=baseline_runs, effect_cv=effect_cv,
            calibration=calibration, level=level, sigma_df=sigma_df)]
    else:
        lines.append("preflight: detectable effect not known yet (no calibration for this fingerprint): it follows "
                     "from the baseline repeats; run +sweep=calibrate first to know it before a sweep")
    if proj.proposals < HANDFUL:
        lines.append(f"preflight: WARNING: the budget allows only {proj.proposals} proposal(s) (limited by "
                     f"{proj.limited_by}), fewer than a handful ({HANDFUL}): the search can barely move; raise "
                     f"sweep.n_trials" + (" or the cap that limits it" if not proj.limited_by.startswith("n_trials")
                                          else ""))
    return lines


def confirms_over_tasks(exp: ExperimentConfig) -> bool:
    """The design promotes on a confirmation over the holdout tasks (sweep.holdout_test=tasks on 2 or more): what
    experiments.stats.decision_power models, train filter and confirmation together."""
    return exp.sweep.holdout_test == "tasks" and len(exp.tasks("holdout")) >= 2


def design_effect_lines(exp: ExperimentConfig, *, sigma: float, noise_source: str, baseline_runs: int,
                        effect_cv: float = 0.0, calibration: Any = None, level: float | None = None,
                        sigma_df: int | None = None) -> list[str]:
    """What the configured design detects, one figure for the rule that runs:

    - sweep.holdout_compare=pairwise: not modelled (PAIRWISE_POWER);
    - a confirmation over the holdout tasks: the design power line (confirmable_line: the train filter as
      sweep.train_filter runs it and the holdout's confirmation at `level`, with the spread tau the calibration's
      positive control measured; sigma_df: the df of sigma's estimate), the figure the summary prints;
    - the fixed-task holdout rules ("bound", "floor": they promote nothing): the train filter's own detectable
      effect by its rule (the Wilcoxon and the 2-SE floor, or the train mean above the baseline's), with its
      figure for an effect that varies across tasks as the calibration's positive control did."""
    sw = exp.sweep
    if sw.holdout_compare == "pairwise":
        return [PAIRWISE_POWER]
    if confirms_over_tasks(exp):
        return [confirmable_line(exp, sigma=sigma, sigma_source=noise_source, baseline_runs=baseline_runs,
                                 candidate_diffs=(), calibration=calibration, sigma_df=sigma_df,
                                 level=first_level(exp) if level is None else level)]
    n_train = len(exp.tasks("train"))
    rule = (f"the holdout rule {sw.holdout_test!r} promotes nothing" if sw.holdout_test != "tasks"
            else f"a holdout of {len(exp.tasks('holdout'))} task(s) confirms nothing")
    d = sweep_design(sigma, n_train, alpha=sw.alpha, baseline_runs=baseline_runs)
    if sw.train_filter == "none":
        return [f"detectable effect: none modelled (sweep.train_filter=none selects on nothing, and {rule})"]
    if sw.train_filter == "positive":  # no test: the mean of n normal differences above 0 with probability power
        from scipy.stats import norm

        m = float(norm.ppf(exp.calibrate.power)) * d.sd_diff / math.sqrt(n_train)
        what = f"train mean above the baseline's; noise sigma {sigma:.3f} from {noise_source}"
        return [f"detectable effect {num(m)} composite points at power {exp.calibrate.power:g} by the train filter "
                f"alone ({n_train} train tasks, sweep.train_filter=positive: {what}; {rule})"]
    what = (f"one-sided wilcoxon p < {sw.alpha:g} and diff > floor {d.floor:.3f}; noise sigma {sigma:.3f} from "
            f"{noise_source}")
    m = mde(d, power=exp.calibrate.power, sims=exp.calibrate.sims)
    lines = [f"detectable effect {num(m)} composite points at power {exp.calibrate.power:g} by the train filter "
             f"alone ({n_train} train tasks, sweep.train_filter={sw.train_filter}: {what}; {rule})"]
    if effect_cv > 0:
        lines.append(spread_effect_line(dataclasses.replace(d, effect_cv=effect_cv), "composite points", "train tasks",
                                        power=exp.calibrate.power, sims=exp.calibrate.sims))
    return lines


# -- a sweep's noise source and preflight -------------------------------------------------------------------------


@dataclass(frozen=True)
class NoiseSource:
    calibration: Any  # the calibration_store.Calibration whose noise floor the study uses, or None (its repeats)
    note: str  # the summary's "noise source" line
    line: str  # what the sweep prints when it starts


def pin_noise_source(study: Any, exp: ExperimentConfig, identity: Mapping[str, Any], tasks: Sequence[Any]) -> NoiseSource:
    """The stored calibration whose noise floor this study uses instead of baseline repeats, or none.

    Pinned to the study when it starts (study attr noise_source), so a resumed study keeps one source: a study
    that measured its own repeats keeps them even if a calibration appears later."""
    cal, note = find_calibration(exp, identity, tasks)
    pinned = study.user_attrs.get("noise_source")
    if pinned is None:
        if cal is not None and study.user_attrs.get("baseline_runs"):  # repeats measured before it existed
            note, cal = f"{note} exists, but this study measured its own baseline repeats; keeping them", None
        study.set_user_attr("noise_source", {"calibration": cal.key if cal is not None else None})
    elif pinned.get("calibration") is None:
        if cal is not None:
            note = f"{note} exists, but this study started without it; keeping its own baseline repeats"
        cal = None
    elif cal is None or cal.key != pinned["calibration"]:
        note = f"the calibration this study started with is gone ({note}); measuring baseline repeats now"
        study.set_user_attr("noise_source", {"calibration": None})
        cal = None
    r = exp.sweep.baseline_repeats
    if cal is not None:
        return NoiseSource(cal, f"calibration {cal.key} ({cal.path}): sigma {cal.sigma:.3f} over {cal.repeats} runs x "
                                f"{cal.n_tasks} tasks; baseline repeats not run",
                           f"noise floor from {note}: sigma {cal.sigma:.3f} over {cal.repeats} runs x {cal.n_tasks} "
                           f"tasks; the {r - 1} baseline repeat(s) are not run")
    return NoiseSource(None, f"{r} baseline runs of this study ({note})",
                       f"calibration: {note}; the noise floor comes from {r} baseline runs")


def noise_measured_line(exp: ExperimentConfig, runs: Sequence[Mapping[str, float]], n_train: int, *,
                        level: float | None = None) -> str:
    """What the configured design detects (design_effect_lines), once a study's baseline repeats have measured
    the noise: with a confirmation over the holdout tasks, the design power line at `level` (None: a new study's
    first look), tau not measured yet."""
    from experiments.stats import noise_floor

    nf = noise_floor(runs)
    d = sweep_design(nf.sigma, n_train, alpha=exp.sweep.alpha, baseline_runs=len(runs))
    figure = design_effect_lines(exp, sigma=nf.sigma, noise_source=f"{len(runs)} baseline runs",
                                 baseline_runs=len(runs), level=level, sigma_df=nf.df or None)
    return (f"noise measured from {len(runs)} baseline runs: sigma {nf.sigma:.3f}, floor {d.floor:.3f}; "
            + "; ".join(figure))


def mutation_calls(exp: ExperimentConfig, mutate_types: Sequence[str]) -> int:
    """Upper bound of LLM calls one proposal spends in the mutators: one per mutated task type when any
    configured operator asks the model."""
    try:
        from mutators import LLM_OPERATORS
    except ImportError:
        return len(mutate_types)
    return len(mutate_types) if set(exp.sweep.operators) & set(LLM_OPERATORS) else 0


def sweep_preflight(exp: ExperimentConfig, study: Any, *, calibration: Any, measured: Sequence[tuple[int, int, float]],
                    n_holdout: int, update: str | None, used_calls: int, elapsed_s: float, mutation_calls: int,
                    concurrency: int, n_train: int = 0) -> tuple[list[str], bool]:
    """(lines, whether the cost per task run is known): projected LLM calls, tokens and wall time for the rest of
    the budget, the detectable effect, and a warning on a budget of fewer than a handful of proposals. Before the
    first trial (update None) the cost comes from the calibration, else it is not known yet; an update (after the
    first measured task, after the first trial) takes it from the task runs measured here ((uncached calls,
    tokens, seconds) each) and prints nothing when none reached the model."""
    from ._study import baseline_trial, finished_trials

    sw, cal = exp.sweep, calibration
    m = [x for x in measured if x[0] > 0]  # task runs that reached the model (a cache hit costs ~0)
    if update is not None and not m:
        return [], True
    if update is not None:
        update = f"{update}: {len(m)} task run(s) measured here"
        cost, source = Cost(0.0, statistics.median(x[0] for x in m), statistics.median(x[1] for x in m),
                            statistics.median(x[2] for x in m), runs=len(m)), update
    elif cal is not None:
        cost, source = cal.cost, f"calibration {cal.key}"
    else:
        cost, source = None, "no calibration"
    stored = dict(study.user_attrs.get("baseline_runs", {}))
    repeats_left = 0 if cal is not None else sum(str(exp.seed + k) not in stored for k in range(1, sw.baseline_repeats))
    # task runs stored (a run of a text filled block by block under sweep.holdout_futility_block counts its tasks)
    done_runs = sum(len(v) for v in study.user_attrs.get("holdout", {}).values()) + sum(
        len(r) for v in study.user_attrs.get("holdout_repeats", {}).values() for r in v.values())
    holdout_left = max(holdout_runs(sw, n_holdout) - done_runs, 0)
    raced = sum(len(v) for v in study.user_attrs.get("train_reruns", {}).values())
    holdout_left += max(race_runs(sw, n_train) - raced * n_train, 0)  # the final race: task runs after the search
    proj = project_sweep(exp, finished=len(finished_trials(study)), baseline_done=baseline_trial(study) is not None,
                         repeats_left=repeats_left, holdout_left=holdout_left, cost=cost, source=source,
                         used_calls=used_calls, elapsed_s=elapsed_s, mutation_calls=mutation_calls,
                         concurrency=concurrency)
    sigma, src = (cal.sigma, f"calibration {cal.key}") if cal is not None else (None, "no calibration")
    # with a calibration the sweep compares each candidate with its one baseline run (no repeats)
    # the design's figure once, before the first trial: an update changes the cost and the proposals only
    lines = preflight_lines(exp, proj, sigma=sigma if update is None else None, baseline_runs=1, noise_source=src,
                            effect_cv=cal.effect_cv if cal is not None else 0.0, calibration=cal,
                            sigma_df=(cal.noise_floor().df or None) if cal is not None else None,
                            level=next_level(exp, study) if sigma is not None and update is None
                            and confirms_over_tasks(exp) and sw.holdout_compare != "pairwise" else None)
    if update is None:
        lines.append(cost_model_line(cal, baseline_trial(study), proj.task_runs))
    if update is not None:  # the cost line changes, and the proposals a timeout or call cap allows
        lines = [ln.replace("preflight:", "preflight update:", 1) for ln in lines if "detectable effect" not in ln]
    return lines, cost is not None


def cost_model_line(calibration: Any, baseline: Any, task_runs: int) -> str:
    """The cost model the preflight uses: tokens and calls per task run from the calibration,
    else from the baseline trial's tasks (its `task_costs`: completion and prompt tokens apart), else unknown; and
    the tokens projected for the design's `task_runs`."""
    if calibration is not None:
        co = calibration.cost
        return (f"preflight: cost model: {co.tokens:.0f} tokens (prompt + completion; the calibration does not split "
                f"them), {co.llm_calls:.1f} LLM calls ({co.uncached_calls:.1f} uncached) per task run, medians over "
                f"calibration {calibration.key}'s {co.runs} runs; projected {task_runs * co.tokens:.0f} tokens for "
                f"{task_runs} task runs")
    costs = dict(baseline.user_attrs.get("task_costs") or {}) if baseline is not None else {}
    per = {m: statistics.fmean(v.values()) for m, v in costs.items() if v}
    if {"completion_tokens", "prompt_tokens", "llm_calls"} <= set(per):
        n = len(costs["completion_tokens"])
        tokens = per["completion_tokens"] + per["prompt_tokens"]
        return (f"preflight: cost model: {per['completion_tokens']:.0f} completion + {per['prompt_tokens']:.0f} prompt "
                f"tokens, {per['llm_calls']:.1f} LLM calls per task run, means over the baseline trial's {n} tasks; "
                f"projected {task_runs * tokens:.0f} tokens ({task_runs * per['completion_tokens']:.0f} completion) "
                f"for {task_runs} task runs")
    return (f"preflight: cost model: unknown until the baseline runs (no calibration, no baseline trial with a "
            f"recorded cost); tokens for the {task_runs} task runs follow from its first tasks")


# -- what the whole decision can confirm ----------------------------------------------------------------------


def spread_estimate(candidate_diffs: Sequence[Sequence[float]], sigma: float, baseline_runs: int,
                    calibration: Any) -> tuple[float, str, int | None]:
    """tau, where it came from and its degrees of freedom: the sweep's own candidates (their per-task train
    differences, run noise sigma^2 (1 + 1/b) taken out: spread_from_trials's df), else the calibration's positive
    control (its "df" when it stored one, else None), else 0 ("not measured", df None)."""
    own = spread_from_trials(candidate_diffs, sigma ** 2 * (1.0 + 1.0 / max(baseline_runs, 1)))
    if own is not None:
        return own[0], f"this sweep's {len(candidate_diffs)} candidate(s) ({own[1]} df)", own[1]
    het = getattr(calibration, "heterogeneity", None) if calibration is not None else None
    if het and het.get("tau") is not None:
        df = het.get("df")
        return (float(het["tau"]), f"calibration {calibration.key}'s positive control ({het['n']} tasks)",
                int(df) if df else None)
    return 0.0, "nothing yet (taken as 0: an optimistic figure)", None


def confirmable_line(exp: ExperimentConfig, *, sigma: float, sigma_source: str, baseline_runs: int,
                     candidate_diffs: Sequence[Sequence[float]], calibration: Any, level: float,
                     sigma_df: int | None = None) -> str:
    """The summary's (and preflight's) line: the mean effect this design promotes with probability
    calibrate.power, the train filter (raced as sweep.race_block races it) and the confirmation over tasks together,
    with tau from the sweep's own trials or the calibration (experiments.stats.decision_power). sigma_df (the noise
    floor's tasks x (runs - 1)) and tau's df (spread_estimate) make it the predictive power, averaged over the sigma
    and tau those estimates allow; None: taken as known."""
    sw = exp.sweep
    tau, tau_source, tau_df = spread_estimate(candidate_diffs, sigma, baseline_runs, calibration)
    dp = decision_power(sigma, tau, n_train=len(exp.tasks("train")), n_holdout=len(exp.tasks("holdout")),
                        alpha=sw.alpha, level=level, baseline_runs=baseline_runs,
                        holdout_runs=(sw.holdout_candidate_runs, sw.holdout_baseline_runs), power=exp.calibrate.power,
                        target_effect=exp.calibrate.target_effect, sims=min(exp.calibrate.sims, 1000),
                        train_filter=getattr(sw, "train_filter", "wilcoxon"),
                        futility_block=getattr(sw, "holdout_futility_block", 0),
                        race_block=sw.race_block if sw.search == "joint" else 0, race_z=sw.race_z, sigma_df=sigma_df,
                        tau_df=tau_df)
    return decision_power_line(dp, tau_source=tau_source, sigma_source=sigma_source)


def sweep_confirmable(exp: ExperimentConfig, *, noise: Any, baseline_runs: int, cands: Sequence[Any],
                      reference: Mapping[str, float], calibration: Any, look: Any,
                      stored: Sequence[Mapping[str, Any]] = (), others: Sequence[Mapping[str, Any]] = (),
                      holdout_baseline: Sequence[Mapping[str, float]] = ()) -> str:
    """The end-of-sweep confirmable line (confirmable_line) from what the sweep holds: its noise floor (noise:
    stats.NoiseFloor), its candidates (promotion.Candidate, one train run each) against the baseline reference,
    and the level of the look it made (else of its next one: next_look over the study's `stored` looks and the
    `others` of overlapping studies). "" when the design does not confirm over tasks or no noise was measured.
    Without a noise floor (sweep.baseline_repeats 1, no calibration: the default) the run noise is the one
    the baseline's own holdout runs show (`holdout_baseline`: its runs, task -> score, 2 or more)."""
    from experiments.stats import next_look, noise_floor

    sw = exp.sweep
    if noise.repeats < 2 and len([r for r in holdout_baseline if r]) >= 2:
        noise = noise_floor(holdout_baseline)
        source = f"the baseline's {noise.repeats} holdout runs"
    else:
        source = f"calibration {calibration.key}" if calibration is not None else f"{baseline_runs} baseline runs"
    if sw.holdout_compare == "pairwise":  # validate: only with holdout_test=tasks
        return PAIRWISE_POWER
    if sw.holdout_test != "tasks" or len(exp.tasks("holdout")) < 2 or noise.repeats < 2:
        return ""
    diffs = [[float(c.train_scores[t]) - float(reference[t]) for t in c.train_scores if t in reference]
             for c in cands]
    return confirmable_line(exp, sigma=noise.sigma, sigma_source=source, baseline_runs=baseline_runs,
                            candidate_diffs=diffs, calibration=calibration, sigma_df=noise.df or None,
                            level=look.level if look is not None
                            else next_look(stored, (NEXT_FAMILY,), sw.alpha, others).level)


def holdout_need_line(exp: ExperimentConfig, cands: Sequence[Any], reference: Mapping[str, float], sigma: float,
                      baseline_runs: int, level: float) -> str:
    """Before the holdout runs: the holdout the candidates going there need, from their own measured spread.

    tau is the spread of their per-task train differences against the baseline reference with the run noise
    sigma^2 (1 + 1/b) taken out (experiments.stats.spread_from_trials): the spread of edits that change answers,
    not of a neutral rewrite. The holdout tasks that confirm calibrate.target_effect at calibrate.power at this
    look's level follow from the normal approximation of the paired test over tasks,
    n = ((z(1 - level) + z(power)) * sd / effect)^2 with sd^2 = tau^2 + sigma^2 (1/kc + 1/kb) (kc, kb: the holdout
    runs of each text). The line says which spread it used and from how many candidates, and when the benchmark has
    fewer holdout tasks than that, that a true effect of that size may go unconfirmed here (decided before any
    holdout run: it spends nothing). "" without a measured run noise or a candidate."""
    from scipy.stats import norm

    sw = exp.sweep
    diffs = [[float(c.train_scores[t]) - float(reference[t]) for t in c.train_scores if t in reference]
             for c in cands]
    if not (sigma and sigma > 0) or not diffs:
        return ""
    own = spread_from_trials(diffs, sigma ** 2 * (1.0 + 1.0 / max(baseline_runs, 1)))
    if own is None:
        return ""
    tau, df = own
    effect, power = float(exp.calibrate.target_effect), float(exp.calibrate.power)
    sd = math.sqrt(tau ** 2 + sigma ** 2 * (1.0 / max(sw.holdout_candidate_runs, 1)
                                            + 1.0 / max(sw.holdout_baseline_runs, 1)))
    need = math.ceil(((norm.ppf(1 - level) + norm.ppf(power)) * sd / effect) ** 2)
    have = len(exp.tasks("holdout"))
    line = (f"holdout: the {len(diffs)} candidate(s) going there show a task x variant spread tau {tau:.3f} (their "
            f"train differences, {df} df, run noise sigma {sigma:.3f} taken out); confirming +{effect:g} at power "
            f"{power:g} (level {level:.3g}) takes about {need} holdout tasks; the benchmark has {have}")
    if need > have:
        line += (f": a true +{effect:g} may go unconfirmed here; more holdout tasks (generated by the same prompt "
                 f"and seeds, blind to any result) would see it")
    return line
