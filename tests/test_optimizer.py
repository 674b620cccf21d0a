"""The search decisions (experiments/sweep/) and the sweep that uses them: Pareto front and parent sampling,
the minibatch gate (recorded in Optuna, the ledger and MLflow), merge of two front candidates, operator credit."""

from __future__ import annotations

import random
from collections import Counter

import optuna
import pytest
from conftest import OLD_DESIGN
from scripted_harness import BASE, BOOST, ScriptedRunner, scripted_propose

from experiments.config import load_tasks
from experiments.storage import Ledger
from experiments.search._state import candidate_hash
from experiments.search._optimizer import (credit_from, gate, merge_pair, pareto_leads, pruner_threshold, sample_parent,
                                          thompson_choice)
from experiments.sweep import run_sweep
from experiments.sweep._objective import Objective
from experiments.search._optimizer import Credit, pocock_p
from experiments.search._state import Evaluated, SearchState, state_from_trials
from mutators.operators import three_way_merge

optuna.logging.set_verbosity(optuna.logging.WARNING)

HARM = "Answer in one vague sentence"


class HarmRunner(ScriptedRunner):
    """ScriptedRunner where an instruction holding HARM loses 3 points on every task."""

    def finish(self, prepared, **kw):
        out = super().finish(prepared, **kw)
        if HARM in kw["instructions"][prepared["task_type"]]:
            return type(out)(**{**out.__dict__, "score": out.score - 3.0})
        return out


def harm_propose(name, ctx, llm, *, seen=frozenset()):
    """scripted_propose, plus "harm": a planted harmful edit."""
    if name == "harm":
        from mutators.base import Candidate

        for k in range(50):
            text = f"{ctx.base} {HARM} (variant {ctx.seed + k})."
            c = Candidate.make(text, "harm", (ctx.base_hash,), "planted harm")
            if c.hash not in seen and c.hash != ctx.base_hash:
                return c
    return scripted_propose(name, ctx, llm, seen=seen)


# -- Pareto front and parent sampling ------------------------------------------------------------------


@pytest.mark.parametrize(
    "scores, leads",
    [
        ({"a": {"t1": 5, "t2": 3}, "b": {"t1": 4, "t2": 6}}, {"a": 1, "b": 1}),  # each leads one task
        ({"a": {"t1": 5, "t2": 6}, "b": {"t1": 4, "t2": 5}}, {"a": 2}),  # b leads nothing: off the front
        ({"a": {"t1": 5, "t2": 3}, "b": {"t1": 4, "t2": 6}, "c": {"t1": 5, "t2": 2}}, {"a": 1, "b": 1}),  # c only ties a
        ({"a": {"t1": 5, "t2": 3, "t3": 1}, "b": {"t1": 5, "t2": 2, "t3": 2}}, {"a": 2, "b": 2}),  # shared lead
    ],
)
def test_pareto_leads(scores, leads):
    assert pareto_leads(scores) == leads


def test_sample_parent_follows_tasks_led():
    rng = random.Random(0)
    drawn = Counter(sample_parent({"a": 3, "b": 1}, rng) for _ in range(4000))
    assert drawn["a"] / 4000 == pytest.approx(0.75, abs=0.03)
    with pytest.raises(ValueError, match="at least one front member"):
        sample_parent({}, rng)


def test_state_front_and_parent_choice():
    e = [Evaluated(0, {"research": "x"}, "h0", 5.0, scores={"t1": 5.0, "t2": 5.0}),
         Evaluated(1, {"research": "y"}, "h1", 5.5, scores={"t1": 6.0, "t2": 5.0}),
         Evaluated(2, {"research": "z"}, "h2", 5.4, scores={"t1": 4.8, "t2": 6.0})]
    state = SearchState({"research": "x"}, tuple(e))
    assert state.front() == {"h1": 1, "h2": 1}
    assert state.choose_parent("best", random.Random(0)).hash == "h1"
    picks = Counter(state.choose_parent("pareto", random.Random(i)).hash for i in range(400))
    assert set(picks) == {"h1", "h2"} and min(picks.values()) > 120


