"""The Optuna objective of a synthesis-instruction sweep, with the harness injected.

A runner is anything with `prepare(task) -> prepared` and `finish(prepared, *, instructions, run_id, criteria,
seed) -> TaskOutcome` (experiments.outcome: the typed seam). `HarnessRunner` adapts harness.agent.Harness;
tests use a scripted runner that builds the same TaskOutcome. Only synthesis and evaluation depend on the
instruction, so the objective reuses the prepared contexts it is given (or prepares afresh per trial).

The objective is the mean over train tasks of each task's independent score (TaskOutcome.score: the kept text
re-scored with judge seeds of its own); the wiggum loop's own best (selection_score) is kept beside it, and the
gap between the two is logged per trial as the selection bias.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, Sequence

import optuna

from experiments.benchmark import Task
from experiments.config import ExperimentConfig
from experiments.outcome import TaskOutcome, outcome_from_result
from experiments.pool import SERIAL, RunPool

BASELINE = "baseline"


class Runner(Protocol):
    def prepare(self, task: str) -> Any: ...

    def identity(self) -> dict[str, Any]:
        """What answers: role -> {backend, model, file + sha256 | digest} (experiments.fingerprint)."""
        ...

    def llm_calls(self) -> int:
        """Uncached model calls made so far."""
        ...

    def finish(self, prepared: Any, *, instructions: Mapping[str, str], run_id: str | None = None,
               criteria: Mapping[str, Any] | None = None, seed: int = 0) -> TaskOutcome: ...

    # Optional (experiments.calibrate needs it for the judge variance):
    # rescore(prepared, output_text, *, criteria=None, seed=0) -> TaskOutcome scores a fixed text again with the
    # harness's evaluator role and config (no synthesis, no wiggum loop), judge seeds from `seed`.


class TrialFailed(RuntimeError):
    """The candidate could not be evaluated (a harness run failed or raised, or no mutation was possible)."""


@dataclass(frozen=True)
class TaskScore:
    task_id: str
    task_type: str
    score: float
    dimensions: dict[str, float] = field(default_factory=dict)
    judge_sd: float = 0.0
    feedback: str = ""
    weaknesses: tuple[str, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    llm_calls: int = 0
    cached_calls: int = 0
    output_text: str = ""
    output_path: str | None = None
    smoke: bool = False
    selection_score: float | None = None  # the wiggum loop's best round (chosen by the same judge sample)
    rescored: bool = False  # score is an independent judge sample of the kept text
    trace_path: str | None = None  # the run's Chrome trace file (an MLflow trace is built from it)


@dataclass(frozen=True)
class CandidateEval:
    scores: tuple[TaskScore, ...]
    pruned: bool = False
    abandoned: int = 0  # tasks in flight when the trial pruned: they finished, their results were dropped

    @property
    def mean(self) -> float:
        return sum(s.score for s in self.scores) / len(self.scores) if self.scores else float("nan")

    def by_task(self) -> dict[str, float]:
        return {s.task_id: s.score for s in self.scores}

    @property
    def selection_mean(self) -> float:
        """Mean of the wiggum loop's own best-round scores (inflated by selection when the judge samples)."""
        vals = [s.selection_score if s.selection_score is not None else s.score for s in self.scores]
        return sum(vals) / len(vals) if vals else float("nan")

    @property
    def selection_bias(self) -> float:
        """selection_mean - mean: how much the loop's own choice flattered its kept texts, on average."""
        return self.selection_mean - self.mean if self.scores else float("nan")

    def dimension_means(self) -> dict[str, float]:
        sums: dict[str, list[float]] = {}
        for s in self.scores:
            for k, v in s.dimensions.items():
                sums.setdefault(k, []).append(float(v))
        return {k: sum(v) / len(v) for k, v in sums.items()}


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
    gate: dict | None = None  # experiments.optimizer.GateDecision.as_attr() when the minibatch gate ran


# -- candidate identity ------------------------------------------------------------------------------


def instruction_hashes(instructions: Mapping[str, str]) -> dict[str, str]:
    """task_type -> mutators' instruction_hash of its text: the hash `propose` checks `seen` against."""
    from mutators.base import instruction_hash

    return {tt: instruction_hash(text) for tt, text in sorted(instructions.items())}


