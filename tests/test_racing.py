"""Racing by blocks of train tasks (issue 42, lever e): experiments.search._optimizer.race_step's rule, and a sweep with
sweep.race_block = 4 that races a clearly worse proposal out after its first block and lets a clearly better one
run every train task, recorded as the gate's decisions are (Optuna, the ledger, MLflow, the summary).

race_step is imported inside the tests that call it, so that on 3306971 (no race_step, no sweep.race_block) the
sweep test fails on what the sweep did, not on an import."""

from __future__ import annotations

import math

import optuna
import pytest
from test_optimizer import BOOST, HARM, HarmRunner, harm_propose

from experiments.config import load_tasks
from experiments.storage import Ledger
from experiments.sweep import run_sweep

optuna.logging.set_verbosity(optuna.logging.WARNING)

LEADER = {"a": 5.0, "b": 6.0, "c": 5.5, "d": 7.0}


# -- the rule ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "child, z, passed, n, sd",
    [
        # m = 1: no spread to test, kept however bad (the simulation's NaN bound never drops)
        ({"a": 1.0}, 1.0, True, 1, None),
        # m = 2: d = -0.5, -0.7: mean -0.6, sample sd 0.1414 (ddof 1); bound -0.6 + 0.1 = -0.5 < 0: dropped
        ({"a": 4.5, "b": 5.3}, 1.0, False, 2, math.sqrt(0.02)),
        # m = 2, d = +0.5, -1.5: mean -0.5, sd 1.414; bound -0.5 + 1.0 = +0.5: kept (the spread covers it)
        ({"a": 5.5, "b": 4.5}, 1.0, True, 2, math.sqrt(2.0)),
        # ... but at z = 0 the mean alone decides: dropped
        ({"a": 5.5, "b": 4.5}, 0.0, False, 2, math.sqrt(2.0)),
        # m = 3, every difference -0.2: sd 0, dropped exactly because the mean is below 0
        ({"a": 4.8, "b": 5.8, "c": 5.3}, 1.0, False, 3, 0.0),
        # m = 3, every difference 0: sd 0, mean 0: kept (a tie with the leader is not dominated)
        ({"a": 5.0, "b": 6.0, "c": 5.5}, 1.0, True, 3, 0.0),
        # m = 4, clearly better: kept
        ({"a": 6.5, "b": 7.4, "c": 7.1, "d": 8.6}, 1.0, True, 4, None),
    ],
)
def test_race_step_drops_what_the_leader_dominates(child, z, passed, n, sd):
    from experiments.search._optimizer import race_step

    d = race_step(child, LEADER, z)
    diffs = [child[t] - LEADER[t] for t in child]
    mean = sum(diffs) / len(diffs)
    assert d.passed is passed and d.n == n and d.diff == pytest.approx(mean)
    if sd is not None:
        assert d.sigma == pytest.approx(sd, abs=1e-12)
    if n >= 2:  # the bound is mean + z sd / sqrt(m) with the sample sd of the differences
        s = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (n - 1))
        assert d.bound == pytest.approx(mean + z * s / math.sqrt(n))
        assert d.passed is (d.bound >= 0)
    else:
        assert d.sigma is None
    assert d.reason.startswith("passed" if passed else "raced out") and "leader" in d.reason
    assert d.as_attr()["rule"] == "race"


def test_race_step_uses_the_tasks_both_have_and_refuses_bad_input():
    from experiments.search._optimizer import race_looks, race_step

    d = race_step({"a": 4.0, "b": 5.0, "zz": 99.0}, LEADER, 1.0)  # zz: the leader has no score there
    assert d.n == 2 and d.tasks == ("a", "b") and d.diff == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="no common task"):
        race_step({"zz": 1.0}, LEADER, 1.0)
    for z in (-0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="z >= 0 and finite"):
            race_step({"a": 1.0}, LEADER, z)
    # looks after every block but the last task (the simulation's bench/power/sens/rules.looks_at less the end)
    assert race_looks(16, 4) == (4, 8, 12) and race_looks(12, 4) == (4, 8) and race_looks(8, 4) == (4,)
    # a remainder smaller than a block joins the last block (experiments.stats.interim_looks): no look two tasks
    # before the end
    assert race_looks(10, 4) == (4,) and race_looks(4, 4) == () and race_looks(8, 0) == ()


def test_race_config_keys_are_validated(make_exp):
    from harness.config import ConfigError

    from experiments.config import validate

    exp = make_exp("sweep.race_block=4", "sweep.race_z=0.5")
    assert (exp.sweep.race_block, exp.sweep.race_z) == (4, 0.5)
    assert make_exp().sweep.race_block == 4  # the shipped design races in blocks of 4 (issue 42; 0 = the gate)
    for key, bad in (("race_block", -1), ("race_z", -0.1), ("race_z", float("inf"))):
        exp = make_exp()
        setattr(exp.sweep, key, bad)
        with pytest.raises(ConfigError, match=f"sweep.{key}="):
            validate(exp, warn=False)


# -- the sweep ---------------------------------------------------------------------------------------