# -- the gate ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "child, parent, sigma, z, passed",
    [
        ({"a": 7.0, "b": 7.2, "c": 6.9}, {"a": 5.5, "b": 5.6, "c": 5.4}, 0.6, 0.5, True),  # planted +1.5
        ({"a": 3.0, "b": 2.5, "c": 3.1}, {"a": 5.5, "b": 5.6, "c": 5.4}, 0.6, 0.5, False),  # planted -2.6
        ({"a": 5.3, "b": 5.4, "c": 5.3}, {"a": 5.5, "b": 5.6, "c": 5.4}, 0.6, 0.5, True),  # within the noise
        ({"a": 5.3, "b": 5.4, "c": 5.3}, {"a": 5.5, "b": 5.6, "c": 5.4}, None, 0.5, False),  # no sigma: strict
    ],
)
def test_gate_rule(child, parent, sigma, z, passed):
    d = gate(child, parent, sigma=sigma, z=z)
    assert d.passed is passed and d.n == 3
    assert d.reason.startswith("passed" if passed else "gated out")


def _gate_exp(make_exp, *ops, **kw):
    # the gate: on only with racing off (sweep.race_block=0), as in the design before issue 42's default
    exp = make_exp(*OLD_DESIGN, "sweep.gate_tasks=3", "sweep.gate_z=0.5", "sweep.parent_selection=pareto",
                   "sweep.operator_choice=bandit", "sweep.max_merges=0", operators=ops, **kw)
    exp.sweep.n_trials = 4
    return exp


def test_gate_passes_a_planted_improvement_and_gates_a_harmful_one(make_exp):
    exp = _gate_exp(make_exp, "add_tool", "harm")
    runner = HarmRunner(load_tasks(exp.benchmark))
    summary = run_sweep(exp, runner, propose=harm_propose, out=lambda s: None)
    trials = {t.number: t for t in optuna.load_study(study_name=exp.sweep.name, storage=exp.sweep.storage).trials}
    search = [t for t in trials.values() if t.user_attrs.get("operator") != "baseline"]
    assert search and all("gate" in t.user_attrs for t in search)
    gated = [t for t in search if t.user_attrs.get("gated_out")]
    passed = [t for t in search if t.user_attrs["gate"]["passed"]]
    assert gated and all(HARM in t.user_attrs["instructions"]["research"] for t in gated)
    assert passed and all(BOOST in t.user_attrs["instructions"]["research"] for t in passed)
    for t in gated:  # stopped after the gate's 3 tasks, PRUNED, with the reason
        assert t.state == optuna.trial.TrialState.PRUNED
        assert t.user_attrs["fail_reason"].startswith("gated out on 3 task(s)")
        assert len(t.user_attrs["task_scores"]) == 3 and t.user_attrs["gate"]["sigma"] > 0
        assert sum(1 for r in runner.run_ids if f"-t{t.number}-" in r) == 3
    for t in passed:  # went on to the full train split, the gate's runs reused
        assert t.state == optuna.trial.TrialState.COMPLETE and len(t.user_attrs["task_scores"]) == 8
        assert sum(1 for r in runner.run_ids if f"-t{t.number}-" in r) == 8
    rows = {r["trial"]: r for r in Ledger(exp.sweep_dir / "ledger.jsonl").rows()}
    assert all(rows[t.number]["status"] == "gated" and rows[t.number]["reason"].startswith("gated out")
               for t in gated)
    assert summary.trials["gated"] == len(gated) and summary.trials["pruned"] >= len(gated)


