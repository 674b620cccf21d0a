"""The seam between the sweep and its search (experiments.search.Search): the objective asks its search which operator
and parent a trial tries, which task types it edits, what reflection reads and what a child must show first, and
does what it says; the project's own (ProjectSearch) answers as the sweep did before the seam."""

from __future__ import annotations

import optuna
import pytest
from scripted_harness import BASE, ScriptedRunner, scripted_propose

from experiments.config import load_tasks
from experiments.search import Acceptance, ProjectSearch, SearchState
from experiments.search._optimizer import GateDecision
from experiments.search._search import COMPOSE, Step
from experiments.sweep._objective import Objective


class OneTypeSearch:
    """A search of another kind, standing behind the same seam: always add_tool on the baseline, the research
    instruction only, reflection reads a marker, and a child is stopped after its first task."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def step(self, state, number, suggest):
        return Step("add_tool", None)

    def components(self, number):
        return ("research",)

    def reflection(self, state, task_type, parent, number):
        self.asked.append(task_type)
        return {"base": state.baseline[task_type], "feedback": ("MARKER: read this",), "task_type": task_type,
                "seed": number, "max_chars": 1200}

    def acceptance(self, state, parents, number, task_ids, sigma):
        return Acceptance("gate", (len(task_ids) - 1,), (1,), _evaluated(state),
                          lambda scores: GateDecision(False, -1.0, -1.0, len(scores), None, 0.0, tuple(scores)))


def _evaluated(state):
    from experiments.search import Evaluated, candidate_hash

    return Evaluated(0, dict(state.baseline), candidate_hash(state.baseline), 5.0, (), {})


def test_the_objective_does_what_its_search_says(make_exp):
    exp = make_exp()
    tasks = load_tasks(exp.benchmark)
    seen_feedback = []

    def propose(name, ctx, llm, *, seen=frozenset()):
        seen_feedback.append(tuple(ctx.feedback))
        return scripted_propose(name, ctx, llm, seen=seen)

    search = OneTypeSearch()
    objective = Objective(exp, ScriptedRunner(tasks), tasks, state=SearchState(dict(BASE)), propose=propose,
                          search=search)
    trial = optuna.trial.FixedTrial({}, number=3)
    with pytest.raises(optuna.TrialPruned, match="gated out"):
        objective(trial)
    out = objective.last
    assert out.operator_requested == "add_tool" and search.asked == ["research"]
    assert seen_feedback == [("MARKER: read this",)]
    assert out.instructions["enumerated"] == BASE["enumerated"] and out.instructions["research"] != BASE["research"]
    # stopped where the search's acceptance said: after one task, the last of the split, recorded as the gate
    assert [s.task_id for s in out.evaluation.scores] == [tasks[-1].id]
    assert out.gate["passed"] is False and out.pruned


def test_the_project_search_answers_from_the_sweep_settings(make_exp):
    exp = make_exp("sweep.search=round_robin", "sweep.reflect_feedback=all")
    types = ("enumerated", "research")
    search = ProjectSearch(exp.sweep, types)
    assert [search.components(n) for n in range(3)] == [("enumerated",), ("research",), ("enumerated",)]
    state = SearchState(dict(BASE))
    args = search.reflection(state, "research", None, 5)
    assert args["base"] == BASE["research"] and args["seed"] == exp.sweep.seed * 100003 + 5
    # a per-type search runs every child on every train task: no acceptance test
    assert search.acceptance(state, [], 1, ["a", "b", "c"], lambda: 0.5) is None
    # its last trial composes each type's best text
    exp.sweep.n_trials = 6
    assert search.step(state, 5, lambda ops: ops[0]).requested in (COMPOSE, *exp.sweep.operators)
    joint = ProjectSearch(make_exp("sweep.gate_tasks=2", "sweep.race_block=0").sweep, types)
    assert joint.components(1) == types
    step = joint.step(state, 2, lambda ops: ops[-1])
    assert step.requested in exp.sweep.operators and step.pick is None  # nothing evaluated: the baseline
    ev = _evaluated(state)
    ev = type(ev)(0, ev.instructions, ev.hash, 5.0, (), {"a": 5.0, "b": 5.0, "c": 5.0})
    acc = joint.acceptance(state, [ev], 4, ["a", "b", "c"], lambda: 0.5)
    assert acc.rule == "gate" and len(acc.first) == 2 and acc.looks == (2,) and acc.against is ev
    batch = [["a", "b", "c"][i] for i in acc.first]
    assert acc.decide({t: 5.0 for t in batch}).passed and not acc.decide({t: 1.0 for t in batch}).passed
    assert joint.acceptance(state, [], 4, ["a", "b", "c"], lambda: 0.5) is None  # no parent with scores
    assert joint.acceptance(state, [ev], 4, ["a", "b"], lambda: 0.5) is None  # no task left after the gate
    # racing (the shipped joint search's acceptance): against the leader, over one order per study
    racing = ProjectSearch(make_exp("sweep.race_block=2").sweep, types)
    ids = [f"t{i}" for i in range(8)]
    leader = type(ev)(1, ev.instructions, ev.hash, 5.0, (), {t: 5.0 for t in ids})
    assert racing.acceptance(state, [leader], 4, ids, lambda: 0.5) is None  # no complete leader yet
    led = SearchState(dict(BASE), (leader,))
    acc = racing.acceptance(led, [leader], 4, ids, lambda: 0.5)
    assert acc.rule == "race" and acc.against is leader and sorted(acc.first) == list(range(8))
    assert acc.looks == (2, 4, 6) and acc.first == racing.acceptance(led, [leader], 9, ids, lambda: 0.5).first
    assert not acc.decide({"t0": 1.0, "t1": 2.0}).passed and acc.decide({"t0": 5.0, "t1": 5.5}).passed
