"""What the search has tried: candidate identity, and the search state the mutators read, built from the trials.

Everything lives in the Optuna trials' user attrs (instructions, hash, parents, scores, feedback), so a resumed
process rebuilds the same state.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from experiments.config import BASELINE

# -- candidate identity ------------------------------------------------------------------------------


def instruction_hashes(instructions: Mapping[str, str]) -> dict[str, str]:
    """task_type -> mutators' instruction_hash of its text: the hash `propose` checks `seen` against."""
    from mutators import instruction_hash

    return {tt: instruction_hash(text) for tt, text in sorted(instructions.items())}


def candidate_hash(instructions: Mapping[str, str]) -> str:
    """Hash of a full candidate (task_type -> instruction), built from the per-instruction hashes, so the
    de-duplication of candidates and of the instructions `propose` makes uses one hash function."""
    return hashlib.sha256(json.dumps(instruction_hashes(instructions), sort_keys=True).encode()).hexdigest()[:12]


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

    def composed(self, estimate: str = "pooled") -> Evaluated | None:
        """Per task type, the text with the best mean over that type's train tasks, composed into one candidate
        with those tasks' scores and feedback under that text.

        A task's run reads its own type's instruction only, so a type's tasks score a type's text whatever the other
        types hold: a good edit to one type is kept though the same trial's edit to another type was bad. A text's
        mean pools every complete trial that held it (per task, the mean of its runs): a text kept while another
        type is edited is measured again by each such trial, so a text that led by luck falls back as its runs
        accumulate, and the best of many one-run means is not trusted over a text measured many times. Ties go to
        the earlier text. Task types are read from the stored feedback (task id, task type, ...). The composition
        of one source is that source. estimate "edits": a text's value is the edit model's (_edit_model: every
        trial's mean read as the sum of its sentences' effects, shrunk), not its pooled mean."""
        full = [e for e in self.evaluated if e.scores]
        if not full:
            return self.parent()
        type_of = {f[0]: f[1] for e in full for f in e.feedback}
        n_tasks = max(len(e.scores) for e in full)
        full = sorted((e for e in full if len(e.scores) == n_tasks), key=lambda e: e.number)
        chosen: dict[str, tuple[str, list[Evaluated]]] = {}
        for tt in sorted(set(type_of.values())):
            ids = [t for t, x in type_of.items() if x == tt]
            groups: dict[str, list[Evaluated]] = {}
            for e in full:
                groups.setdefault(e.instructions.get(tt, self.baseline.get(tt, "")), []).append(e)

            def pooled(members: list[Evaluated]) -> float:
                return sum(sum(e.scores[t] for e in members) / len(members) for t in ids) / len(ids)

            value = pooled
            if estimate == "edits":
                value = _edit_values(full, tt, ids, self.baseline.get(tt, "")) or pooled
            text, members = max(groups.items(), key=lambda kv: (value(kv[1]), -kv[1][0].number))
            chosen[tt] = (text, members)
        sources = {m[-1].hash for _, m in chosen.values()}
        if len(sources) == 1 and all(len(m) == 1 for _, m in chosen.values()):
            return next(iter(chosen.values()))[1][0]
        instructions = dict(self.baseline)
        scores: dict[str, float] = {}
        feedback = []
        for tt, (text, members) in chosen.items():
            instructions[tt] = text
            scores.update({t: sum(e.scores[t] for e in members) / len(members)
                           for t in members[0].scores if type_of.get(t) == tt})
            feedback += [f for f in members[-1].feedback if f[1] == tt]
        feedback.sort(key=lambda f: f[2])
        h = candidate_hash(instructions)
        same = next((e for e in full if e.hash == h), None)
        number = same.number if same is not None else max(m[-1].number for _, m in chosen.values())
        return Evaluated(number, instructions, h, sum(scores.values()) / len(scores), tuple(feedback), scores)

    def by_hash(self, h: str | None) -> Evaluated | None:
        return next((e for e in self.evaluated if e.hash == h), None)

    def front(self) -> dict[str, int]:
        """Candidate hash -> train tasks it leads, over the per-task Pareto front (_optimizer.pareto_leads)."""
        from ._optimizer import pareto_leads

        return pareto_leads({e.hash: e.scores for e in self.evaluated if e.scores})

    def choose_parent(self, selection: str, rng: random.Random, search: str = "joint",
                      estimate: str = "pooled") -> Evaluated | None:
        """best: the best train mean; pareto: a front member drawn by the number of tasks it leads; with search
        per_type, the composition of each type's best text (composed, by `estimate`)."""
        from ._optimizer import sample_parent

        if search in ("per_type", "round_robin"):
            return self.composed(estimate)
        front = self.front() if selection == "pareto" else {}
        return self.by_hash(sample_parent(front, rng)) if front else self.parent()

    def merge_pair(self, rng: random.Random) -> tuple[Evaluated, Evaluated, Evaluated] | None:
        """Two front members with a common ancestor (_optimizer.merge_pair), not merged before."""
        from ._optimizer import merge_pair

        front = self.front()
        means = {e.hash: e.value for e in self.evaluated}
        pair = merge_pair(list(front), self.lineage, means, rng, done=self.merged)
        if pair is None:
            return None
        a, b, anc = (self.by_hash(h) for h in pair)
        return (a, b, anc) if a and b and anc else None

    def offered(self, operators: Sequence[str], task_types: Sequence[str], *, max_chars: int) -> list[str]:
        """The operators that can apply to every mutated task type (mutators.cannot_apply on the contexts of the
        best parent): one that would fall back every time, such as crossover while the pool holds one distinct
        instruction, is not offered. In the order given."""
        from mutators import MutationContext, cannot_apply

        ctxs = [MutationContext(**mutation_context_args(self, tt, seed=0, max_chars=max_chars)) for tt in task_types]
        return [op for op in operators if all(cannot_apply(op, ctx) is None for ctx in ctxs)]

    @property
    def last_won(self) -> bool:
        """The last finished search trial beat its parent (GEPA schedules a merge after such an iteration)."""
        return bool(self.outcomes) and self.outcomes[-1][1]

    def seen_for(self, task_type: str) -> frozenset[str]:
        return frozenset(self.seen.get(task_type, frozenset()))