def test_gated_trial_reaches_mlflow(make_exp):
    from mlflow.tracking import MlflowClient

    exp = _gate_exp(make_exp, "harm", mlflow=True)
    exp.sweep.n_trials = 2
    run_sweep(exp, HarmRunner(load_tasks(exp.benchmark)), propose=harm_propose, out=lambda s: None)
    from experiments.config import tracking_uri

    client = MlflowClient(tracking_uri(exp))
    xp = client.get_experiment_by_name(exp.sweep.name)
    runs = client.search_runs([xp.experiment_id], "tags.kind = 'trial' and tags.state = 'PRUNED'")
    assert runs and runs[0].data.tags["fail_reason"].startswith("gated out")


# -- merge ---------------------------------------------------------------------------------------------


def test_three_way_merge_keeps_both_sides_changes():
    anc = "Summarise the findings. Attribute each claim to its source."
    a = "Summarise the findings. Name a concrete tool. Attribute each claim to its source."
    b = "Summarise the findings. Attribute each claim to its source. Keep it short."
    assert three_way_merge(anc, a, b) == ("Summarise the findings. Name a concrete tool. Attribute each claim to "
                                          "its source. Keep it short.")
    assert three_way_merge(anc, "Summarise the findings.", b) == "Summarise the findings. Keep it short."


def _merge_state():
    base = dict(BASE)
    a = {**base, "research": base["research"] + " Name a concrete tool for every point."}
    b = {**base, "enumerated": base["enumerated"] + " Keep each item under 40 words."}
    c = {**a, "research": base["research"] + " Prefer primary sources."}  # a descendant of a
    ev = [Evaluated(0, base, candidate_hash(base), 5.0, scores={"t0": 5.0, "t1": 5.0, "t2": 5.0}),
          Evaluated(1, a, candidate_hash(a), 5.6, scores={"t0": 6.5, "t1": 5.0, "t2": 5.3}),
          Evaluated(2, b, candidate_hash(b), 5.5, scores={"t0": 5.0, "t1": 6.5, "t2": 5.0}),
          Evaluated(3, c, candidate_hash(c), 5.2, scores={"t0": 5.0, "t1": 5.0, "t2": 5.6})]
    lineage = {ev[0].hash: (), ev[1].hash: (ev[0].hash,), ev[2].hash: (ev[0].hash,), ev[3].hash: (ev[1].hash,)}
    return SearchState(base, tuple(ev), {}, {}, lineage, outcomes=(("add_tool", True),)), ev


def test_merge_pair_takes_two_front_members_with_a_common_ancestor():
    state, ev = _merge_state()
    assert set(state.front()) == {ev[1].hash, ev[2].hash, ev[3].hash}
    pairs = {frozenset(x.hash for x in state.merge_pair(random.Random(i))[:2]) for i in range(30)}
    # c descends from a: never merged with it; b pairs with either over the baseline
    assert frozenset({ev[1].hash, ev[3].hash}) not in pairs and pairs
    a, b, anc = state.merge_pair(random.Random(0))
    assert anc.hash == ev[0].hash
    assert merge_pair(["x", "y"], {"x": ("p",), "y": ("q",)}, {"x": 1, "y": 1}, random.Random(0)) is None


def test_merge_candidate_is_a_child_of_both_front_parents(make_exp):
    exp = make_exp()
    state, ev = _merge_state()
    objective = Objective(exp, ScriptedRunner(load_tasks(exp.benchmark)), load_tasks(exp.benchmark), state=state)
    p = objective.merge_candidate(ev[1], ev[2], ev[0], number=7)
    assert p.instructions == {"research": ev[1].instructions["research"],
                              "enumerated": ev[2].instructions["enumerated"]}  # the side that changed, per type
    assert p.parent_hashes == (ev[1].hash, ev[2].hash) and p.operator == "merge"
    both = objective.merge_candidate(ev[3], ev[2], ev[0], number=8)  # c and b over the baseline
    assert both.instructions["enumerated"] == ev[2].instructions["enumerated"]


# -- operator credit -------------------------------------------------------------------------------------