def candidate_hash(instructions: Mapping[str, str]) -> str:
    """Hash of a full candidate (task_type -> instruction), built from the per-instruction hashes, so the
    de-duplication of candidates and of the instructions `propose` makes uses one hash function."""
    return hashlib.sha256(json.dumps(instruction_hashes(instructions), sort_keys=True).encode()).hexdigest()[:12]


def baseline_instructions(exp: ExperimentConfig, task_types: Sequence[str]) -> dict[str, str]:
    """cfg.synth.instructions, falling back to harness.synthesis.DEFAULT_INSTRUCTIONS for missing types."""
    out = {tt: text for tt, text in exp.synth.instructions.items() if text and text.strip()}
    missing = [tt for tt in task_types if tt not in out]
    if missing:
        try:
            from harness.synthesis import DEFAULT_INSTRUCTIONS
        except ImportError as exc:
            raise TrialFailed(
                f"synth.instructions has no text for {missing} and harness.synthesis.DEFAULT_INSTRUCTIONS "
                "is not importable; expected instructions for every task type in the benchmark"
            ) from exc
        for tt in missing:
            out[tt] = DEFAULT_INSTRUCTIONS[tt]
    return {tt: out[tt] for tt in sorted(out)}


# -- reading an outcome ------------------------------------------------------------------------------


def task_score(task: Task, outcome: TaskOutcome) -> TaskScore:
    """A runner's TaskOutcome -> TaskScore; raises TrialFailed when the run failed."""
    if not outcome.ok:
        raise TrialFailed(f"task {task.id!r} failed: {outcome.error or outcome.status}")
    u = outcome.usage
    return TaskScore(
        task_id=task.id,
        task_type=task.task_type,
        score=float(outcome.score),
        dimensions=dict(outcome.dimensions),
        judge_sd=outcome.judge_sd,
        feedback=outcome.feedback,
        weaknesses=outcome.weaknesses,
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        latency_s=u.latency_s,
        llm_calls=u.llm_calls,
        cached_calls=u.cached_calls,
        output_text=outcome.output_text,
        output_path=outcome.output_path,
        smoke=outcome.smoke,
        selection_score=outcome.selection_score,
        rescored=outcome.rescored,
        trace_path=outcome.trace_path,
    )


def evaluate_candidate(
    instructions: Mapping[str, str],
    tasks: Sequence[Task],
    runner: Runner,
    *,
    contexts: Mapping[str, Any] | None = None,
    seed: int = 0,
    trial: Any = None,
    run_prefix: str = "run",
    shuffle_seed: int | None = None,
    pool: RunPool | None = None,
    order: Sequence[int] | None = None,
    prune: bool = True,
) -> CandidateEval:
    """Run the harness's finish() on each task with the candidate; report per-task scores to the trial.

    `order` (indices into `tasks`) runs those tasks only, in that order (a gate's minibatch, or the rest after it);
    prune=False reports without asking the pruner (the gate decides instead).

    Step ids are the task's index in `tasks` (stable across trials, as WilcoxonPruner needs); the order of
    evaluation is shuffled per trial when shuffle_seed is given. With a `pool` of N workers up to N tasks run at
    once; their results are taken, reported and checked for pruning in that order on this thread, so scores,
    reports and the prune decision are those of concurrency 1. A trial that should prune starts nothing more;
    the tasks already in flight finish and are dropped (CandidateEval.abandoned).
    """
    if order is None:
        order = list(range(len(tasks)))
        if shuffle_seed is not None:
            random.Random(shuffle_seed).shuffle(order)
    order = list(order)

    def run(i: int) -> TaskOutcome:
        task = tasks[i]
        prepared = contexts[task.id] if contexts is not None else runner.prepare(task.task)
        return runner.finish(prepared, instructions=dict(instructions), run_id=f"{run_prefix}-{task.id}",
                             criteria=task.criteria(), seed=seed)

    scores: list[TaskScore] = []
    with (pool or SERIAL).ordered(run, order) as results:
        for i, fut in results:
            task = tasks[i]
            try:
                outcome = fut.result()
            except TrialFailed:
                raise
            except Exception as exc:
                raise TrialFailed(f"task {task.id!r} raised {type(exc).__name__}: {exc}") from exc
            if not isinstance(outcome, TaskOutcome):
                raise TypeError(f"runner.finish must return experiments.outcome.TaskOutcome, got "
                                f"{type(outcome).__name__}")
            scores.append(task_score(task, outcome))
            if trial is not None:
                trial.report(scores[-1].score, step=i)
                if prune and len(scores) < len(order) and trial.should_prune():
                    results.cancel()
                    return CandidateEval(tuple(scores), pruned=True, abandoned=results.abandoned)
    return CandidateEval(tuple(scores))


