"""Calibration: know the noise before spending the night (`python -m experiments.run +sweep=calibrate`).

On `calibrate.tasks` benchmark tasks, through the same Runner protocol as a sweep (runners.HarnessRunner from the CLI,
tests/scripted_harness.ScriptedRunner in tests), with the baseline instructions:

- judge variance: the output of generator run 1 on each task is re-scored `judge_repeats` times by the evaluator
  alone (`runner.rescore`, judge seeds seed + JUDGE_SEED_OFFSET + j); pooled within-task SD, composite and per
  dimension. A greedy judge (evaluator.temperature 0) gives 0 here by construction.
- generator variance: the baseline configuration run `generator_repeats` (r) times with seeds of its own
  (generator_seed: seed + GENERATOR_SEED_OFFSET + j, never a seed a sweep's baseline runs use) on the same prepared
  contexts: pooled within-task SD (experiments.stats.noise_floor, the sweep's own estimator), so
  it includes the judge's share. This sigma is what a later sweep uses as its noise floor.
- A/A: those r runs, split by a seeded coin into two arms under blind labels (identical configuration, different
  seeds), per-task arm means compared two-sided (calibrate.test: paired t or exact Wilcoxon, experiments.stats).
  It must NOT come out significant. The A/A costs no extra runs: its arms are the generator runs.
- positive control: `calibrate.harmful_instruction` in place of every task type's instruction, `replications`
  runs per task on the same contexts, compared one-sided (control worse) with the per-task mean of the generator
  runs. It must lose significantly. A two-sided t p-value is halved in the predicted direction (1 - p/2 against it).
- edits (calibrate.edits = k > 0, _edits.py): k edits the sweep's mutators propose from the baseline, each run once
  per task at generator run 1's seed; per edit its mean difference and its spread across tasks beyond the run noise
  (tau), and the largest tau, which sizes tasks.count=auto when it is the largest spread measured.
- A check whose test cannot reach alpha with this many tasks (power.min_attainable_p) is "unreachable"; such a
  design is refused before anything runs unless calibrate.allow_underpowered (experiments.config).
- minimum detectable effect and tasks needed for the sweep's and the A/B's decision rules: by simulation
  (experiments.stats), with sigma as an estimate of n_tasks * (r - 1) degrees of freedom; once for an effect of the
  same size on every task, and once for an effect that varies across tasks as much as the positive control's did
  (power.heterogeneity: its per-task differences' spread beyond the noise, relative to its mean). Measured on the
  1.5B model: a subtle control lost 3.9-4.5 points on three tasks and gained 2.0 on the fourth, a spread the
  same-size MDE ignores.

Everything is computed first and written last: results/calibration/<key>.json (experiments.storage; one stored
there before is kept under results/calibration/replaced/ and the summary says what it measured),
PNG plots beside it, and one MLflow parent run (experiment `sweep.name`, default "calibrate"), so a refusal or a
failed task leaves nothing behind but the harness's own run records.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from experiments.config import ExperimentConfig, Task, load_tasks, split
from experiments.report import hms, identity_text
from experiments.runs import RunPool, TimedRunner, runner_pool
from experiments.stats import (Design, ab_design, detection_rate, heterogeneity, mde, min_attainable_p, noise_floor,
                               paired_ttest, replications_for_effect, sweep_design, tasks_for_effect, wilcoxon_test)
from experiments.storage import (FAIL, PASS, UNREACHABLE, Calibration, Check, Cost, aa_tau, calibration_dir,
                                 calibration_fingerprint, fingerprint_key, run_label)

from ._arms import pairwise_arm, rewrite_of, runner_at
from ._decompose import decompose, frozen_share, levers
from ._edits import edits_arm
from ._record import log_mlflow, safe_plots
from ._summary import format_calibration

JUDGE_SEED_OFFSET = 2_000_003  # judge re-score seeds: apart from generation seeds and wiggum's verify (1_000_003)
# Generator and control run seeds (seed + GENERATOR_SEED_OFFSET + j): a sweep runs the baseline with seeds seed,
# seed + 1, ... (trial, repeats, holdout runs, race) and the response cache is keyed on the seed, so runs with those
# seeds would be the sweep's own baseline runs again, and pooling the calibration's sigma with the holdout's
# repeats would count one run twice. Their own seeds make them runs (and cache entries) of their own.
GENERATOR_SEED_OFFSET = 3_000_017


def generator_seed(seed: int, j: int) -> int:
    """Seed of the calibration's generator (and positive-control) run j."""
    return seed + GENERATOR_SEED_OFFSET + j