def _trial(number, value, state, **attrs):
    return optuna.trial.create_trial(state=state, value=value if state == optuna.trial.TrialState.COMPLETE else None,
                                     user_attrs=attrs)


def test_credit_goes_to_the_operator_used():
    C, P = optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED
    base = dict(BASE)
    bh = candidate_hash(base)
    trials = [_trial(0, 5.0, C, operator="baseline", instruction_hash=bh, instructions=base),
              # asked for add_tool, fell back to noise: noise made the text and beat the parent
              _trial(1, 5.5, C, operator="noise", operator_requested="add_tool", instruction_hash="h1",
                     parent_hash=bh, instructions={**base, "research": "r1 text here please"}),
              _trial(2, None, P, operator="add_tool", operator_requested="add_tool", instruction_hash="h2",
                     parent_hash=bh, gated_out=True, instructions={**base, "research": "r2 text here please"})]
    for i, t in enumerate(trials):
        t.number = i
    state = state_from_trials(trials, base)
    assert state.outcomes == (("noise", True), ("add_tool", False))
    credit = credit_from(state.outcomes, ["add_tool", "noise"])
    assert credit == {"add_tool": Credit(0, 1), "noise": Credit(1, 1)}
    assert state.last_won is False


def test_thompson_prefers_the_credited_winner():
    credit = {"good": Credit(9, 10), "bad": Credit(1, 10)}
    picks = Counter(thompson_choice(credit, ["good", "bad"], random.Random(i)) for i in range(300))
    assert picks["good"] > 270
    assert credit_from([("a+b", True)], ["a", "b", "c"]) == {"a": Credit(1, 1), "b": Credit(1, 1), "c": Credit(0, 0)}


def test_bandit_sweep_records_requested_and_used(make_exp):
    exp = make_exp("sweep.operator_choice=bandit")
    exp.sweep.n_trials = 4
    run_sweep(exp, ScriptedRunner(load_tasks(exp.benchmark)), propose=scripted_propose, out=lambda s: None)
    study = optuna.load_study(study_name=exp.sweep.name, storage=exp.sweep.storage)
    search = [t for t in study.trials if t.user_attrs.get("operator") != "baseline"]
    assert search and all(t.user_attrs["operator_requested"] in ("add_tool", "noise") for t in search)
    assert all("operator" not in t.params for t in search)  # the bandit, not TPE, chose
    rows = Ledger(exp.sweep_dir / "ledger.jsonl").rows()
    assert {r["operator"] for r in rows if r["trial"] > 0} <= {"add_tool", "noise"}


def _asked(exp, state, numbers):
    """operator_requested of one objective call per trial number (real mutators.propose, no model: an LLM operator
    falls back), on the given search state."""
    tasks = load_tasks(exp.benchmark)
    objective = Objective(exp, ScriptedRunner(tasks), tasks, state=state)
    asked = Counter()
    for n in numbers:
        objective(optuna.trial.FixedTrial({}, number=n))
        asked[objective.last.operator_requested] += 1
    return asked


def test_the_bandit_does_not_offer_crossover_while_the_pool_holds_one_distinct_instruction(make_exp):
    """Issue 31 item 8d. Before (6cbf984) Thompson sampling over [reflect, opro, crossover] asked for crossover on
    about a third of the trials while the pool held the baseline alone: crossover cannot apply there and fell back
    every time."""
    exp = make_exp("sweep.operator_choice=bandit", "sweep.gate_tasks=0", "sweep.pruner=none",
                   operators=("reflect", "opro", "crossover"))
    base = dict(BASE)
    scores = {f"t{i}": 5.0 for i in range(8)}
    alone = SearchState(base, (Evaluated(0, base, candidate_hash(base), 5.0, scores=scores),))
    assert alone.offered(exp.sweep.operators, ["enumerated", "research"], max_chars=1200) == ["reflect", "opro"]
    asked = _asked(exp, alone, range(1, 25))
    assert asked["crossover"] == 0 and asked["reflect"] + asked["opro"] == 24
    # two distinct instructions per task type: crossover can apply, and the bandit asks for it
    other = {tt: f"{text} Keep every item short." for tt, text in base.items()}
    two = SearchState(base, (*alone.evaluated, Evaluated(1, other, candidate_hash(other), 5.1, scores=scores)))
    assert two.offered(exp.sweep.operators, ["enumerated", "research"], max_chars=1200) == ["reflect", "opro",
                                                                                           "crossover"]
    assert _asked(exp, two, range(1, 25))["crossover"] > 0


