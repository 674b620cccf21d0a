"""The Optuna objective of a synthesis-instruction sweep, with the harness injected.

objective(trial) asks the search (experiments.search: ProjectSearch unless another Search is given) which operator,
parent and task types the trial tries, what reflection reads and what a child must show first, asks the mutators
for a candidate, and scores it with experiments.runs.evaluate_candidate on the runner it was given
(experiments.runs: HarnessRunner on the real harness, a scripted runner in tests; both return TaskOutcome).
Only synthesis and evaluation depend on the instruction, so the objective reuses the prepared contexts it is
given (or prepares afresh per trial).

The objective is the mean over train tasks of each task's independent score (TaskOutcome.score: the kept text
re-scored with judge seeds of its own); the wiggum loop's own best (selection_score) is kept beside it, and the
gap between the two is logged per trial as the selection bias. The judge replies that could not be read are
counted per trial (user attr judge_failures, the ledger's column); a task whose judged score is missing fails the
trial (experiments.runs), as any failed run does, and counts toward sweep.failure_rate_stop.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import optuna

from experiments.config import BASELINE, ExperimentConfig, Task
from experiments.runs import (SERIAL, CandidateEval, FailedRun, Runner, RunPool, TrialFailed, baseline_instructions,
                              evaluate_candidate, llm_calls)

from experiments.search import (COMPOSE, Acceptance, Evaluated, ProjectSearch, Search, SearchState, candidate_hash,
                                instruction_hashes)


@dataclass(frozen=True)
class TrialOutcome:
    """What one trial did, for MLflow artifacts and the summary (the study's user attrs hold the rest)."""

    number: int
    operator: str  # the operator used (credited); see operator_requested
    instructions: dict[str, str]
    hash: str
    parent_hash: str | None
    note: str = ""
    evaluation: CandidateEval | None = None
    duplicate_of: int | None = None
    value: float | None = None
    pruned: bool = False
    error: str | None = None
    elapsed_s: float = 0.0
    llm_calls: int = 0
    operator_requested: str = ""  # what the sampler asked for
    gate: dict | None = None  # experiments.search's GateDecision.as_attr() when the minibatch gate or race ran
    failed_run: FailedRun | None = None  # the harness run that failed the trial (TrialFailed.failed)


# per-type searches run trial k with seed cfg.seed + TRIAL_SEED_OFFSET + k: clear of the baseline repeats' and the
# holdout's cfg.seed + small k
TRIAL_SEED_OFFSET = 100_000

ProposeFn = Callable[..., Any]  # (name, ctx, llm, *, seen) -> mutators.Candidate (operator = the one used)


@dataclass(frozen=True)
class Proposal:
    """A candidate from one operator request: the instructions, its parent, a note, and the operator used."""

    instructions: dict[str, str]
    parent_hash: str | None
    note: str
    operator: str  # the operator that made the text (see operator_used); may differ from the one asked for
    by_type: dict[str, str] = field(default_factory=dict)  # task_type -> operator used for it
    parent_hashes: tuple[str, ...] = ()  # both parents of a merge (parent_hash is the first)


def operator_used(by_type: Mapping[str, str]) -> str:
    """One label for the operators that made a candidate: the name when every task type used the same one,
    else the distinct names joined by '+' (a fallback on one type shows), 'none' when nothing was made."""
    names = sorted(set(by_type.values()))
    return "+".join(names) if names else "none"


def _default_propose() -> tuple[ProposeFn, Callable[..., Any], type]:
    from mutators import MutationContext, MutationFailed, propose

    return propose, MutationContext, MutationFailed


def _merge_args(a: str, b: str, anc: str) -> str | None:
    """One task type of a merge: the side that changed when only one did (GEPA), None when both did (the
    three-way merge decides), a when both sides hold the same text."""
    if a == b or b == anc:
        return a
    if a == anc:
        return b
    return None


# -- the objective -----------------------------------------------------------------------------------


class Objective:
    """objective(trial) -> mean composite over the train tasks. Works with a real trial or a FixedTrial.

    The baseline trial is marked by the user attr operator="baseline" (enqueued); other trials choose the
    operator with suggest_categorical("operator", cfg.sweep.operators). A candidate whose hash was already
    evaluated reuses that value (duplicate_of set) instead of re-running. Raises optuna.TrialPruned when the
    pruner stops it (the partial mean is in the user attr partial_value) and TrialFailed on a failed run.
    """

    def __init__(
        self,
        exp: ExperimentConfig,
        runner: Runner,
        tasks: Sequence[Task],
        *,
        contexts: Mapping[str, Any] | None = None,
        state: Callable[[], SearchState] | SearchState | None = None,
        propose: ProposeFn | None = None,
        mutation_llm: Any = None,
        mutate_types: Sequence[str] | None = None,
        pool: RunPool | None = None,
        sigma: Callable[[], float | None] | float | None = None,
        search: Search | None = None,
    ) -> None:
        self.exp = exp
        self._sigma = sigma  # run-to-run sd of one task score, for the gate (repeats or a calibration)
        self.runner = runner
        self.tasks = tuple(tasks)
        self.contexts = contexts
        self.pool = pool or SERIAL
        self.types = tuple(mutate_types or sorted({t.task_type for t in self.tasks}))
        self.baseline = baseline_instructions(exp, self.types)
        self.search = search if search is not None else ProjectSearch(exp.sweep, self.types)
        self._state = state
        self._propose = propose
        self.mutation_llm = mutation_llm
        self.last: TrialOutcome | None = None

    def state(self) -> SearchState:
        s = self._state() if callable(self._state) else self._state
        return s if s is not None else SearchState(self.baseline)

    def _propose_fns(self) -> tuple[ProposeFn, Callable[..., Any], type]:
        if self._propose is not None:
            try:
                from mutators import MutationContext, MutationFailed
            except ImportError:
                return self._propose, _PlainContext, Exception
            return self._propose, MutationContext, MutationFailed
        return _default_propose()

    def sigma(self) -> float | None:
        s = self._sigma() if callable(self._sigma) else self._sigma
        return float(s) if s is not None and s > 0 else None

    def trial_seed(self, slot: int, is_baseline: bool) -> int:
        """The runs' seed of a trial: cfg.seed (the same seed for every candidate, so a joint search compares texts
        on the same draws and a response cache replays a repeated text); in a per-type search a seed of its own per
        trial, so a text kept while another type is edited is a new measurement there, not a replay."""
        if is_baseline or self.exp.sweep.search == "joint":
            return self.exp.seed
        return self.exp.seed + TRIAL_SEED_OFFSET + slot

    def candidate(self, operator: str, number: int, parent: Evaluated | None = None) -> Proposal:
        """The candidate one operator makes from the parent (the best train mean unless given), for each mutated
        task type, and who made it."""
        state = self.state()
        parent = parent if parent is not None else state.parent()
        base = dict(parent.instructions) if parent else dict(self.baseline)
        propose, make_ctx, failed_type = self._propose_fns()
        notes, used, failed = [], {}, 0
        types = self.search.components(number)  # every other type keeps the parent's text
        for tt in types:
            try:
                cand = propose(operator, make_ctx(**self.search.reflection(state, tt, parent, number)),
                               self.mutation_llm, seen=state.seen_for(tt))
            except failed_type as exc:
                notes.append(f"{tt}: {exc}")
                failed += 1
                continue
            if cand.text and cand.text.strip():
                base[tt] = cand.text
            used[tt] = cand.operator
            notes.append(f"{tt}: {cand.note}" if cand.note else f"{tt}: changed")
        if failed == len(types):
            raise TrialFailed(f"operator {operator!r} produced no instruction: {'; '.join(notes)[:400]}")
        return Proposal(base, parent.hash if parent else candidate_hash(self.baseline), "; ".join(notes)[:500],
                        operator_used(used), used)

    def merge_candidate(self, a: Evaluated, b: Evaluated, anc: Evaluated, number: int) -> Proposal:
        """GEPA's merge of two front candidates over their common ancestor: per task type the side that changed,
        and where both changed, mutators.propose_pair("merge") (three-way sentence merge, fallback credited)."""
        from mutators import MutationContext, propose_pair

        state = self.state()
        out, notes, used = dict(a.instructions), [], {}
        for tt in self.types:
            ta, tb = a.instructions.get(tt, self.baseline[tt]), b.instructions.get(tt, self.baseline[tt])
            tc = anc.instructions.get(tt, self.baseline[tt])
            pick = _merge_args(ta, tb, tc)
            if pick is not None:
                out[tt] = pick
                notes.append(f"{tt}: took the side that changed" if ta != tb else f"{tt}: same on both sides")
                continue
            ctx = MutationContext(base=ta, other=tb, ancestor=tc, task_type=tt, max_chars=self.exp.sweep.max_chars,
                                  seed=self.exp.sweep.seed * 100003 + number)
            cand = propose_pair("merge", ctx, self.mutation_llm, seen=state.seen_for(tt))
            out[tt], used[tt] = cand.text, cand.operator
            notes.append(f"{tt}: {cand.note}")
        label = operator_used(used) if used else "merge"
        return Proposal(out, a.hash, f"merge of #{a.number} and #{b.number} over #{anc.number}; " + "; ".join(notes)[:440],
                        label, used, (a.hash, b.hash))

    def _choose(self, trial: Any, number: int) -> tuple[str, Any]:
        """(operator requested, pick) for a search trial: the search's step (experiments.search), Optuna's TPE
        suggesting the operator where the search asks for it."""
        step = self.search.step(self.state(), number, lambda ops: trial.suggest_categorical("operator", ops))
        return step.requested, step.pick

    def _accept(self, trial: Any, acc: Acceptance, outcome: dict):
        """The checkpoint of the search's acceptance test: the decision on the child's scores so far, recorded in
        the user attr "gate" (a race also its leader's trial and every look's figures) and the outcome, and whether
        the rest of the train split runs; and the list it appends the decisions to."""
        decided: list[Any] = []

        def go(scores: Sequence[Any]) -> bool:
            decision = acc.decide({s.task_id: s.score for s in scores})
            decided.append(decision)
            attr = {**decision.as_attr(), "parent": acc.against.hash}
            if acc.rule == "race":
                attr.update(leader_trial=acc.against.number, reason=decision.reason, looks=[
                    {"n": d.n, "diff": round(d.diff, 4), "bound": round(d.bound, 4), "passed": d.passed}
                    for d in decided])
            else:
                attr["reason"] = decision.reason
            trial.set_user_attr("gate", attr)
            outcome["gate"] = decision.as_attr()
            return decision.passed

        return go, decided

    def __call__(self, trial: Any) -> float:
        t0 = time.perf_counter()
        calls0 = llm_calls(self.runner)
        number = int(getattr(trial, "number", 0))
        # the seeds follow the trial's slot (experiments.storage.trial_slot): a copy queued again after a kill makes
        # the choices of the trial it replaces; without a kill the slot is the number
        slot = int(trial.user_attrs.get("slot", number))
        is_baseline = trial.user_attrs.get("operator") == BASELINE
        requested, pick = (BASELINE, None) if is_baseline else self._choose(trial, slot)
        proposal = Proposal(dict(self.baseline), None, "baseline instruction (cfg.synth)", BASELINE)
        outcome = dict(number=number, operator=requested, operator_requested=requested,
                       instructions=proposal.instructions, hash=candidate_hash(proposal.instructions),
                       parent_hash=None, note=proposal.note)
        # the operator asked for is recorded at once: a trial that fails inside propose still says what it tried
        trial.set_user_attr("operator_requested", requested)
        try:
            if requested == "merge":
                proposal = self.merge_candidate(*pick, slot)
            elif requested == COMPOSE:
                proposal = Proposal(dict(pick.instructions), pick.hash, f"composition of each task type's best text "
                                    f"(trial #{pick.number} and before), run afresh", COMPOSE)
            elif not is_baseline:
                proposal = self.candidate(requested, slot, parent=pick)
            instructions = proposal.instructions
            h = candidate_hash(instructions)
            outcome.update(instructions=instructions, hash=h, parent_hash=proposal.parent_hash, note=proposal.note,
                           operator=proposal.operator)
            trial.set_user_attr("operator", proposal.operator)  # the one used: ledger, plots and MLflow credit it
            if proposal.by_type:
                trial.set_user_attr("operator_by_type", proposal.by_type)
            trial.set_user_attr("instruction_hash", h)
            trial.set_user_attr("instruction_hashes", instruction_hashes(instructions))
            trial.set_user_attr("parent_hash", proposal.parent_hash)
            if proposal.parent_hashes:
                trial.set_user_attr("parent_hashes", list(proposal.parent_hashes))
            trial.set_user_attr("instructions", instructions)
            trial.set_user_attr("note", proposal.note)
            known = self.state().hash_values.get(h)
            if known is not None and not is_baseline and requested != COMPOSE:
                trial.set_user_attr("duplicate_of", known[0])
                trial.set_user_attr("elapsed_s", round(time.perf_counter() - t0, 3))
                trial.set_user_attr("llm_calls", llm_calls(self.runner) - calls0)
                self.last = TrialOutcome(**outcome, duplicate_of=known[0], value=known[1],
                                         elapsed_s=time.perf_counter() - t0, llm_calls=llm_calls(self.runner) - calls0)
                return known[1]
            state = self.state()
            parents = [e for e in map(state.by_hash, proposal.parent_hashes or (proposal.parent_hash,)) if e and e.scores]
            first, checkpoint, decided = [], None, []
            acc = None if is_baseline else self.search.acceptance(state, parents, slot, [t.id for t in self.tasks],
                                                                   self.sigma)
            if acc is not None:  # the baseline trial, and a first proposal without a complete leader, run all
                go, decided = self._accept(trial, acc, outcome)
                first, checkpoint = list(acc.first), ((acc.looks, go) if acc.looks else None)
            rest = [i for i in range(len(self.tasks)) if i not in first]
            if not is_baseline:
                random.Random(slot).shuffle(rest)
            # one queue, gate first: at concurrency N the rest starts while the gate's last tasks run
            ev = evaluate_candidate(
                instructions, self.tasks, self.runner, contexts=self.contexts, seed=self.trial_seed(slot, is_baseline),
                trial=trial,
                run_prefix=f"{self.exp.sweep.name}-t{number}", pool=self.pool, order=first + rest,
                checkpoint=checkpoint,
            )
            if ev.stopped:
                return self._gated_out(trial, decided[-1], ev, outcome, t0, calls0)
        except TrialFailed as exc:
            trial.set_user_attr("fail_reason", str(exc)[:500])
            trial.set_user_attr("judge_failures", int(exc.judge_failures))
            trial.set_user_attr("elapsed_s", round(time.perf_counter() - t0, 3))
            trial.set_user_attr("llm_calls", llm_calls(self.runner) - calls0)
            self.last = TrialOutcome(**outcome, error=str(exc), elapsed_s=time.perf_counter() - t0,
                                     llm_calls=llm_calls(self.runner) - calls0, failed_run=exc.failed)
            raise
        _record_eval(trial, ev)
        elapsed, calls = time.perf_counter() - t0, llm_calls(self.runner) - calls0
        trial.set_user_attr("elapsed_s", round(elapsed, 3))
        trial.set_user_attr("llm_calls", calls)
        self.last = TrialOutcome(**outcome, evaluation=ev, value=ev.mean, pruned=ev.pruned, elapsed_s=elapsed,
                                 llm_calls=calls)
        if ev.pruned:
            trial.set_user_attr("partial_value", ev.mean)
            _record_abandoned(trial, ev)
            raise optuna.TrialPruned(f"pruned after {len(ev.scores)}/{len(self.tasks)} tasks (mean {ev.mean:.3f})")
        return ev.mean

    def _gated_out(self, trial: Any, decision: Any, ev: CandidateEval, outcome: dict, t0: float, calls0: int) -> float:
        """Record a candidate the gate stopped and raise optuna.TrialPruned: state PRUNED (a decision on partial
        scores, as the pruner's; FAIL would count toward sweep.failure_rate_stop), user attrs gated_out and
        fail_reason (the ledger's status "gated" and reason, MLflow's fail_reason tag) and partial_value."""
        _record_eval(trial, ev)
        _record_abandoned(trial, ev)
        elapsed, calls = time.perf_counter() - t0, llm_calls(self.runner) - calls0
        trial.set_user_attr("gated_out", True)  # gated or raced out: the ledger's status "gated", the summary's count
        if getattr(decision, "rule", "gate") == "race":
            trial.set_user_attr("raced_out", True)
        trial.set_user_attr("fail_reason", decision.reason[:500])  # "gated out on g task(s): ..." / "raced out after"
        trial.set_user_attr("partial_value", ev.mean)
        trial.set_user_attr("elapsed_s", round(elapsed, 3))
        trial.set_user_attr("llm_calls", calls)
        self.last = TrialOutcome(**outcome, evaluation=ev, value=ev.mean, pruned=True, elapsed_s=elapsed,
                                 llm_calls=calls)
        raise optuna.TrialPruned(decision.reason)


@dataclass(frozen=True)
class _PlainContext:
    base: str
    history: tuple = ()
    feedback: tuple = ()
    pool: tuple = ()
    task_type: str = "research"
    seed: int = 0
    max_chars: int = 1200


def _record_abandoned(trial: Any, ev: CandidateEval) -> None:
    """Runs in flight when the trial stopped (pruned or gated out): cut at their next model call, dropped. Their
    uncached calls are in the trial's llm_calls (spent); abandoned_calls says how many, so llm_calls -
    abandoned_calls is the same at any concurrency."""
    if ev.abandoned:
        trial.set_user_attr("abandoned_tasks", ev.abandoned)
        trial.set_user_attr("abandoned_calls", ev.abandoned_calls)


def _record_eval(trial: Any, ev: CandidateEval) -> None:
    trial.set_user_attr("task_scores", {s.task_id: round(s.score, 4) for s in ev.scores})
    worst = sorted(ev.scores, key=lambda s: s.score)
    trial.set_user_attr("feedback", [
        [s.task_id, s.task_type, round(s.score, 3), (s.feedback + (" Weaknesses: " + "; ".join(s.weaknesses)
                                                                   if s.weaknesses else ""))[:600]]
        for s in worst
    ])
    trial.set_user_attr("dimensions", {k: round(v, 4) for k, v in ev.dimension_means().items()})
    trial.set_user_attr("judge_sd", round(sum(s.judge_sd for s in ev.scores) / max(len(ev.scores), 1), 4))
    trial.set_user_attr("smoke", any(s.smoke for s in ev.scores))
    # the objective is the independent re-score; the wiggum loop's own best is kept beside it
    trial.set_user_attr("selection_scores", {s.task_id: round(s.selection_score if s.selection_score is not None
                                                              else s.score, 4) for s in ev.scores})
    trial.set_user_attr("selection_mean", round(ev.selection_mean, 4))
    trial.set_user_attr("selection_bias", round(ev.selection_bias, 4))
    trial.set_user_attr("rescored", all(s.rescored for s in ev.scores) if ev.scores else False)
    trial.set_user_attr("judge_failures", ev.judge_failures)  # judge replies that could not be read, all tasks
    from experiments.stats import COST_METRICS, cost_by_task

    trial.set_user_attr("task_costs", {m: {t: round(v, 4) for t, v in cost_by_task([ev.scores], m).items()}
                                       for m in COST_METRICS})


def make_objective(exp: ExperimentConfig, runner: Runner, tasks: Sequence[Task] | None = None, **kwargs: Any) -> Objective:
    """The objective for exp's train split (or the given tasks) with the runner injected."""
    if tasks is None:
        from experiments.config import load_tasks, split

        tasks = split(load_tasks(exp.benchmark), "train")
    return Objective(exp, runner, tasks, **kwargs)
