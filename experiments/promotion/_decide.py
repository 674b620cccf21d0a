"""Which candidate a sweep promotes, and the evidence for it: pure functions on typed values, no I/O.

The rule: rank the complete, distinct, non-baseline candidates by train mean; the final race (`race`: the top
`race_top` re-run once more on the train split by the sweep) re-ranks them on comparable evidence; those of the top
`holdout_top_k` that pass the train filter are run on the holdout (by the sweep, before `decide`; one the filter
cuts runs nothing there): each candidate `holdout_candidate_runs` times, the baseline `holdout_baseline_runs` times,
with different seeds. A candidate wins when its train comparison passes the train filter (sweep.train_filter, below)
AND its holdout difference confirms it over tasks (HoldoutTest, rule "tasks"). Among the winners the best holdout
mean is promoted (the earlier trial on a tie); with none, the baseline is kept, or, in a resumed study, the winner
an earlier look promoted (the standing winner, experiments/promotion/_standing.py: a later look replaces it only
with a confirmed candidate of higher holdout mean).

The question is the user's: "is this variant better on tasks like mine?". Its unit of replication is the task.

- The holdout alone confirms. Train scores select the candidate, and selection inflates them (the winner's curse),
  so they are never pooled into the holdout statistic. The train comparison is a filter: it decides, before any
  holdout run, which candidates are tested, and its p is not corrected for the number of candidates it chose from.
- The train filter (sweep.train_filter, pinned in the decision rule): "wilcoxon" (experiments.stats.compare:
  the train mean difference above the noise floor and a one-sided Wilcoxon p < alpha), "positive" (the candidate's
  train mean above the baseline's on the tasks both have) or "none" (every top-k candidate is tested). Which one
  is used changes which candidates reach the holdout, never the level they are tested at: the family is still the
  top-k fixed by train data before any holdout run. "wilcoxon" cuts real gains whose train difference is small
  against the train noise (a +0.04 train difference with a holdout p of 0.0007); with "positive" or
  "none" the holdout alone decides (docs/SENSITIVITY.md: the family-wise level holds, bench/power/sensitivity.py).
- Futility stop (sweep.holdout_futility_block, pinned): a candidate whose paired t after a block of holdout tasks
  but the last leaves the final test too little conditional power stops, not confirmed, its look spent; why the
  level holds: experiments/promotion/_futility.py.
- Model: task i's holdout difference (candidate mean over c runs minus baseline mean over b runs) is
  d_i = mu + u_i + e_i, with u_i the task's own deviation from the mean effect mu (the task x variant
  interaction, sd tau) and e_i run noise (variance sigma^2 (1/c + 1/b)). Holdout tasks stand for a population of
  tasks, so the claim is about mu, and the spread that matters is var(d_i) = tau^2 + sigma^2 (1/c + 1/b).
- Test (rule "tasks", the default): on the per-task mean differences over the m holdout tasks, the one-sided
  paired t (SE = sd(d) / sqrt(m), m - 1 degrees of freedom) and a skew requirement: p = max(p_t, p_skew)
  (experiments.stats.skew_test, TaskDiffs). sd(d) measures tau and the run noise together, so it is measured even
  with one run of each text (no sigma needed), and for a symmetric spread of d the t alone keeps its level whatever
  tau / sigma. It does not for a left-skewed spread of zero mean (most tasks gain a little, a few lose more): the
  tasks that carry the losses are often not sampled, and the t confirmed -(Exp - 1) 0.091 and -(lognormal) 0.154 of
  the time over 12 tasks at level 0.025. p_skew is the largest chance, over reference spreads at mean 0 (normal,
  -(Exp - 1), -(lognormal sigma 1)), of a skewness-corrected t (Hall's transformation, the sample skewness read
  twice as strongly) at least as high: for those spreads and any milder skew the level holds at every look, so over
  looks and studies too (bench/power/skew_level.py, docs/VERDICTS.md). The price is power on a symmetric spread,
  the more the smaller the level (docs/VERDICTS.md's table). A harm to 1 task in k is missed by m holdout tasks with
  probability ((k-1)/k)^m (0.26 for k = 8 at m = 10, 0.20 at m = 12) and no test on those m differences can see
  a task that is not among them: experiments.stats.holdout_tasks_for_harm(k, level) is the holdout size that
  bounds it (28 tasks for 1 in 8 at 0.025), and the summary prints it beside the verdict; what it shows against
  it besides: the worst holdout task's difference beside the mean, and sweep.max_task_loss (below). Not a
  Wilcoxon: the claim is about the mean, and a rank test answers for a skewed zero-mean spread (one task far down,
  many a little up) with p far below alpha. Fewer than 2 holdout tasks test nothing:
  experiments.config.sweep_design_problem refuses that design before it spends anything. Every difference equal
  (zero spread) leaves the t undefined: p is then the exact sign-flip p, 1/2^m when the differences are positive
  (1 otherwise), never 0 (two tasks at +0.5 each: p 0.25).
- Worst task (sweep.max_task_loss, composite points; None = off): a confirmed candidate that loses more than this
  on any holdout task (its per-task mean difference below -max_task_loss) is held back (`held_by_task_loss`), as
  the cost guard holds one back: the quality claim stands, nothing is promoted. A per-task difference carries run
  noise (sigma ~0.25-1.5 per run), so the limit sits well above it (conf/sweep/synth_mutation.yaml's default and
  its figures: docs/VERDICTS.md).
- Per task type: a winner moves a task type's alias only where that type's own holdout tasks show
  no harm: the type changed by the winner has at least one holdout task and its mean holdout difference over them
  is not below 0 (the worst task of any type is bounded by max_task_loss above). A type with 1-3 holdout tasks has
  a noisy mean, so the rule errs toward keeping the former text: a type that truly gains a little is sometimes held
  back (its text stays; run a sweep with sweep.mutate_task_types=[that type] to settle it), a type that lost on
  its own tasks never moves. `held_types` names the types held back and why; promoted_synth.yaml keeps their
  baseline texts. A winner whose every changed type is held back promotes nothing.
- Multiplicity: the family is the top-k candidates the train filter passed (fixed by train data before the
  holdout runs). Holm's step-down over their holdout p-values at the look's level (experiments.stats:
  every conclusion a study ever made spends from one alpha) keeps the chance that any candidate without a real
  mean improvement is promoted at or below alpha over the study's life.

Rules "bound" and "floor" are fixed-task statements, kept for comparison (bench/power/optimizer_sim.py's "today"):
"bound" takes its SE from run noise alone (sigma from the noise floor, pooled with the holdout's own repeats) and
"floor" asks diff > 2 SE. They say whether these m tasks, as they are, scored higher than run noise explains; a
task x variant interaction counts as effect. Their rows are labelled so, `Promotion.pick` names their choice, and
`Promotion.winner` (the one that moves a registry alias) is None under them. With no noise measured (sigma 0 and
no holdout repeats) "bound" tests nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from experiments.config import BASELINE
from experiments.stats import CostDiff, CostGuard, NoiseFloor, compare, first_level

from ._confirmation import HoldoutScores, HoldoutTest, confirm
from ._costs import holdout_cost, holdout_cost_diffs
from ._evidence import task_evidence, task_sources
from ._futility import HoldoutBlocks, futility_stop, passes_train_filter
from ._verdict import HoldoutRow, Promotion


@dataclass(frozen=True)
class Candidate:
    """A complete search trial as promotion sees it."""

    number: int
    hash: str
    operator: str
    train_mean: float
    train_scores: Mapping[str, float] = field(default_factory=dict)
    instructions: Mapping[str, str] = field(default_factory=dict)
    runs: int = 1  # train runs behind train_scores (more after the final race)


def candidates(trials: Sequence[Any], baseline_hash: str) -> list[Candidate]:
    """COMPLETE trials that are not the baseline, not a duplicate and not the baseline's text, best train mean
    first (the earlier trial on a tie). `trials` are Optuna FrozenTrials."""
    out = [Candidate(t.number, t.user_attrs.get("instruction_hash", ""), t.user_attrs.get("operator", "?"), t.value,
                     dict(t.user_attrs.get("task_scores", {})), dict(t.user_attrs.get("instructions", {})))
           for t in trials
           if t.state.name == "COMPLETE" and t.user_attrs.get("operator") != BASELINE
           and t.user_attrs.get("duplicate_of") is None and t.user_attrs.get("instruction_hash") != baseline_hash]
    return ranked(out)


def holdout_runs(sweep: Any, n_holdout: int) -> int:
    """Task runs the holdout confirmation spends (sweep: SweepConfig): the baseline's runs and each top-k
    candidate's, on every holdout task."""
    if n_holdout < 1 or sweep.holdout_top_k < 1:
        return 0
    return n_holdout * (sweep.holdout_baseline_runs + sweep.holdout_top_k * sweep.holdout_candidate_runs)