# -- search state for the mutators ---------------------------------------------------------------------


@dataclass(frozen=True)
class Evaluated:
    number: int
    instructions: dict[str, str]
    hash: str
    value: float
    feedback: tuple[tuple[str, str, float, str], ...] = ()  # (task_id, task_type, score, feedback), worst first
    scores: dict[str, float] = field(default_factory=dict)  # task_id -> score on the train split


@dataclass(frozen=True)
class SearchState:
    baseline: dict[str, str]
    evaluated: tuple[Evaluated, ...] = ()
    # task_type -> instruction_hash of every text tried for it (any trial state, the baseline included): what
    # `propose` must not return again. The same hash function builds candidate_hash.
    seen: Mapping[str, frozenset[str]] = field(default_factory=dict)
    hash_values: dict[str, tuple[int, float]] = field(default_factory=dict)  # hash -> (trial, value) of COMPLETE
    lineage: dict[str, tuple[str, ...]] = field(default_factory=dict)  # candidate hash -> its parents' hashes
    # (operator used, beat its parent on the full train split) per finished search trial, in trial order
    outcomes: tuple[tuple[str, bool], ...] = ()
    merged: tuple[tuple[str, ...], ...] = ()  # parent pairs of the merge trials so far

    def parent(self) -> Evaluated | None:
        """The candidate with the best train mean (the earliest of equals)."""
        return max(self.evaluated, key=lambda e: (e.value, -e.number), default=None)

    def by_hash(self, h: str | None) -> Evaluated | None:
        return next((e for e in self.evaluated if e.hash == h), None)

    def front(self) -> dict[str, int]:
        """Candidate hash -> train tasks it leads, over the per-task Pareto front (experiments.optimizer)."""
        from experiments.optimizer import pareto_leads

        return pareto_leads({e.hash: e.scores for e in self.evaluated if e.scores})

    def choose_parent(self, selection: str, rng: random.Random) -> Evaluated | None:
        """best: the best train mean; pareto: a front member drawn by the number of tasks it leads."""
        from experiments.optimizer import sample_parent

        front = self.front() if selection == "pareto" else {}
        return self.by_hash(sample_parent(front, rng)) if front else self.parent()

    def merge_pair(self, rng: random.Random) -> tuple[Evaluated, Evaluated, Evaluated] | None:
        """Two front members with a common ancestor (experiments.optimizer.merge_pair), not merged before."""
        from experiments.optimizer import merge_pair

        front = self.front()
        means = {e.hash: e.value for e in self.evaluated}
        pair = merge_pair(list(front), self.lineage, means, rng, done=self.merged)
        if pair is None:
            return None
        a, b, anc = (self.by_hash(h) for h in pair)
        return (a, b, anc) if a and b and anc else None

    @property
    def last_won(self) -> bool:
        """The last finished search trial beat its parent (GEPA schedules a merge after such an iteration)."""
        return bool(self.outcomes) and self.outcomes[-1][1]

    def seen_for(self, task_type: str) -> frozenset[str]:
        return frozenset(self.seen.get(task_type, frozenset()))