def _edit_values(full: Sequence[Evaluated], task_type: str, ids: Sequence[str], baseline: str):
    """members -> the edit model's estimate of their text's mean on the type's tasks (_edit_model), or None when
    the trials cannot give a noise (fewer than two, or fewer than two tasks)."""
    from ._edit_model import edit_estimates, noise_of_mean

    v = noise_of_mean([e.scores for e in full], ids)
    if not v:
        return None
    texts = [e.instructions.get(task_type, baseline) for e in full]
    est = edit_estimates(texts, [sum(e.scores[t] for t in ids) / len(ids) for e in full], v)
    by_text = dict(zip(texts, est))
    return lambda members: by_text[members[0].instructions.get(task_type, baseline)]


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
                          n_feedback: int = 3, pool_size: int = 5, parent: Evaluated | None = None,
                          feedback: str = "worst", rejected_z: float = 0.0) -> dict[str, Any]:
    """Keyword arguments for mutators.MutationContext for one task type; the parent is the best train mean unless
    one is given (SearchState.choose_parent). feedback: "worst", the judge's words on the parent's n_feedback worst
    tasks (this type's first); "all", type_feedback: every one of this type's tasks, the same words counted, and the
    edits already tried from this parent (rejected_edits at rejected_z); "counted", the same without those edits."""
    parent = parent if parent is not None else state.parent()
    base = (parent.instructions if parent else state.baseline).get(task_type) or state.baseline[task_type]
    history, seen_text = [], set()
    for e in sorted(state.evaluated, key=lambda e: e.value):
        text = e.instructions.get(task_type)
        if text and text not in seen_text:
            seen_text.add(text)
            history.append((text, round(e.value, 3)))
    if parent and feedback in ("all", "counted"):
        return {"base": base, "history": tuple(history),
                "feedback": type_feedback(state, parent, task_type, rejected=feedback == "all", rejected_z=rejected_z),
                "pool": tuple(t for t, _ in reversed(history))[:pool_size], "task_type": task_type, "seed": seed,
                "max_chars": max_chars}
    feedback: list[str] = []
    if parent:
        ranked = sorted(parent.feedback, key=lambda f: (f[1] != task_type, f[2]))
        for task_id, _tt, score, text in ranked[:n_feedback]:
            if text:
                feedback.append(f"[{task_id}, score {score:.1f}] {text}")
    pool = [t for t, _ in reversed(history)][:pool_size]
    return {"base": base, "history": tuple(history), "feedback": tuple(feedback), "pool": tuple(pool),
            "task_type": task_type, "seed": seed, "max_chars": max_chars}


