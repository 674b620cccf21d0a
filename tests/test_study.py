"""The study room on Optuna's public API: a heartbeat keeps another host's trial alive, a silent one goes stale."""

from __future__ import annotations

import time

import optuna

from experiments.promotion._confirmation import HoldoutScores
from experiments.sweep._study import holdout_run, open_store, store_holdout_run, stored_holdout

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_a_trial_with_a_heartbeat_stays_running_and_one_without_is_failed_after_the_grace_period(make_exp):
    store = open_store(make_exp("sweep.heartbeat_s=1"))  # heartbeat every 1 s, grace period 2 s
    beating, silent = store.study.ask(), store.study.ask()
    for t in (beating, silent):
        t.set_user_attr("worker_host", "another-host")  # not this host: only the heartbeat can tell
    with store.heartbeat(beating.number):
        with store.heartbeat(silent.number):
            pass  # one beat, then silence
        time.sleep(3.0)
        assert store.fail_stale_trials() == [silent.number]
    states = {t.number: t.state.name for t in store.study.get_trials(deepcopy=False)}
    assert states == {beating.number: "RUNNING", silent.number: "FAIL"}
    assert store.trial_id(silent.number) != store.trial_id(beating.number)


def test_holdout_runs_are_stored_once_per_text_and_seed_and_averaged_per_task():
    study = optuna.create_study()  # in-memory: the attrs are what a resumed sweep reads back
    first, second = {"h0": 5.0, "h1": 6.0}, {"h0": 6.0, "h1": 7.0, "h2": 1.0}
    assert holdout_run(study, "x", 0, 0) is None and stored_holdout(study.user_attrs, "x") is None
    store_holdout_run(study, "x", 0, 0, first)
    store_holdout_run(study, "x", 1, 1, second)
    store_holdout_run(study, "y", 0, 0, first)
    assert holdout_run(study, "x", 1, 1) == second and holdout_run(study, "x", 1, 2) is None
    assert study.user_attrs["holdout"] == {"x": first, "y": first}  # run 0 where it was before repeats existed
    assert study.user_attrs["holdout_repeats"] == {"x": {"1": second}}
    # the common tasks, each run 0.5 from its task mean: within-task spread 4 x 0.25 on 2 df
    assert stored_holdout(study.user_attrs, "x") == HoldoutScores({"h0": 5.5, "h1": 6.5}, None, 2, 1.0, 2)
    assert stored_holdout(study.user_attrs, "y") == HoldoutScores(first, None, 1)



# -- the decision rule is pinned with the objective (issue 31, item 4) ------------------------------------------


def _sweep(exp, runner=None):
    from scripted_harness import ScriptedRunner, scripted_propose

    from experiments.config import load_tasks
    from experiments.sweep import run_sweep

    runner = runner or ScriptedRunner(load_tasks(exp.benchmark), effect=0.3)
    return run_sweep(exp, runner, propose=scripted_propose, out=lambda s: None), runner


def _with(exp, **sweep):
    import dataclasses

    return dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, **sweep))


def test_a_resume_under_another_alpha_is_refused_naming_the_field_and_runs_nothing(make_exp):
    """Before the pin (6cbf984) the resume at alpha 0.3 ran 0 new task runs and changed the verdict."""
    import pytest
    from scripted_harness import ScriptedRunner

    from experiments.config import load_tasks
    from experiments.sweep._study import StudyMismatch

    exp = make_exp("sweep.n_trials=4", "sweep.alpha=0.01", "sweep.holdout_top_k=2", operators=("add_tool",))
    first, _ = _sweep(exp)
    study = open_store(exp).study
    before = (len(study.trials), dict(study.user_attrs))
    assert study.user_attrs["decision_rule"]["sweep"]["alpha"] == 0.01
    runner = ScriptedRunner(load_tasks(exp.benchmark), effect=0.3)
    with pytest.raises(StudyMismatch) as info:
        _sweep(_with(exp, alpha=0.3), runner)
    msg = str(info.value)
    assert "\n" not in msg and "1 field(s) differ: sweep.alpha: 0.01 -> 0.3" in msg
    assert f"sweep.name={exp.sweep.name}-" in msg
    assert runner.run_ids == [] and runner.prepares == 0  # nothing ran
    study = open_store(exp).study
    assert (len(study.trials), dict(study.user_attrs)) == before  # nothing was written