# -- the pruner's threshold over repeated looks ---------------------------------------------------------


def test_pocock_matches_the_published_constant():
    # Pocock (1977): two-sided 0.05 over 5 looks -> 0.0158 per look, i.e. one-sided 0.025 -> 0.0079
    assert pocock_p(0.025, 5) == pytest.approx(0.0079, abs=0.0004)
    assert pocock_p(0.1, 1) == 0.1
    assert pruner_threshold(0.1, 8, 2, "none") == 0.1
    assert pruner_threshold(0.1, 8, 2, "pocock") < 0.04


def test_config_validation(make_exp):
    from experiments.config import ConfigError, validate

    exp = make_exp(operators=("reorder",))
    exp.sweep.parent_selection = "worst"
    with pytest.raises(ConfigError, match="sweep.parent_selection='worst' is not allowed"):
        validate(exp)
    exp = make_exp(operators=("reorder",))
    exp.sweep.gate_z = 9.0
    with pytest.raises(ConfigError, match="sweep.gate_z=9.0 is out of range"):
        validate(exp)


def test_gate_is_off_on_a_train_split_it_would_cover(make_exp):
    exp = _gate_exp(make_exp, "harm", n_train=3, n_holdout=1)
    exp.sweep.n_trials = 2
    run_sweep(exp, HarmRunner(load_tasks(exp.benchmark)), propose=harm_propose, out=lambda s: None)
    trials = optuna.load_study(study_name=exp.sweep.name, storage=exp.sweep.storage).trials
    assert not any("gate" in t.user_attrs for t in trials)


class HeldGateRunner(ScriptedRunner):
    """ScriptedRunner whose runs make real model calls (harness.inference.RoleLLM over a FakeLLM, 10 ms each): 2
    per task, 20 for the task `until`. It records the order runs start in; the run of task `hold` waits (up to
    5 s) for the run of `until` to start, so a test sees whether the rest of a trial starts while the gate's last
    task runs, and whether a dropped run stops at its next call."""

    def __init__(self, tasks, hold: str = "", until: str = "") -> None:
        import threading

        from harness.inference._fake import FakeLLM
        from harness.inference._roles import fake_roles

        super().__init__(tasks)
        self.fake = FakeLLM(keyed={"": "ok"}, latency_s=0.01)
        self.roles = fake_roles(self.fake)
        self.started: list[str] = []
        self.hold, self.until, self.lock = hold, until, threading.Lock()
        self.until_started = threading.Event()

    def calls_for(self, task: str) -> int:
        return sum(1 for c in self.fake.calls if c.messages[0]["content"].startswith(task + " #"))

    def finish(self, prepared, **kw):
        from experiments.runs import Usage

        task = prepared["task"]
        with self.lock:
            self.started.append(task)
        if task == self.until:
            self.until_started.set()
        if task == self.hold:
            self.until_started.wait(5)
        n = 20 if task == self.until else 2
        for k in range(n):
            self.roles.producer.chat([{"role": "user", "content": f"{task} #{k}"}])
        out = super().finish(prepared, **kw)
        return type(out)(**{**out.__dict__, "usage": Usage(llm_calls=n)})