def holdout_pool(cands: Sequence[Any], trials: Sequence[Any], search: str) -> list[Any]:
    """The candidates the holdout may test, in the order given. A per-type search answers with its last trial, the
    composition of each type's best text run afresh (operator "compose"; the trial it repeats when it was a
    duplicate): its train mean is a new measurement, not the maximum of the noisy means it was chosen by, so it is
    the one candidate; without one (the study stopped early) every candidate, as a joint search has."""
    if search not in ("per_type", "round_robin"):
        return list(cands)
    picked = {int(t.user_attrs.get("duplicate_of", t.number)) for t in trials
              if t.state.name == "COMPLETE" and t.user_attrs.get("operator") == "compose"}
    return [c for c in cands if c.number in picked] or list(cands)


def type_feedback(state: SearchState, parent: Evaluated, task_type: str, limit: int = 6,
                  rejected: bool = True, rejected_z: float = 0.0) -> tuple[str, ...]:
    """What reflection reads for one task type: the judge's words over every one of the type's tasks, the same words
    counted once with the tasks they came from and their mean score (most tasks first, then the lowest mean), then
    the edits to this type's text already tried from this parent that did not beat it on the type's tasks (the
    sentences a child added or dropped), so the proposer does not make them again. At most `limit` items."""
    from mutators import counted_feedback

    items = counted_feedback((task_id, score, text) for task_id, tt, score, text in parent.feedback if tt == task_type)
    tried = rejected_edits(state, parent, task_type, rejected_z) if rejected else []
    keep = max(limit - min(len(tried), 2), 1)
    return tuple(items[:keep] + tried[: limit - min(len(items), keep)])


def rejected_edits(state: SearchState, parent: Evaluated, task_type: str, z: float = 0.0) -> list[str]:
    """The edits to task_type's text already tried from `parent` whose text did not score above the parent's on the
    type's tasks, newest first, each as the sentences it added and dropped. z > 0: only those that scored below it by
    more than z standard errors of a difference of two means (the noise read from the trials, _edit_model), so an
    edit one noisy run turned down is not ruled out for good."""
    from mutators.base import split_sentences

    base = parent.instructions.get(task_type, "")
    ids = [f[0] for f in parent.feedback if f[1] == task_type]
    if not base or not ids:
        return []

    def mean(e: Evaluated) -> float | None:
        vals = [e.scores[t] for t in ids if t in e.scores]
        return sum(vals) / len(vals) if len(vals) == len(ids) else None

    bar = mean(parent)
    if z > 0 and bar is not None:  # turned down by more than noise: z standard errors of a difference of two means
        from ._edit_model import noise_of_mean

        v = noise_of_mean([e.scores for e in state.evaluated if e.scores], ids)
        bar = bar - z * math.sqrt(2 * v) if v else bar
    old = set(split_sentences(base))
    out = []
    for e in sorted(state.evaluated, key=lambda e: -e.number):
        text = e.instructions.get(task_type, "")
        m = mean(e)
        if state.lineage.get(e.hash, ())[:1] != (parent.hash,) or text == base or m is None or bar is None or m > bar:
            continue
        new = set(split_sentences(text))
        added, dropped = [x for x in split_sentences(text) if x not in old], [x for x in old if x not in new]
        parts = ([f"added '{' '.join(added)[:160]}'"] if added else []) + ([f"dropped '{' '.join(dropped)[:160]}'"]
                                                                           if dropped else [])
        if parts:
            out.append(f"Already tried from this instruction, no better ({m:.2f} vs {bar:.2f}): {'; '.join(parts)}")
    return out