def test_every_decision_field_is_pinned_and_budget_and_search_fields_are_not(make_exp):
    import pytest

    from experiments.config._fingerprint import DECISION_RULE
    from experiments.sweep._study import StudyMismatch

    exp = make_exp("sweep.n_trials=2", operators=("add_tool",))
    _sweep(exp)
    sw = exp.sweep
    changed = {"alpha": 0.2, "baseline_repeats": sw.baseline_repeats + 1, "race_top": sw.race_top + 1,
               "holdout_top_k": sw.holdout_top_k + 1, "holdout_test": "floor" if sw.holdout_test != "floor" else "bound",
               "holdout_baseline_runs": sw.holdout_baseline_runs + 1,
               "holdout_candidate_runs": sw.holdout_candidate_runs + 1, "reuse_context": not sw.reuse_context,
               "cost_metric": "llm_calls", "max_cost_increase": 0.1,  # the cost guard (issue 34)
               "max_task_loss": 2.0,  # the worst-task guard (issue 40)
               "train_filter": "wilcoxon" if sw.train_filter != "wilcoxon" else "positive",  # issue 42
               "holdout_futility_block": sw.holdout_futility_block + 1,
               "holdout_compare": "pairwise" if sw.holdout_compare != "pairwise" else "pointwise"}  # issue 42, a
    assert set(changed) == set(DECISION_RULE)
    for field, value in changed.items():
        with pytest.raises(StudyMismatch, match=rf"1 field\(s\) differ: sweep\.{field}: "):
            _sweep(_with(exp, **{field: value}))
    # what only changes the budget or the search continues the study
    more = _with(exp, n_trials=3, timeout_s=3600.0, max_llm_calls=10_000, gate_tasks=2, gate_z=0.5, sampler="random",
                 operators=["add_tool", "noise"], operator_choice="bandit", pruner_p=0.2, seed=7)
    s, _ = _sweep(more)
    assert s.new_trials == 1 and s.trials["total"] == 3


def test_a_study_from_before_the_pinned_rule_is_pinned_now_with_a_note(make_exp):
    exp = make_exp("sweep.n_trials=2", operators=("add_tool",))
    _sweep(exp)
    study = open_store(exp).study
    study.set_user_attr("decision_rule", None)  # as a study made before the rule was pinned stored it: absent
    lines: list[str] = []
    from scripted_harness import ScriptedRunner, scripted_propose

    from experiments.config import load_tasks
    from experiments.sweep import run_sweep

    run_sweep(_with(exp, n_trials=3, alpha=0.1), ScriptedRunner(load_tasks(exp.benchmark)), propose=scripted_propose,
              out=lines.append)
    assert any("study predates the pinned decision rule" in ln for ln in lines)
    assert open_store(exp).study.user_attrs["decision_rule"]["sweep"]["alpha"] == 0.1


def test_the_cli_refuses_a_changed_decision_rule_in_one_line_and_writes_nothing(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    results = tmp_path / "cli-results"
    env = {**os.environ, "HARNESS_RESULTS_DIR": str(results), "DDGS_DISABLED": "1"}
    base = [sys.executable, "-m", "experiments.run", "+sweep=synth_mutation", "backend=fake", "benchmark=smoke",
            "sweep.allow_underpowered=true", "sweep.baseline_repeats=1", "sweep.name=rule", "mlflow.enabled=false",
            f"results_dir={results}"]
    first = subprocess.run(base + ["sweep.n_trials=1", "sweep.alpha=0.01"], cwd=root, env=env, capture_output=True,
                           text=True, timeout=120)
    # backend=fake answers no model call: the run says so and exits 3 (issue 41 item 1: it used to exit 0 with every
    # task failed); the study and its decision rule are stored all the same, which is what this test needs
    assert first.returncode == 3 and "run the same command again" in first.stderr, first.stderr[-2000:]

    def written() -> dict[str, int]:  # every file but the study database (read to compare) and its lock
        return {str(p.relative_to(results)): p.stat().st_mtime_ns for p in results.rglob("*")
                if p.is_file() and not p.name.startswith("optuna.db")}

    files = written()
    study = optuna.load_study(study_name="rule", storage=f"sqlite:///{results / 'optuna.db'}")
    trials, attrs = len(study.trials), dict(study.user_attrs)
    proc = subprocess.run(base + ["sweep.n_trials=2", "sweep.alpha=0.3"], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("config error: study 'rule' in sqlite:///")
    assert "1 field(s) differ: sweep.alpha: 0.01 -> 0.3" in lines[0]
    assert written() == files  # no Hydra run folder, trace, ledger or summary
    study = optuna.load_study(study_name="rule", storage=f"sqlite:///{results / 'optuna.db'}")
    assert (len(study.trials), dict(study.user_attrs)) == (trials, attrs)