class CalibrationFailed(RuntimeError):
    """A task run failed during the calibration; nothing was stored."""


def pick_tasks(tasks: Sequence[Task], n: int) -> tuple[Task, ...]:
    """n tasks (0: all): train split first, then holdout; within each, round-robin over task types in benchmark
    order, so every task type is represented when n allows (the instructions differ per type)."""
    if n <= 0 or n >= len(tasks):
        return tuple(tasks)
    chosen: list[Task] = []
    for part in (split(tasks, "train"), split(tasks, "holdout")):
        queues: dict[str, list[Task]] = {}
        for t in part:
            queues.setdefault(t.task_type, []).append(t)
        while any(queues.values()) and len(chosen) < n:
            for q in queues.values():
                if q and len(chosen) < n:
                    chosen.append(q.pop(0))
    order = {t.id: i for i, t in enumerate(tasks)}
    return tuple(sorted(chosen, key=lambda t: order[t.id]))


def _pooled(runs: Sequence[Mapping[str, float]]) -> float:
    return noise_floor(runs).sigma


def _dimension_sds(runs: Sequence[Mapping[str, Mapping[str, float]]]) -> dict[str, float]:
    """Pooled within-task SD per dimension; runs[j][task] is that run's dimensions for the task."""
    dims = sorted({k for r in runs for dims in r.values() for k in dims})
    out = {}
    for dim in dims:
        per = [{t: float(v[dim]) for t, v in r.items() if dim in v} for r in runs]
        out[dim] = round(_pooled(per), 4)
    return out


def _p_one_sided_t(diffs: Sequence[float], alternative: str) -> float:
    """One-sided p of stats.paired_ttest (two-sided): p/2 in the predicted direction, 1 - p/2 against it."""
    t = paired_ttest(diffs)
    if math.isnan(t.statistic):
        return 1.0
    toward = t.statistic < 0 if alternative == "less" else t.statistic > 0
    return t.pvalue / 2 if toward else 1 - t.pvalue / 2


def paired_check(name: str, diffs: Sequence[float], *, test: str, alternative: str, alpha: float,
                 detail: str) -> Check:
    """The A/A test (two-sided: must NOT be significant) or a positive control (one-sided "less": must be)."""
    n = len(diffs)
    min_p = min_attainable_p(n, test=test, alternative=alternative)
    if test == "wilcoxon":
        p = wilcoxon_test(diffs, alternative=alternative).pvalue
    elif alternative == "two-sided":
        p = paired_ttest(diffs).pvalue
    else:
        p = _p_one_sided_t(diffs, alternative)
    mean = float(np.mean(diffs)) if n else float("nan")
    if min_p >= alpha:
        status = UNREACHABLE
    elif alternative == "two-sided":
        status = FAIL if p < alpha else PASS
    else:
        status = PASS if (p < alpha and mean < 0) else FAIL
    return Check(name, test, alternative, n, mean, float(p), float(min_p), status, detail)


def _blind_labels(seed: int, r: int) -> tuple[tuple[str, str], list[int], list[int]]:
    """Two labels that say nothing about the runs, and which generator runs each arm got (a seeded coin)."""
    rng = random.Random(f"calibrate-aa-{seed}")
    labels = tuple(f"arm-{rng.getrandbits(16):04x}" for _ in range(2))
    order = list(range(r))
    rng.shuffle(order)
    return (labels[0], labels[1]), sorted(order[0::2]), sorted(order[1::2])


