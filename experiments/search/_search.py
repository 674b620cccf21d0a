"""The seam between the sweep and its search: what the next trial tries and what a child must show first.

The sweep orchestrates a study: Optuna's trials, their storage and resume, the runs, the holdout. A Search decides,
from the SearchState the study's trials rebuild (state_from_trials), what to try next:

- step: the operator asked for and the parent it edits (the best train mean, a draw from the per-task Pareto front,
  or the composition of each task type's best text), a merge of two front members when one is due, or, as a
  per-type search's last trial, that composition run afresh (COMPOSE);
- components: which task types' instructions the trial edits (every one, or one a trial in turn);
- reflection: what the mutators read for one task type (mutators.MutationContext's arguments: the parent's text,
  the texts tried, the judge's words on the parent's tasks, counted, and the edits already turned down);
- acceptance: what a child must show on its first tasks before it runs the rest of the train split (the minibatch
  gate against its parent, the race against the leader, or nothing: a per-type child runs every train task).

ProjectSearch is the project's own, configured by sweep.*. GEPA's optimizer (the `gepa` package) was measured
beside it in the search benchmark and found less per model call (docs/SENSITIVITY.md, "The search beside GEPA");
its Pareto parent selection, round-robin components, minibatch acceptance and merge are ProjectSearch's
sweep.parent_selection=pareto, sweep.search=round_robin, sweep.gate_tasks and sweep.max_merges.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

from ._optimizer import GateDecision, credit_from, gate, gate_tasks, race_looks, race_step, thompson_choice
from ._state import Evaluated, SearchState, mutation_context_args

COMPOSE = "compose"  # the operator of a per-type search's last trial: each type's best text, run afresh
PER_TYPE = ("per_type", "round_robin")  # sweep.search values whose trials are judged per task type


@dataclass(frozen=True)
class Step:
    """What a search trial tries: the operator asked for ("merge", COMPOSE or one of sweep.operators) and its pick
    (the parent, an Evaluated or None for the baseline; a merge's (a, b, common ancestor); the composition)."""

    requested: str
    pick: Any


@dataclass(frozen=True)
class Acceptance:
    """The test a child passes on its first tasks before the rest of the train split runs.

    rule "gate": the tasks at indices `first` run, then one look compares the child with `against` (its parent);
    rule "race": the train tasks run in the order `first`, with a look after each count in `looks` against
    `against` (the leader). decide(child's scores so far) -> GateDecision; passed False stops the child."""

    rule: str
    first: tuple[int, ...]
    looks: tuple[int, ...]
    against: Evaluated
    decide: Callable[[Mapping[str, float]], GateDecision]


class Search(Protocol):
    """What the sweep's objective asks its search (module docstring)."""

    def step(self, state: SearchState, number: int, suggest: Callable[[list[str]], str]) -> Step: ...

    def components(self, number: int) -> tuple[str, ...]: ...

    def reflection(self, state: SearchState, task_type: str, parent: Evaluated | None, number: int) -> dict[str, Any]:
        ...

    def acceptance(self, state: SearchState, parents: Sequence[Evaluated], number: int, task_ids: Sequence[str],
                   sigma: Callable[[], float | None]) -> Acceptance | None: ...


class ProjectSearch:
    """The project's search, configured by the sweep's settings (sweep.search, operators, operator_choice,
    parent_selection, estimate, max_merges, reflect_feedback, rejected_z, gate_tasks, gate_z, race_block, race_z,
    n_trials, seed, max_chars) over the mutated task types `types`."""

    def __init__(self, sweep: Any, types: Sequence[str]) -> None:
        self.sw = sweep
        self.types = tuple(types)

    def step(self, state: SearchState, number: int, suggest: Callable[[list[str]], str]) -> Step:
        """A per-type search's last trial composes each type's best text (by sweep.estimate); a merge when one is
        due (sweep.max_merges, after a trial that beat its parent, a pair on the front); else the operator from
        `suggest` (Optuna's TPE) or the bandit on the credited operators, and the parent by
        sweep.parent_selection. One seeded generator per trial number."""
        sw = self.sw
        rng = random.Random(f"{sw.seed}-{number}")
        if sw.search in PER_TYPE and number == sw.n_trials - 1 and number > 1:
            composition = state.composed(sw.estimate)
            if composition is not None:
                return Step(COMPOSE, composition)
        if sw.max_merges > 0 and len(state.merged) < sw.max_merges and state.last_won:
            pair = state.merge_pair(rng)
            if pair is not None:
                return Step("merge", pair)
        if sw.operator_choice == "bandit":  # not an operator that cannot apply (it would fall back every time)
            offered = state.offered(sw.operators, self.types, max_chars=sw.max_chars) or list(sw.operators)
            requested = thompson_choice(credit_from(state.outcomes, sw.operators), offered, rng)
        else:
            requested = suggest(list(sw.operators))
        return Step(requested, state.choose_parent(sw.parent_selection, rng, sw.search, sw.estimate))

    def components(self, number: int) -> tuple[str, ...]:
        """round_robin: one task type a trial, in turn (every other type keeps the parent's text); else all."""
        return (self.types[number % len(self.types)],) if self.sw.search == "round_robin" else self.types

    def reflection(self, state: SearchState, task_type: str, parent: Evaluated | None, number: int) -> dict[str, Any]:
        return mutation_context_args(state, task_type, seed=self.sw.seed * 100003 + number,
                                     max_chars=self.sw.max_chars, parent=parent, feedback=self.sw.reflect_feedback,
                                     rejected_z=self.sw.rejected_z)

    def acceptance(self, state: SearchState, parents: Sequence[Evaluated], number: int, task_ids: Sequence[str],
                   sigma: Callable[[], float | None]) -> Acceptance | None:
        """None for a per-type search (a child runs every train task: each type is accepted on its own). Racing
        (sweep.race_block > 0) replaces the gate: the train tasks in one order per study (seeded by sweep.seed, so
        every proposal races over the same blocks, as bench/power/sens/design.py does), looks at race_looks against
        the leader read now (race_step at sweep.race_z); none before a complete leader exists. The gate: sweep.gate_tasks
        train tasks drawn per trial, one look against the better of the parents there (gate at sweep.gate_z and the
        run noise `sigma`); off when the split has no tasks left after it or no parent has scores."""
        sw = self.sw
        ids = list(task_ids)
        if sw.search in PER_TYPE:
            return None
        if sw.race_block > 0:
            leader = state.parent()
            if leader is None or not leader.scores:
                return None
            order = list(range(len(ids)))
            random.Random(f"{sw.seed}-race").shuffle(order)
            return Acceptance("race", tuple(order), race_looks(len(order), sw.race_block), leader,
                              lambda scores: race_step(scores, leader.scores, sw.race_z))
        if not (0 < sw.gate_tasks < len(ids)) or not parents:
            return None
        batch = gate_tasks(ids, sw.gate_tasks, random.Random(f"{sw.seed}-{number}-gate"))
        ref = max(parents, key=lambda e: sum(e.scores.get(t, float("-inf")) for t in batch))
        return Acceptance("gate", tuple(ids.index(t) for t in batch), (len(batch),), ref,
                          lambda scores: gate(scores, {t: ref.scores[t] for t in batch if t in ref.scores},
                                              sigma=sigma(), z=sw.gate_z))