def state_from_trials(trials: Sequence[Any], baseline: Mapping[str, str]) -> SearchState:
    """SearchState from Optuna FrozenTrials (instructions, hash, parents, scores and feedback live in user attrs).

    A search trial's outcome for operator credit: COMPLETE with a value above its parent's (the better parent for
    a merge) is a win; PRUNED (gated out or pruned) is a loss; failed, duplicate and running trials do not count."""
    evaluated, values, lineage, outcomes, merged = [], {}, {}, [], []
    seen: dict[str, set[str]] = {tt: {h} for tt, h in instruction_hashes(baseline).items()}
    for t in sorted(trials, key=lambda t: t.number):
        attrs = t.user_attrs
        for tt, ih in instruction_hashes(attrs.get("instructions") or {}).items():
            seen.setdefault(tt, set()).add(ih)
        h = attrs.get("instruction_hash")
        parents = tuple(attrs.get("parent_hashes") or ((attrs["parent_hash"],) if attrs.get("parent_hash") else ()))
        if h and t.state.name in ("COMPLETE", "PRUNED"):
            lineage.setdefault(h, parents)
        if attrs.get("operator_requested") == "merge" and t.state.name in ("COMPLETE", "PRUNED", "FAIL"):
            merged.append(parents)
        search = attrs.get("operator") not in (None, BASELINE) and attrs.get("duplicate_of") is None
        if search and t.state.name in ("COMPLETE", "PRUNED"):
            before = [values[p][1] for p in parents if p in values]
            won = t.state.name == "COMPLETE" and t.value is not None and bool(before) and t.value > max(before)
            outcomes.append((str(attrs["operator"]), won))
        if t.state.name != "COMPLETE" or t.value is None or not attrs.get("instructions"):
            continue
        if attrs.get("duplicate_of") is None:
            fb = tuple(tuple(x) for x in attrs.get("feedback", ()))
            evaluated.append(Evaluated(t.number, dict(attrs["instructions"]), h, float(t.value), fb,
                                       {k: float(v) for k, v in (attrs.get("task_scores") or {}).items()}))
        values.setdefault(h, (t.number, float(t.value)))
    return SearchState(dict(baseline), tuple(evaluated), {tt: frozenset(v) for tt, v in seen.items()}, values,
                       lineage, tuple(outcomes), tuple(merged))