@pytest.mark.parametrize("go_on", [False, True])
def test_the_rest_of_a_trial_starts_while_the_gate_runs_and_a_stop_drops_it_as_at_concurrency_1(make_exp, go_on):
    """evaluate_candidate's checkpoint (the gate): one queue, gate tasks first. At concurrency 2 the first task
    after the gate starts before the gate's last result is in (the held run waits for it); when the gate says
    stop, the run in flight ends at its next model call and is dropped, counted with the calls it made; the
    scores, and what the checkpoint saw, are those of concurrency 1, where nothing after the gate starts before
    its decision."""
    from experiments.runs import evaluate_candidate
    from experiments.runs import RunPool

    exp = _gate_exp(make_exp, "add_tool")
    tasks = load_tasks(exp.benchmark)
    order = [5, 2, 7, 0, 1, 3, 4, 6]
    until = tasks[order[3]].task
    got = {}
    for workers in (1, 2):
        runner = HeldGateRunner(tasks, hold=tasks[order[2]].task if workers > 1 else "", until=until)
        contexts = {t.id: runner.prepare(t.task) for t in tasks}
        seen = []

        def go(scores):
            seen.append(([s.task_id for s in scores], list(runner.started)))
            return go_on

        ev = evaluate_candidate(dict(BASE), tasks, runner, contexts=contexts, pool=RunPool(workers), order=order,
                                checkpoint=(3, go))
        got[workers] = (ev, seen, runner)
    (ev1, seen1, r1), (ev2, seen2, r2) = got[1], got[2]
    assert [s.task_id for s in ev1.scores] == [s.task_id for s in ev2.scores] == [tasks[i].id for i in
                                                                                   order[:8 if go_on else 3]]
    assert [s.score for s in ev1.scores] == [s.score for s in ev2.scores]
    assert seen1[0][0] == seen2[0][0] == [tasks[i].id for i in order[:3]]
    assert seen1[0][1] == [tasks[i].task for i in order[:3]]  # concurrency 1: nothing ran ahead of the decision
    assert until in seen2[0][1]  # concurrency 2: the rest's first task was already running
    assert (ev1.stopped, ev2.stopped) == (not go_on, not go_on)
    assert (ev1.abandoned, ev1.abandoned_calls) == (0, 0) and r1.calls_for(until) == (20 if go_on else 0)
    if go_on:
        assert r2.calls_for(until) == 20 and ev2.abandoned == 0
    else:
        assert ev2.abandoned == len(r2.started) - 3 >= 1
        assert ev2.abandoned_calls == len(r2.fake.calls) - 3 * 2  # all but the gate's kept runs' calls
        assert 0 < r2.calls_for(until) < 20  # it stopped at its next call instead of finishing its task


def test_a_gated_sweep_decides_the_same_at_concurrency_1_and_3(make_exp):
    """The gate's speculative start changes nothing recorded but the dropped runs: states, values, task scores,
    gate decisions and ledger rows of a sweep with gated-out and passing trials are those of concurrency 1."""
    from experiments.runs import RunPool

    def sweep(workers):
        exp = _gate_exp(make_exp, "add_tool", "harm")
        exp.sweep.name = f"gate-conc{workers}"
        exp.sweep.n_trials = 6
        runner = HarmRunner(load_tasks(exp.benchmark))
        run_sweep(exp, runner, propose=harm_propose, out=lambda s: None, pool=RunPool(workers))
        trials = optuna.load_study(study_name=exp.sweep.name, storage=exp.sweep.storage).trials
        keep = ("trial", "state", "value", "operator", "instruction_hash", "task_scores", "status", "reason")
        rows = [{k: r.get(k) for k in keep} for r in Ledger(exp.sweep_dir / "ledger.jsonl").rows()]
        return [(t.number, t.state, t.value, t.user_attrs.get("task_scores"), t.user_attrs.get("gate"),
                 t.user_attrs.get("gated_out")) for t in trials], rows, trials

    (t1, rows1, raw1), (t3, rows3, raw3) = sweep(1), sweep(3)
    assert t1 == t3 and rows1 == rows3
    assert any(g for *_, g in t1) and any(gate and gate["passed"] for *_, gate, _ in t1)
    assert not any("abandoned_tasks" in t.user_attrs for t in raw1)
    for t in raw3:  # what was dropped is said, and only on a stopped trial
        if "abandoned_tasks" in t.user_attrs:
            assert t.user_attrs.get("gated_out") or t.state == optuna.trial.TrialState.PRUNED
            assert t.user_attrs["abandoned_calls"] == 0  # counted at the model seam: HarmRunner calls no model