def _race_exp(make_exp, *ops, **kw):
    """The shipped synth_mutation (its 3-task gate included) with racing switched on, as a user would:
    sweep.race_block=4 on the command line (set on the object so that the base commit runs it too)."""
    exp = make_exp("sweep.operator_choice=bandit", "sweep.max_merges=0", operators=ops, **kw)
    exp.sweep.race_block = 4  # 8 train tasks: one look, after the first block of 4
    exp.sweep.race_z = 1.0
    exp.sweep.n_trials = 5
    return exp


@pytest.mark.parametrize("gate_tasks", [3, 0])  # the shipped gate on (racing replaces it) or off
def test_a_worse_proposal_is_raced_out_after_its_first_block_and_a_better_one_runs_every_task(make_exp, gate_tasks):
    exp = _race_exp(make_exp, "add_tool", "harm", mlflow=True)
    assert exp.sweep.gate_tasks == 3
    exp.sweep.gate_tasks = gate_tasks
    runner = HarmRunner(load_tasks(exp.benchmark))
    lines: list[str] = []
    summary = run_sweep(exp, runner, propose=harm_propose, out=lines.append)
    trials = optuna.load_study(study_name=exp.sweep.name, storage=exp.sweep.storage).trials
    search = [t for t in trials if t.user_attrs.get("operator") != "baseline"]
    worse = [t for t in search if HARM in t.user_attrs["instructions"]["research"]]
    assert worse
    for t in worse:  # -3 on every task: stopped after the first block of 4, PRUNED, with the race's reason
        assert sum(1 for r in runner.run_ids if f"-t{t.number}-" in r) == 4, "not stopped after its first block"
        assert t.state == optuna.trial.TrialState.PRUNED
        assert t.user_attrs["fail_reason"].startswith("raced out after 4 task(s): mean difference to the leader")
        assert t.user_attrs["gated_out"] and t.user_attrs["raced_out"]
        g = t.user_attrs["gate"]
        assert g["rule"] == "race" and not g["passed"] and g["n"] == 4 and g["diff"] < -2
        assert len(t.user_attrs["task_scores"]) == 4
    base = next(t.number for t in trials if t.user_attrs.get("operator") == "baseline")
    # +1.5 on every task against the baseline leader (a second concrete-tool edit on a concrete-tool leader only
    # ties with it: the race may drop that one, as the leader dominates it by the noise alone)
    better = [t for t in search if HARM not in t.user_attrs["instructions"]["research"]
              and BOOST in t.user_attrs["instructions"]["research"] and t.user_attrs["gate"]["leader_trial"] == base]
    assert better
    for t in better:  # +1.5 on every task: passed its look, ran all 8 train tasks, COMPLETE
        assert sum(1 for r in runner.run_ids if f"-t{t.number}-" in r) == 8
        assert t.state == optuna.trial.TrialState.COMPLETE and len(t.user_attrs["task_scores"]) == 8
        assert t.user_attrs["gate"]["rule"] == "race" and t.user_attrs["gate"]["passed"]
        assert [look["n"] for look in t.user_attrs["gate"]["looks"]] == [4]
    rows = {r["trial"]: r for r in Ledger(exp.sweep_dir / "ledger.jsonl").rows()}
    assert all(rows[t.number]["status"] == "gated" and rows[t.number]["reason"].startswith("raced out")
               for t in worse)
    raced = [t for t in trials if t.user_attrs.get("raced_out")]
    assert {t.number for t in worse} <= {t.number for t in raced} and summary.trials["gated"] == summary.trials["raced"] == len(raced)
    assert any(f"{len(raced)} of the pruned raced out" in line for line in lines)

    from mlflow.tracking import MlflowClient

    from experiments.config import tracking_uri

    client = MlflowClient(tracking_uri(exp))
    xp = client.get_experiment_by_name(exp.sweep.name)
    runs = client.search_runs([xp.experiment_id], "tags.kind = 'trial' and tags.state = 'PRUNED'")
    assert runs and all(r.data.tags["fail_reason"].startswith("raced out") for r in runs)


def test_racing_compares_with_the_leader_not_the_parent(make_exp):
    """Each look is race_step against the leader, the best complete train mean when the trial started (the
    baseline trial until a better proposal completes), on the tasks the trial had run."""
    from experiments.search._optimizer import race_step

    exp = _race_exp(make_exp, "add_tool", "harm")
    runner = HarmRunner(load_tasks(exp.benchmark))
    run_sweep(exp, runner, propose=harm_propose, out=lambda s: None)
    trials = sorted(optuna.load_study(study_name=exp.sweep.name, storage=exp.sweep.storage).trials,
                    key=lambda t: t.number)
    done = {t.user_attrs["instruction_hash"]: t for t in trials if t.state == optuna.trial.TrialState.COMPLETE}
    for t in trials:
        g = t.user_attrs.get("gate")
        if not g:
            continue
        before = [d for d in done.values() if d.number < t.number]
        leader = max(before, key=lambda d: (d.value, -d.number))
        assert g["parent"] == leader.user_attrs["instruction_hash"] and g["leader_trial"] == leader.number
        # the recorded look is race_step on the scores the trial and its leader had
        first = {k: v for k, v in t.user_attrs["task_scores"].items() if k in g["tasks"]}
        again = race_step(first, leader.user_attrs["task_scores"], 1.0)
        assert (again.passed, again.n) == (g["passed"], g["n"]) and again.diff == pytest.approx(g["diff"], abs=1e-3)