def ranked(cands: Sequence[Candidate]) -> list[Candidate]:
    """Best train mean first, the earlier trial on a tie: the order the top-k for the holdout is taken in."""
    return sorted(cands, key=lambda c: (-c.train_mean, c.number))


def race_runs(sweep: Any, n_train: int) -> int:
    """Task runs the final race spends: each of the top race_top candidates once more on every train task."""
    return max(sweep.race_top, 0) * n_train if n_train > 0 else 0


def race(cands: Sequence[Candidate], reruns: Mapping[str, Sequence[Mapping[str, float]]]) -> list[Candidate]:
    """The candidates re-ranked after the final race on comparable evidence: a candidate with re-runs (hash -> runs
    on the train split) is scored by the per-task mean of its trial's run and those re-runs, over the tasks every
    run has; candidates are ranked among those with as many runs (more runs first), then by that mean.

    Why: the top of a search ranking is where its noise collects (the best of many one-run means is high partly by
    luck). Re-running the leaders shrinks both their run noise and that selection luck; a candidate left with one
    run (not raced, or its race run failed) keeps a selection-inflated mean and so cannot overtake a raced one on
    it (the raced ones led it on one run each). The averaged scores are also what the train filter tests; the
    holdout still confirms alone."""
    out = []
    for c in cands:
        more = [r for r in reruns.get(c.hash, ()) if r]
        both = HoldoutScores.of_runs([c.train_scores, *more]) if more else None  # per-task means, common tasks
        if both is not None and both.scores:
            c = dataclasses.replace(c, train_mean=both.mean, train_scores=both.scores, runs=both.runs)
        out.append(c)
    return sorted(out, key=lambda c: (-c.runs, -c.train_mean, c.number))