def mutation_context_args(state: SearchState, task_type: str, *, seed: int, max_chars: int,
                          n_feedback: int = 3, pool_size: int = 5, parent: Evaluated | None = None) -> dict[str, Any]:
    """Keyword arguments for mutators.MutationContext for one task type; the parent is the best train mean unless
    one is given (SearchState.choose_parent)."""
    parent = parent if parent is not None else state.parent()
    base = (parent.instructions if parent else state.baseline).get(task_type) or state.baseline[task_type]
    history, seen_text = [], set()
    for e in sorted(state.evaluated, key=lambda e: e.value):
        text = e.instructions.get(task_type)
        if text and text not in seen_text:
            seen_text.add(text)
            history.append((text, round(e.value, 3)))
    feedback: list[str] = []
    if parent:
        ranked = sorted(parent.feedback, key=lambda f: (f[1] != task_type, f[2]))
        for task_id, _tt, score, text in ranked[:n_feedback]:
            if text:
                feedback.append(f"[{task_id}, score {score:.1f}] {text}")
    pool = [t for t, _ in reversed(history)][:pool_size]
    return {"base": base, "history": tuple(history), "feedback": tuple(feedback), "pool": tuple(pool),
            "task_type": task_type, "seed": seed, "max_chars": max_chars}


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
    ) -> None:
        self.exp = exp
        self._sigma = sigma  # run-to-run sd of one task score, for the gate (repeats or a calibration)
        self.runner = runner
        self.tasks = tuple(tasks)
        self.contexts = contexts
        self.pool = pool or SERIAL
        self.types = tuple(mutate_types or sorted({t.task_type for t in self.tasks}))
        self.baseline = baseline_instructions(exp, self.types)
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

    def candidate(self, operator: str, number: int, parent: Evaluated | None = None) -> Proposal:
        """The candidate one operator makes from the parent (the best train mean unless given), for each mutated
        task type, and who made it."""
        state = self.state()
        parent = parent if parent is not None else state.parent()
        base = dict(parent.instructions) if parent else dict(self.baseline)
        propose, make_ctx, failed_type = self._propose_fns()
        notes, used, failed = [], {}, 0
        for tt in self.types:
            args = mutation_context_args(state, tt, seed=self.exp.sweep.seed * 100003 + number,
                                         max_chars=self.exp.sweep.max_chars, parent=parent)
            try:
                cand = propose(operator, make_ctx(**args), self.mutation_llm, seen=state.seen_for(tt))
            except failed_type as exc:
                notes.append(f"{tt}: {exc}")
                failed += 1
                continue
            if cand.text and cand.text.strip():
                base[tt] = cand.text
            used[tt] = cand.operator
            notes.append(f"{tt}: {cand.note}" if cand.note else f"{tt}: changed")
        if failed == len(self.types):
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
        """(operator requested, pick) for a search trial: a merge when one is due (sweep.max_merges, after a trial
        that beat its parent, a pair on the front), else the operator from TPE or the bandit on the credited
        operator, and the parent by sweep.parent_selection. One seeded generator per trial number."""
        from experiments.optimizer import credit_from, thompson_choice

        sw = self.exp.sweep
        state = self.state()
        rng = random.Random(f"{sw.seed}-{number}")
        if sw.max_merges > 0 and len(state.merged) < sw.max_merges and state.last_won:
            pair = state.merge_pair(rng)
            if pair is not None:
                return "merge", pair
        if sw.operator_choice == "bandit":
            requested = thompson_choice(credit_from(state.outcomes, sw.operators), list(sw.operators), rng)
        else:
            requested = trial.suggest_categorical("operator", list(sw.operators))
        return requested, state.choose_parent(sw.parent_selection, rng)

    def _gate(self, trial: Any, number: int, instructions: Mapping[str, str], parents: Sequence[Evaluated]):
        """Run the candidate on sweep.gate_tasks train tasks and compare with the better parent's stored scores
        there (experiments.optimizer.gate). Returns (decision, the gate's CandidateEval)."""
        from experiments.optimizer import gate, gate_tasks

        ids = [t.id for t in self.tasks]
        batch = gate_tasks(ids, self.exp.sweep.gate_tasks, random.Random(f"{self.exp.sweep.seed}-{number}-gate"))
        ev = evaluate_candidate(instructions, self.tasks, self.runner, contexts=self.contexts, seed=self.exp.seed,
                                trial=trial, run_prefix=f"{self.exp.sweep.name}-t{number}", pool=self.pool,
                                order=[ids.index(t) for t in batch], prune=False)
        got = ev.by_task()
        ref = max(parents, key=lambda e: sum(e.scores.get(t, float("-inf")) for t in batch))
        decision = gate(got, {t: ref.scores[t] for t in batch if t in ref.scores}, sigma=self.sigma(),
                        z=self.exp.sweep.gate_z)
        return decision, ev, ref

    def __call__(self, trial: Any) -> float:
        t0 = time.perf_counter()
        calls0 = _calls(self.runner)
        number = int(getattr(trial, "number", 0))
        is_baseline = trial.user_attrs.get("operator") == BASELINE
        requested, pick = (BASELINE, None) if is_baseline else self._choose(trial, number)
        proposal = Proposal(dict(self.baseline), None, "baseline instruction (cfg.synth)", BASELINE)
        outcome = dict(number=number, operator=requested, operator_requested=requested,
                       instructions=proposal.instructions, hash=candidate_hash(proposal.instructions),
                       parent_hash=None, note=proposal.note)
        # the operator asked for is recorded at once: a trial that fails inside propose still says what it tried
        trial.set_user_attr("operator_requested", requested)
        try:
            if requested == "merge":
                proposal = self.merge_candidate(*pick, number)
            elif not is_baseline:
                proposal = self.candidate(requested, number, parent=pick)
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
            if known is not None and not is_baseline:
                trial.set_user_attr("duplicate_of", known[0])
                trial.set_user_attr("elapsed_s", round(time.perf_counter() - t0, 3))
                trial.set_user_attr("llm_calls", _calls(self.runner) - calls0)
                self.last = TrialOutcome(**outcome, duplicate_of=known[0], value=known[1],
                                         elapsed_s=time.perf_counter() - t0, llm_calls=_calls(self.runner) - calls0)
                return known[1]
            state = self.state()
            parents = [e for e in map(state.by_hash, proposal.parent_hashes or (proposal.parent_hash,)) if e and e.scores]
            gated, done = None, ()
            # the gate needs tasks left after it: on a train split of gate_tasks or fewer it is off
            if 0 < self.exp.sweep.gate_tasks < len(self.tasks) and not is_baseline and parents:
                gated, gate_ev, ref = self._gate(trial, number, instructions, parents)
                trial.set_user_attr("gate", {**gated.as_attr(), "parent": ref.hash, "reason": gated.reason})
                outcome["gate"] = gated.as_attr()
                done = gate_ev.scores
                if not gated.passed:
                    return self._gated_out(trial, gated, gate_ev, outcome, t0, calls0)
            rest = [i for i, t in enumerate(self.tasks) if t.id not in {s.task_id for s in done}]
            if not is_baseline:
                random.Random(number).shuffle(rest)
            ev = evaluate_candidate(
                instructions, self.tasks, self.runner, contexts=self.contexts, seed=self.exp.seed, trial=trial,
                run_prefix=f"{self.exp.sweep.name}-t{number}", pool=self.pool, order=rest,
            )
            if done:
                ev = CandidateEval(tuple(done) + ev.scores, pruned=ev.pruned, abandoned=ev.abandoned)
        except TrialFailed as exc:
            trial.set_user_attr("fail_reason", str(exc)[:500])
            trial.set_user_attr("elapsed_s", round(time.perf_counter() - t0, 3))
            trial.set_user_attr("llm_calls", _calls(self.runner) - calls0)
            self.last = TrialOutcome(**outcome, error=str(exc), elapsed_s=time.perf_counter() - t0,
                                     llm_calls=_calls(self.runner) - calls0)
            raise
        _record_eval(trial, ev)
        elapsed, calls = time.perf_counter() - t0, _calls(self.runner) - calls0
        trial.set_user_attr("elapsed_s", round(elapsed, 3))
        trial.set_user_attr("llm_calls", calls)
        self.last = TrialOutcome(**outcome, evaluation=ev, value=ev.mean, pruned=ev.pruned, elapsed_s=elapsed,
                                 llm_calls=calls)
        if ev.pruned:
            trial.set_user_attr("partial_value", ev.mean)
            if ev.abandoned:  # ran alongside the last reported task; finished, dropped, recorded here
                trial.set_user_attr("abandoned_tasks", ev.abandoned)
            raise optuna.TrialPruned(f"pruned after {len(ev.scores)}/{len(self.tasks)} tasks (mean {ev.mean:.3f})")
        return ev.mean

    def _gated_out(self, trial: Any, decision: Any, ev: CandidateEval, outcome: dict, t0: float, calls0: int) -> float:
        """Record a candidate the gate stopped and raise optuna.TrialPruned: state PRUNED (a decision on partial
        scores, as the pruner's; FAIL would count toward sweep.failure_rate_stop), user attrs gated_out and
        fail_reason (the ledger's status "gated" and reason, MLflow's fail_reason tag) and partial_value."""
        _record_eval(trial, ev)
        elapsed, calls = time.perf_counter() - t0, _calls(self.runner) - calls0
        trial.set_user_attr("gated_out", True)
        trial.set_user_attr("fail_reason", decision.reason[:500])  # "gated out on g task(s): ..."
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