def test_the_benchmarks_issue_14_loop_keeps_the_shipped_search_and_spends_its_race_and_holdout_within_the_budget():
    """bench/power/optimizer_sim.py's "new" loop is issue 14's search (operators, operator credit, gate, final race)
    as the shipped config has its search parts; the decision design around it (racing, train filter, holdout runs,
    futility) is issue 42's, simulated in bench/power/sensitivity.py (the next test). The final race's and the
    holdout's runs come out of the same budget."""
    import importlib.util
    from pathlib import Path

    from experiments.config import compose_config, to_experiment

    path = Path(__file__).resolve().parents[1] / "bench" / "power" / "optimizer_sim.py"
    spec = importlib.util.spec_from_file_location("optimizer_sim_under_test", path)
    sim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sim)
    shipped = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]), environ={}).sweep
    # issue 14's loop with its final race and gate, which the shipped design replaced by racing (race_block)
    figures = sim.main(["--loops", "new", "--seeds", "3", "--budget", "120"])
    args = figures["args"]
    assert (args["operators"], args["new_operators"], args["gate_z"]) == (
        shipped.operator_choice, list(shipped.operators), shipped.gate_z)
    assert (args["race_top"], args["gate"], args["new_baseline_repeats"]) == (2, 3, 2)
    assert figures["rows"]["new"]["evaluations"] <= 120
    # one world by hand: the race re-ran the two leaders on every train task, inside the budget
    w = sim.MutationWorld(0, 8, 4, 0.8, 0.3)
    ns = sim.argparse.Namespace(**{**args, "budget": 120})
    seeds: Counter = Counter()
    score = w.score
    w.score = lambda c, task, seed=0: seeds.update([seed]) or score(c, task, seed)  # noqa: E731
    result = sim.loop_new(w, ns)
    assert result["evaluations"] <= 120 and seeds[sim.RACE_SEED] == 2 * 8


def test_the_shipped_decision_design_is_the_one_bench_sensitivity_simulated():
    """conf/sweep/synth_mutation.yaml and the default benchmark are bench/power/sensitivity.py's "new" design (issue
    42): what docs/SENSITIVITY.md and VERDICTS.md claim for the default is what the sweep runs."""
    import sys
    from pathlib import Path

    from experiments.config import compose_config, to_experiment

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "bench" / "power"))
    try:
        from sensitivity import NEW
    finally:
        sys.path.remove(str(root / "bench" / "power"))
    exp = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]), environ={})
    sw = exp.sweep
    assert (len(exp.tasks("train")), len(exp.tasks("holdout"))) == (NEW.n_train, NEW.n_hold)
    assert NEW.search == "race" and (sw.race_block, sw.race_z) == (NEW.race_block, NEW.race_z)
    assert sw.baseline_repeats == (2 if NEW.baseline_repeat else 1) and sw.race_top == NEW.final_race_top
    assert sw.train_filter == NEW.train_filter and sw.holdout_top_k == NEW.hold_top_k
    assert (sw.holdout_candidate_runs, sw.holdout_baseline_runs) == (NEW.hold_runs, NEW.hold_runs)
    assert NEW.futility and not NEW.efficacy and sw.holdout_futility_block == NEW.seq_block
    assert sw.holdout_test == "tasks" and sw.alpha == 0.05 and sw.max_task_loss == NEW.max_task_loss
    assert NEW.skip_cut  # a candidate the filter cuts runs no holdout (tests/test_issue42_promotion.py)