# -- the 12 + 12 split: a re-split benchmark is another objective, and the refusal names what moved ------------


def test_a_resplit_benchmark_is_refused_on_resume_naming_the_tasks_that_moved(make_exp):
    """Moving train tasks to the holdout (the 12 + 12 split of issue 42) changes the benchmark fingerprint: a stored
    study refuses to resume, in one line naming the moved tasks with their old and new split (on 3306971 the line
    showed the first 77 characters of both id lists, which read the same)."""
    import dataclasses

    from scripted_harness import ScriptedRunner, scripted_propose

    from experiments.sweep._study import StudyMismatch

    exp = make_exp(operators=("add_tool",), n_train=10, n_holdout=6)
    exp.sweep.n_trials = 1
    run_sweep(exp, ScriptedRunner(load_tasks(exp.benchmark)), propose=scripted_propose, out=lambda s: None)
    moved = {"t8", "t9"}
    exp.benchmark.tasks = [dataclasses.replace(t, split="holdout") if t.id in moved else t
                           for t in exp.benchmark.tasks]
    with pytest.raises(StudyMismatch) as info:
        run_sweep(exp, ScriptedRunner(load_tasks(exp.benchmark)), propose=scripted_propose, out=lambda s: None)
    msg = str(info.value)
    assert "\n" not in msg and "benchmark.ids" in msg
    assert '["t8:train", "t9:train"] -> ["t8:holdout", "t9:holdout"] (16 -> 16 entries)' in msg


def test_a_race_with_two_looks_decides_the_same_at_concurrency_1_and_3(make_exp):
    """12 train tasks, blocks of 4: looks after 4 and 8 tasks. At concurrency 3 the tasks after a look start while
    its last ones run (one queue) and a raced-out trial drops them: states, values, task scores, every look and the
    ledger rows are those of concurrency 1."""
    from experiments.runs import RunPool

    def sweep(workers):
        exp = _race_exp(make_exp, "add_tool", "harm", n_train=12, n_holdout=6)
        exp.sweep.name = f"race-conc{workers}"
        exp.sweep.n_trials = 6
        runner = HarmRunner(load_tasks(exp.benchmark))
        run_sweep(exp, runner, propose=harm_propose, out=lambda s: None, pool=RunPool(workers))
        trials = optuna.load_study(study_name=exp.sweep.name, storage=exp.sweep.storage).trials
        keep = ("trial", "state", "value", "operator", "instruction_hash", "task_scores", "status", "reason")
        rows = [{k: r.get(k) for k in keep} for r in Ledger(exp.sweep_dir / "ledger.jsonl").rows()]
        return [(t.number, t.state, t.value, t.user_attrs.get("task_scores"), t.user_attrs.get("gate"))
                for t in trials], rows

    (t1, rows1), (t3, rows3) = sweep(1), sweep(3)
    assert t1 == t3 and rows1 == rows3
    looks = [[look["n"] for look in g["looks"]] for *_, g in t1 if g]
    assert [4] in looks and [4, 8] in looks  # raced out at the first look, and a proposal that passed both


def test_a_run_dropped_with_its_raced_out_trial_is_not_reported_failed():
    """The README main command printed `task 5/12 gil-threads-vs-asyncio FAILED` for the two runs in flight when
    the race dropped their trial after 4 tasks: they were abandoned (harness.inference.RunAbandoned at their next
    model call), not failed. They are said as stopped and left out of the per-task time and cost the ETA and the
    preflight update project from (they ran part of a task)."""
    from experiments.runs._outcome import TaskOutcome, Usage
    from experiments.sweep._progress import SweepProgress

    lines: list[str] = []
    progress = SweepProgress("s", lines.append)
    progress.begin("trial 3/3 #2", "t2", 12)
    usage = Usage(prompt_tokens=900, completion_tokens=300, llm_calls=3)
    progress.task_done("finish", "t2-asyncio-pitfalls", TaskOutcome(status="ok", score=5.0, usage=usage), 40.0)
    abandoned = TaskOutcome.failed("task 'gil' failed: RunAbandoned: producer call not made: the run was abandoned "
                                   "(its trial stopped)", usage=Usage(prompt_tokens=300, llm_calls=1))
    progress.task_done("finish", "t2-gil-threads-vs-asyncio", abandoned, 3.0)
    broken = TaskOutcome.failed("task 'x' failed: BackendError: the server refused", usage=Usage())
    progress.task_done("finish", "t2-asyncio-streams", broken, 5.0)
    assert "task 1/12 asyncio-pitfalls score 5.000" in lines[0]
    assert "task 2/12 gil-threads-vs-asyncio stopped with its trial" in lines[1] and "FAILED" not in lines[1]
    assert "task 3/12 asyncio-streams FAILED" in lines[2]
    assert progress.task_s == [40.0, 5.0] and len(progress.measured) == 2  # the abandoned run's part is not a task