def train_filtered(top: Sequence[Candidate], reference: Mapping[str, float], *, train_floor: float,
                   alpha: float, train_filter: str = "wilcoxon") -> tuple[str, ...]:
    """The hashes of the top candidates whose train comparison passes the filter `train_filter`
    (passes_train_filter): the family the holdout tests (known before any holdout run, so the look's level is fixed
    before the test)."""
    return tuple(c.hash for c in top
                 if passes_train_filter(compare(c.train_scores, reference, floor=train_floor, alpha=alpha),
                                        train_filter))


def decide_look(top: Sequence[Candidate], reference: Mapping[str, float], baseline_holdout: HoldoutScores | None,
                holdout: Mapping[str, HoldoutScores], *, sweep: Any, noise: NoiseFloor, level: float,
                train_floor: float, attrs: Mapping[str, Any], base_key: str, baseline: Mapping[str, str],
                holdout_tasks: Sequence[Any], benchmark_tasks: Sequence[Any], blocks: HoldoutBlocks,
                preferences: Mapping[str, Mapping[str, float]] | None = None) -> Promotion:
    """The verdict of one holdout look as the sweep reaches it (decide, with sweep: SweepConfig): the holdout test
    of sweep.holdout_test at the look's `level` and the noise floor, the cost guard (sweep.cost_metric,
    sweep.max_cost_increase) on the holdout costs stored in the study's `attrs`, the per-type evidence of the
    `holdout_tasks` (TaskSpec), each task's source read off `benchmark_tasks` (the benchmark's task specs), the
    futility stop of `blocks`, and the pairwise `preferences` (sweep.holdout_compare=pairwise)."""
    test = HoldoutTest.of(noise, alpha=level, rule=sweep.holdout_test)
    cost_diffs = {h: holdout_cost_diffs(attrs, h, base_key) for h in holdout}
    guard = CostGuard(sweep.cost_metric, sweep.max_cost_increase)  # decide tests it at the look's level
    costs = {h: holdout_cost(attrs, h, sweep.cost_metric) for h in [*holdout, base_key]}
    return decide(top, reference, baseline_holdout, holdout, train_floor=train_floor, alpha=sweep.alpha, test=test,
                  guard=guard, costs=costs, base_key=base_key, cost_diffs=cost_diffs,
                  max_task_loss=sweep.max_task_loss, task_types={t.id: t.task_type for t in holdout_tasks},
                  baseline_instructions=baseline, train_filter=sweep.train_filter, futility_block=blocks.block,
                  order=blocks.order, futility_power=blocks.power, preferences=preferences, task_sources=task_sources(benchmark_tasks))