def run_calibration(exp: ExperimentConfig, runner: Any, *, out: Callable[[str], None] = print,
                    pool: RunPool | None = None, propose: Callable[..., Any] | None = None) -> Calibration:
    """Run the calibration (see the module docstring); returns the stored Calibration (failed_out when a check
    failed). Raises CalibrationFailed (nothing stored) when a task run fails. Preparations, task runs and
    re-scores run backend.concurrency at once (`pool` overrides it); the statistics do not depend on it.
    `propose`: the edits arm's mutators.propose (calibrate.edits; a test's own, as a sweep's)."""
    from experiments.config import task_types
    from experiments.runs import TrialFailed, baseline_instructions, evaluate_candidate

    c = exp.calibrate
    name = exp.sweep.name
    if not callable(getattr(runner, "rescore", None)):
        raise TypeError(f"calibrate: the runner {type(runner).__name__} has no rescore(prepared, text, *, criteria, "
                        f"seed): the judge variance needs it; nothing was run")
    t_start = time.perf_counter()
    all_tasks = load_tasks(exp.benchmark)
    tasks = pick_tasks(all_tasks, c.tasks)
    n, r, k = len(tasks), c.generator_repeats, c.judge_repeats
    identity = runner.identity()
    if pool is None:
        pool = runner_pool(exp.backend, identity)
    fp = calibration_fingerprint(exp, identity, all_tasks)
    key = fingerprint_key(fp)
    smoke = bool(getattr(runner, "smoke", False))
    instructions = baseline_instructions(exp, task_types(all_tasks))
    harmful = {tt: c.harmful_instruction.strip() for tt in instructions}
    rewritten = {tt: rewrite_of(tt, text, c.rewrite_instruction) for tt, text in instructions.items()}
    rewrite = {tt: v[0] for tt, v in rewritten.items()}
    decodings = list(c.decodings)
    greedy_runner = runner_at(runner, "greedy") if "greedy" in decodings else None
    # per decoding: the A/A' run (1 per task); greedy adds its own r baseline runs
    extra = n * len(decodings) + (n * r if greedy_runner is not None else 0)
    total_finish, total_rescore = n * (r + c.replications + c.edits) + extra, n * k
    state = {"phase": "", "done": 0, "total": 0, "announced": False}

    def progress(kind: str, task_id: str, outcome: Any, seconds: float) -> None:
        state["done"] += 1
        f_left = total_finish - sum(len(t.finish_s) for t in timers)
        s_left = total_rescore - len(timed.rescore_s)
        finished = [x for t in timers for x in t.finish_s]
        mean_f = statistics.fmean(finished) if finished else 0.0
        mean_s = statistics.fmean(timed.rescore_s) if timed.rescore_s else mean_f / 10
        eta = (f_left * mean_f + s_left * mean_s) / pool.workers
        score = f"score {outcome.score:.3f}" if getattr(outcome, "ok", False) else "FAILED"
        out(f"[{name}] {state['phase']} {state['done']}/{state['total']} {task_id} {score} ({seconds:.1f}s)  elapsed "
            f"{hms(time.perf_counter() - t_start)}  ETA {hms(eta)}")
        if kind == "finish" and not state["announced"]:
            state["announced"] = True
            out(f"[{name}] projected: {f_left} more task run(s) x {mean_f:.1f}s + {s_left} re-score(s) ~ {hms(eta)} "
                f"(from the first measured task)")

    timed = TimedRunner(runner, progress)
    timers = [timed]
    timed_greedy = None
    if greedy_runner is not None:
        timed_greedy = TimedRunner(greedy_runner, progress)
        timers.append(timed_greedy)
    out(f"[{name}] calibration of fingerprint {key} ({identity_text(identity)}; benchmark {exp.benchmark.name}): "
        f"{n} task(s) ({', '.join(t.id for t in tasks)}): {n} context preparation(s), {n * r} generator task runs "
        f"({r} seeds; also the A/A arms), {n * c.replications} positive-control task runs, "
        + (f"up to {n * c.edits} edit task runs ({c.edits} edits the mutators propose), " if c.edits else "")
        + f"{extra} A/A' task runs "
        f"({'/'.join(decodings)}; rewrite: {', '.join(sorted({v[1] for v in rewritten.values()}))}), {n * k} judge "
        f"re-scores; "
        f"wall time projected after the first task")

    replacing = Calibration.replacing_line(calibration_dir(exp) / f"{key}.json",
                                           {"tasks": n, "repeats": r, "pairwise": c.pairwise, "decodings": decodings,
                                            "edits": c.edits})
    if replacing:  # said before anything runs: a smaller rerun would otherwise replace a bigger one unseen
        out(f"[{name}] {replacing}")

    calls0 = int(runner.llm_calls())
    t0 = time.perf_counter()
    contexts = {}
    out(f"[{name}] concurrency {pool.workers}: {pool.why or 'given'}")
    with pool.ordered(lambda t: runner.prepare(t.task), tasks) as prepared:
        for i, (task, fut) in enumerate(prepared, 1):
            contexts[task.id] = fut.result()
            out(f"[{name}] context {i}/{n} {task.id}: prepared")
    prepare_s = (time.perf_counter() - t0) / max(n, 1)
    prepare_calls = (int(runner.llm_calls()) - calls0) / max(n, 1)

    def evaluate(label: str, instr: Mapping[str, str], seed: int, prefix: str, via: Any = None) -> Any:
        state.update(phase=label, done=0, total=n)
        try:
            return evaluate_candidate(instr, tasks, via or timed, contexts=contexts, seed=seed, run_prefix=prefix,
                                      pool=pool)
        except TrialFailed as exc:
            raise CalibrationFailed(f"calibration stopped in {label} (seed {seed}): {exc}; nothing stored") from exc

    gens = [evaluate(f"generator run {j + 1}/{r} (seed {generator_seed(exp.seed, j)})", instructions,
                     generator_seed(exp.seed, j), f"{name}-gen{j}") for j in range(r)]
    controls = [evaluate(f"positive control {j + 1}/{c.replications} (seed {generator_seed(exp.seed, j)})", harmful,
                         generator_seed(exp.seed, j), f"{name}-control{j}") for j in range(c.replications)]
    # the A/A' arm: the rewrite at the seed of generator run 1 (rho: same seed vs generator run 2's), per decoding
    arms: dict[str, tuple[list[Any], Any]] = {}
    for dec in decodings:
        via = timed if dec == "sampled" else timed_greedy
        base = gens if dec == "sampled" else [
            evaluate(f"greedy baseline run {j + 1}/{r} (seed {generator_seed(exp.seed, j)})", instructions,
                     generator_seed(exp.seed, j), f"{name}-greedy{j}", via) for j in range(r)]
        arms[dec] = (base, evaluate(f"A/A' rewrite, {dec} (seed {generator_seed(exp.seed, 0)})", rewrite,
                                    generator_seed(exp.seed, 0), f"{name}-rewrite-{dec}", via))
    edits = edits_arm(exp, runner, tasks, instructions, gens, evaluate, generator_seed(exp.seed, 0), propose=propose,
                      say=out) if c.edits else None
    judged: dict[str, list[Any]] = {}
    state.update(phase="judge re-scores", done=0, total=n * k)
    by_id = {t.id: t for t in tasks}
    jobs = [(s, j) for s in gens[0].scores for j in range(k)]

    def rescore(job: tuple[Any, int]) -> Any:
        s, j = job
        task = by_id[s.task_id]
        return timed.rescore(contexts[task.id], s.output_text, criteria=task.criteria(),
                             seed=exp.seed + JUDGE_SEED_OFFSET + j, run_seed=generator_seed(exp.seed, 0),
                             task_id=task.id)

    with pool.ordered(rescore, jobs) as rescored:
        for (s, _), fut in rescored:
            o = fut.result()
            if not o.ok:
                raise CalibrationFailed(f"calibration stopped in judge re-scores: task {s.task_id!r}: {o.error}; "
                                        f"nothing stored")
            judged.setdefault(s.task_id, []).append(o)

    # -- statistics -------------------------------------------------------------------------------------------
    gen_runs = [ev.by_task() for ev in gens]
    nf = noise_floor(gen_runs)
    df = nf.n_tasks * (r - 1)
    from scipy import stats as sps  # the chi-square CI of sigma

    ci = ((nf.sigma * math.sqrt(df / sps.chi2.ppf(0.975, df)), nf.sigma * math.sqrt(df / sps.chi2.ppf(0.025, df)))
          if df > 0 else (float("nan"), float("nan")))
    gen_dims = _dimension_sds([{s.task_id: s.dimensions for s in ev.scores} for ev in gens])
    judge_runs = [{t: outs[j].score for t, outs in judged.items()} for j in range(k)]
    judge_sigma = _pooled(judge_runs)
    judge_dims = _dimension_sds([{t: outs[j].dimensions for t, outs in judged.items()} for j in range(k)])

    # -- where the spread comes from (experiments.calibration._decompose) ----------------------------------
    decomposition: dict[str, Any] = {}
    for dec, (base, rw) in arms.items():
        base_runs = [ev.by_task() for ev in base]
        part = decompose(base_runs, rw.by_task(), noise_floor(base_runs).sigma)
        if dec == "greedy":
            part["f"] = frozen_share(judge_sigma, part["tau"])
        part["runs"] = {"baseline": base_runs, "rewrite": rw.by_task()}
        decomposition[dec] = part
    decomposition["rewrite"] = {tt: {"text": v[0], "source": v[1]} for tt, v in rewritten.items()}
    decomposition["judge_sigma"] = judge_sigma

    (label_x, label_y), arm_x, arm_y = _blind_labels(exp.seed, r)
    ids = [t.id for t in tasks]
    mean_of = lambda runs, t: statistics.fmean(run[t] for run in runs)  # noqa: E731
    aa_diffs = [mean_of([gen_runs[j] for j in arm_y], t) - mean_of([gen_runs[j] for j in arm_x], t) for t in ids]
    aa = paired_check("A/A", aa_diffs, test=c.test, alternative="two-sided", alpha=c.alpha,
                detail=f"blind arms {label_x} vs {label_y}, {len(arm_x)}+{len(arm_y)} run(s) per task")
    control_runs = [ev.by_task() for ev in controls]
    ctl_diffs = [mean_of(control_runs, t) - mean_of(gen_runs, t) for t in ids]
    short = c.harmful_instruction.strip()
    control = paired_check("positive control", ctl_diffs, test=c.test, alternative="less", alpha=c.alpha,
                     detail=f"{short[:40] + '...' if len(short) > 40 else short!r} vs baseline")

    judge_control = None
    rubric = tuple(exp.evaluator.dimensions) if exp.evaluator.composite != "deterministic" else ()
    if rubric:
        def rubric_means(evs: Sequence[Any]) -> list[dict[str, float]]:
            out = []
            for ev in evs:
                row = {}
                for sc in ev.scores:
                    vals = [sc.dimensions[d] for d in rubric if d in sc.dimensions]
                    if vals:
                        row[sc.task_id] = statistics.fmean(vals)
                out.append(row)
            return out

        g_rub, c_rub = rubric_means(gens), rubric_means(controls)
        both = [t for t in ids if all(t in r for r in g_rub + c_rub)]
        if both:
            judge_control = paired_check("judge on the positive control", [mean_of(c_rub, t) - mean_of(g_rub, t) for t in both],
                                   test=c.test, alternative="less", alpha=c.alpha,
                                   detail="mean of the rubric dimensions only, control vs baseline")
    n_train = len(split(all_tasks, "train"))
    ab_tasks = len(all_tasks) if exp.ab.split == "all" else len(split(all_tasks, exp.ab.split))
    # sigma is an estimate with df degrees of freedom: the reported MDE is the predictive one (power averaged over
    # the sigma the estimate allows); with a known sigma, 4 df gave 0.69 detection at the reported MDE, not 0.8
    sd = dataclasses.replace(sweep_design(nf.sigma, n_train, alpha=c.alpha), sigma_df=df or None)
    # an A/B's task differences also carry the task x variant spread the A/A' arm measured (sampled decoding, as an
    # A/B runs), which its replications do not shrink
    ab_tau = aa_tau(decomposition) or 0.0
    ad = dataclasses.replace(ab_design(nf.sigma, ab_tasks, alpha=c.alpha, replications=exp.ab.replications,
                                       test=exp.ab.test, min_effect=exp.ab.min_effect, tau=ab_tau),
                             sigma_df=df or None)
    # how much the control's effect varied across tasks, beyond the runs' noise: designs are also sized for a real
    # effect that varies as much (power.Design.effect_cv); the MDE above assumes the same effect on every task
    spread = heterogeneity(ctl_diffs, nf.sigma ** 2 * (1 / c.replications + 1 / r))
    cv = spread["effect_cv"] if spread else 0.0
    if spread:  # how often this calibration's own control check detects a control of this size and spread
        check = Design("control", n, spread["noise_sd"], c.alpha, "greater", c.test, effect_cv=cv)
        spread["control_power"] = detection_rate(check, abs(spread["mean"]), sims=c.sims)
    designs = [sd, ad] + ([dataclasses.replace(sd, name="sweep_spread", effect_cv=cv),
                           dataclasses.replace(ad, name="ab_spread", effect_cv=cv)] if cv > 0 else [])
    mdes = {d.name: {"mde": mde(d, power=c.power, sims=c.sims), "n": d.n, "sd_diff": d.sd_diff, "test": d.test,
                     "alternative": d.alternative, "floor": d.floor if d.floor_se else 0.0, "describe": d.describe(),
                     "effect_cv": d.effect_cv}
            for d in designs if d.n > 0}
    needed = {
        "target_effect": c.target_effect,
        "ab_replications": replications_for_effect(nf.sigma, ab_tasks, c.target_effect, alpha=c.alpha,
                                                   test=exp.ab.test, power=c.power, sims=c.sims,
                                                   min_effect=exp.ab.min_effect, tau=ab_tau) if ab_tasks else None,
        "ab_replications_now": exp.ab.replications,
    }
    slots = {"sweep": "sweep_train_tasks", "ab": "ab_tasks", "sweep_spread": "sweep_train_tasks_spread",
             "ab_spread": "ab_tasks_spread"}
    for d in designs:
        needed[slots[d.name]] = (tasks_for_effect(d, c.target_effect, power=c.power, sims=c.sims)
                                 if d.name.startswith("ab") or n_train else None)
    pairwise = pairwise_arm(exp, runner, tasks, contexts, gens, controls, pool, seed0=exp.seed + JUDGE_SEED_OFFSET) if c.pairwise else None
    main = decomposition.get("sampled") or decomposition["greedy"]
    lever_items = levers(main, greedy=decomposition.get("greedy"), g=(pairwise or {}).get("g"),
                         target=c.target_effect, alpha=c.alpha, power=c.power,
                         g_failed=(pairwise or {}).get("not_measured") or "")
    decomposition["levers"] = [{"lever": a, "pays": b, "why": w} for a, b, w in lever_items]
    decomposition["levers_from"] = "sampled" if "sampled" in decomposition else "greedy"
    scores = [s for ev in gens + controls for s in ev.scores]
    cost = Cost(
        llm_calls=float(statistics.median(s.llm_calls for s in scores)),
        uncached_calls=float(statistics.median(s.llm_calls - s.cached_calls for s in scores)),
        tokens=float(statistics.median(s.prompt_tokens + s.completion_tokens for s in scores)),
        wall_s=float(statistics.median(timed.finish_s)), prepare_calls=prepare_calls, prepare_s=prepare_s,
        rescore_s=float(statistics.median(timed.rescore_s)) if timed.rescore_s else 0.0, runs=len(scores))
    folder = calibration_dir(exp)
    path = folder / f"{key}.json"
    cal = Calibration(
        fingerprint=fp, key=key, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        design={"tasks": n, "generator_repeats": r, "judge_repeats": k, "replications": c.replications,
                "alpha": c.alpha, "power": c.power, "test": c.test, "target_effect": c.target_effect,
                "harmful_instruction": c.harmful_instruction, "sims": c.sims, "seed": exp.seed,
                "generator_seeds": [generator_seed(exp.seed, j) for j in range(r)],
                "benchmark": exp.benchmark.name, "aa_labels": [label_x, label_y], "aa_runs": [arm_x, arm_y],
                "decodings": decodings, "pairwise": c.pairwise},
        tasks=tuple(ids), sigma=nf.sigma, repeats=nf.repeats, n_tasks=nf.n_tasks, range_of_means=nf.range_of_means,
        per_task_sd=dict(nf.per_task_sd), sigma_ci=ci, judge_sigma=judge_sigma, judge_dimensions=judge_dims,
        generator_dimensions=gen_dims, aa=aa, control=control, mde=mdes, needed=needed, cost=cost, smoke=smoke,
        runs={"generator": gen_runs, "control": control_runs,
              "judge": {t: [o.score for o in outs] for t, outs in judged.items()},
              "aa_diffs": aa_diffs, "control_diffs": ctl_diffs},
        elapsed_s=time.perf_counter() - t_start, path=str(path), judge_control=judge_control, heterogeneity=spread,
        decomposition=decomposition, pairwise=pairwise, edits=edits)

    # -- written last: JSON, plots, MLflow ----------------------------------------------------------------------
    folder.mkdir(parents=True, exist_ok=True)
    replaced = cal.write(path)  # the calibration stored here before is kept under replaced/, and named
    plots = safe_plots(cal, folder / key / "plots", out, name)
    label = run_label(runner.identity(), cal) or ""
    ui = ""
    if exp.mlflow.enabled:
        try:
            ui = log_mlflow(exp, cal, format_calibration(cal, smoke_line=label, replaced=replaced), plots)
        except Exception as exc:  # the calibration stands without its MLflow record
            out(f"[{name}] warning: MLflow logging failed: {type(exc).__name__}: {exc}")
    out(format_calibration(cal, smoke_line=label, plots=plots, mlflow_ui=ui, replaced=replaced))
    return cal