def _calls(runner: Runner) -> int:
    return int(runner.llm_calls())


def make_objective(exp: ExperimentConfig, runner: Runner, tasks: Sequence[Task] | None = None, **kwargs: Any) -> Objective:
    """The objective for exp's train split (or the given tasks) with the runner injected."""
    if tasks is None:
        from experiments.benchmark import load_tasks, split

        tasks = split(load_tasks(exp.benchmark), "train")
    return Objective(exp, runner, tasks, **kwargs)


# -- the real harness as a runner ----------------------------------------------------------------------


class HarnessRunner:
    """Adapts harness.agent.Harness to the runner protocol: one Harness per seed, sharing roles, memory, search.

    llm_calls() counts uncached model calls (response-cache misses; every call when the cache is off).
    """

    def __init__(self, harness_cfg: Any, roles: Any = None) -> None:
        try:
            from harness.agent import Harness
        except ImportError as exc:
            raise RuntimeError(f"harness.agent.Harness is not importable ({exc}); the sweep needs the harness") from exc
        self._Harness = Harness
        self.cfg = harness_cfg
        self.base = Harness(harness_cfg, roles)
        self._by_seed = {harness_cfg.seed: self.base}
        self._uncached = 0
        self._identity: dict[str, Any] | None = None
        self._lock = threading.Lock()  # finish/prepare run on several workers at once (experiments.pool)

    @property
    def roles(self) -> Any:
        return self.base.roles

    @property
    def smoke(self) -> bool:
        return bool(self.roles.smoke)

    @property
    def mutation_llm(self) -> Any:
        return self.roles.producer

    def _for_seed(self, seed: int) -> Any:
        with self._lock:
            if seed not in self._by_seed:
                cfg = dataclasses.replace(self.cfg, seed=seed)
                self._by_seed[seed] = self._Harness(cfg, self.roles, memory=self.base.memory, search=self.base.search)
            return self._by_seed[seed]

    def _count(self, uncached: int) -> None:
        with self._lock:
            self._uncached += int(uncached)

    def prepare(self, task: str) -> Any:
        from harness.logger import Tracer, use_tracer

        tracer = Tracer("prepare")
        with use_tracer(tracer):
            prepared = self.base.prepare(task)
        self._count(sum(int(u["calls"] - u["cached"]) for u in tracer.usage.values()))
        # planning and research degrade to defaults when a model call fails; a sweep would cache that context and
        # reuse it for every trial, so a backend that is down or lacks a model stops the sweep here instead
        down = [e["args"]["error"] for e in tracer.events
                if e["cat"] == "llm" and str(e["args"].get("error", "")).startswith(("BackendUnavailable", "ModelMissing"))]
        if down:
            from harness.inference import BackendUnavailable

            raise BackendUnavailable(f"context for task {task[:60]!r} not prepared: {down[0]}")
        return prepared

    def identity(self) -> dict[str, Any]:
        """backend_identity of the roles, read once (it hashes model files and asks Ollama for digests)."""
        if self._identity is None:
            from experiments.fingerprint import backend_identity

            self._identity = backend_identity(self.roles)
        return self._identity

    def prepared_from_dict(self, data: dict[str, Any]) -> Any:
        from harness.agent import Prepared

        return Prepared.from_dict(data)

    def finish(self, prepared: Any, *, instructions: Mapping[str, str], run_id: str | None = None,
               criteria: Mapping[str, Any] | None = None, seed: int = 0) -> TaskOutcome:
        from harness.agent import output_name_for

        # one file per run: <outputs>/<run_id>/<name>, so a record's output_path never points at a later run's text
        # (trials, seeds and workers would otherwise overwrite <outputs>/<name> in turn)
        name = f"{run_id}/{output_name_for(prepared.task)}" if run_id else None
        result = self._for_seed(seed).finish(prepared, instructions=dict(instructions), run_id=run_id,
                                             criteria=dict(criteria or {}), output_name=name)
        outcome = outcome_from_result(result)
        self._count(outcome.usage.uncached_calls)
        return outcome

    def rescore(self, prepared: Any, output_text: str, *, criteria: Mapping[str, Any] | None = None,
                seed: int = 0) -> TaskOutcome:
        """Score a fixed text again, as Harness.finish's judge does (evaluators.composite.evaluate with the
        evaluator role and config, the task's criteria, the research sources), with judge seeds from `seed`."""
        from evaluators.composite import evaluate
        from experiments.outcome import Usage, _dimensions
        from harness.logger import Tracer, use_tracer
        from harness.synthesis import expected_count

        criteria = dict(criteria or {})
        plan = prepared.plan
        expected = criteria.get("expected_count", expected_count(prepared.clean_task, plan))
        tracer = Tracer("rescore")
        t0 = time.perf_counter()
        with use_tracer(tracer):
            ev = evaluate(prepared.clean_task, output_text, self.roles.evaluator, self.cfg.evaluator,
                          expected_count=expected, required_terms=tuple(criteria.get("required_terms", ())),
                          sources=prepared.research.sources, task_type=plan.task_type, seed=seed)
        used = tracer.usage.values()
        usage = Usage(prompt_tokens=sum(int(u["prompt_tokens"]) for u in used),
                      completion_tokens=sum(int(u["completion_tokens"]) for u in used),
                      latency_s=time.perf_counter() - t0, llm_calls=sum(int(u["calls"]) for u in used),
                      cached_calls=sum(int(u["cached"]) for u in used))
        self._count(usage.uncached_calls)
        rubric = ev.rubric
        return TaskOutcome(status="ok", score=float(ev.composite), dimensions=_dimensions(ev),
                           judge_sd=float(rubric.judge_sd or 0.0) if rubric is not None else 0.0,
                           feedback=str(ev.feedback or ""), weaknesses=tuple(ev.weaknesses or ()), usage=usage,
                           output_text=output_text, smoke=self.smoke, rescored=True)

    def llm_calls(self) -> int:
        cache = getattr(self.roles, "cache", None)
        return int(cache.misses) if cache is not None else self._uncached