def decide(top: Sequence[Candidate], reference: Mapping[str, float], baseline_holdout: HoldoutScores | None,
           holdout: Mapping[str, HoldoutScores], *, train_floor: float, alpha: float, test: HoldoutTest,
           guard: CostGuard | None = None, costs: Mapping[str, Mapping[str, float]] | None = None,
           base_key: str = "", cost_diffs: Mapping[str, Mapping[str, CostDiff]] | None = None,
           max_task_loss: float | None = None, task_types: Mapping[str, str] | None = None,
           baseline_instructions: Mapping[str, str] | None = None, train_filter: str = "wilcoxon",
           futility_block: int = 0, order: Sequence[str] | None = None, futility_power: float = 0.8,
           preferences: Mapping[str, Mapping[str, float]] | None = None,
           task_sources: Mapping[str, str] | None = None) -> Promotion:
    """The verdict on the top candidates (see the module docstring). baseline_holdout None: no holdout ran (no
    holdout tasks or no candidate), so no row and no winner; a failed baseline holdout fails every row. `alpha` is
    the train filter's level; test.alpha the holdout look's.

    The cost guard (experiments.stats.CostGuard; sweep.cost_metric, sweep.max_cost_increase): a confirmed candidate
    is promoted only if its holdout cost per task (`costs`: hash -> task -> cost, the baseline's under `base_key`)
    is shown below the limit at the holdout claim's level (test.alpha); one held back keeps `wins` (the quality
    claim stands) and its row says `held_by_cost`. `cost_diffs` (hash -> metric -> CostDiff) are reported only.

    Every row with a holdout difference carries its worst holdout task; with `max_task_loss` (composite points) a
    confirmed row whose worst task lost more is `held_by_task_loss`. With `task_types` (holdout task id -> type) and
    `baseline_instructions`, each row carries its per-type differences and the changed types whose alias is held
    back (held_types); a winner is a confirmed row that `promotes` something. With `task_sources` (holdout task id
    -> "generated" / "own", task_sources) each row carries its differences per source (source_diffs): described in
    the summary, never tested apart.

    `train_filter` (sweep.train_filter: wilcoxon | positive | none) chooses the family the holdout tests
    (passes_train_filter). With `futility_block` > 0 and the holdout tasks' `order` (holdout_order), a candidate
    that futility_stop stops after a block but the last (its bound at the first look's level of `alpha`,
    experiments.stats.first_level, and at `futility_power`, as HoldoutBlocks sets it) is stopped: its row carries the mean
    over the tasks it ran, no p, `stopped_after`, and is not confirmed (Holm counts it as p = 1). The sweep runs no
    further block of a stopped candidate; given every task's scores, decide stops it at the same block.

    `preferences` (sweep.holdout_compare=pairwise: hash -> holdout task -> the candidate's mean preference over its
    judged pairs with the baseline, in [-1, 1]): a candidate found there is tested by the one-sided exact sign-flip
    test over the tasks it ran on those preferences (experiments.stats.signflip_test), in place of the paired t on
    the score differences (shown beside it); Holm and the level as above."""
    if baseline_holdout is None or not top:
        return Promotion((), None)
    rows, paired = [], []
    for c in top:
        cmp = compare(c.train_scores, reference, floor=train_floor, alpha=alpha)
        hold = holdout.get(c.hash) if baseline_holdout.scores else HoldoutScores(None, baseline_holdout.error)
        if hold is None and not passes_train_filter(cmp, train_filter):  # cut before the holdout: nothing ran
            hold = HoldoutScores(None, None, runs=0)
        hold = hold or HoldoutScores(None, "not evaluated on the holdout")
        stop = futility_stop(hold.scores, baseline_holdout.scores, order or (), futility_block,
                             level=first_level(alpha), power=futility_power)
        cand_s, base_s = hold.scores, baseline_holdout.scores
        if stop is not None:  # the tasks it ran before the stop (the sweep ran no more of this candidate)
            ran = set(list(order or ())[: stop.after])
            cand_s = {t: v for t, v in cand_s.items() if t in ran}
            base_s = {t: v for t, v in base_s.items() if t in ran}
        elif cand_s is not None and base_s is not None and set(cand_s) != set(base_s):  # a later block's baseline
            common = set(cand_s) & set(base_s)
            cand_s = {t: v for t, v in cand_s.items() if t in common}
            base_s = {t: v for t, v in base_s.items() if t in common}
        mean = sum(cand_s.values()) / len(cand_s) if cand_s else None
        bmean = sum(base_s.values()) / len(base_s) if base_s else None
        diff = (mean - bmean) if (mean is not None and bmean is not None) else None
        row = HoldoutRow(c.number, c.hash, c.operator, c.train_mean, mean, diff, cmp, False, hold.error,
                         runs=(hold.runs, baseline_holdout.runs), train_filter=train_filter)
        if diff is not None:
            row = dataclasses.replace(row, max_task_loss=max_task_loss, **task_evidence(
                cand_s, base_s, task_types=task_types, instructions=c.instructions, baseline=baseline_instructions,
                sources=task_sources or {}))
        if stop is not None:
            row = dataclasses.replace(row, holdout_diff=stop.mean, holdout_n=stop.after, stopped_after=stop.after,
                                      futility_of=stop.of)
        rows.append(row)
        paired.append((cand_s, base_s) if diff is not None and stop is None else None)
    test = test.pooled([baseline_holdout, *(holdout.get(c.hash) for c in top)])
    rows = confirm(rows, paired, test, preferences)
    costs = costs or {}
    if guard is not None:
        guard = dataclasses.replace(guard, alpha=test.alpha)  # the confidence the quality claim uses
        rows = [dataclasses.replace(r, cost=guard.check(costs.get(r.hash, {}), costs.get(base_key, {})))
                if r.holdout_diff is not None else r for r in rows]
    rows = [dataclasses.replace(r, cost_diffs=dict((cost_diffs or {}).get(r.hash, {}))) for r in rows]
    winners = [r for r in rows if r.promotes]
    pick = max(winners, key=lambda r: (r.holdout_mean, -r.trial)) if winners else None
    return Promotion(tuple(rows), pick if test.over_tasks else None, pick)

