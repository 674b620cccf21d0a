"""MLflow tracking: URI resolution, parent run reused on resume, one child run per trial with the right status."""

from __future__ import annotations

import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from experiments.config import compose_config, to_experiment
from experiments.config import tracking_uri
from experiments.tracking import instruction_diff, ui_command
from experiments.tracking._datasets import read_task_scores
from experiments.tracking._mlflow import MLflowTracker


@pytest.fixture
def exp():
    e = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake"]))
    e.sweep.name = "track_test"
    return e


def _trial(number, state, value=None, **attrs):
    t = create_trial(
        state=state, value=value if state == TrialState.COMPLETE else None,
        params={"operator": attrs.get("operator", "opro")},
        distributions={"operator": CategoricalDistribution(["opro", "reflect", "baseline"])},
        user_attrs=attrs, intermediate_values={0: 5.0, 1: 6.0} if state != TrialState.FAIL else {},
    )
    t.number = number
    return t


def test_tracking_uri_precedence(exp, monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert tracking_uri(exp) == f"sqlite:///{(tmp_path / 'results' / 'mlflow.db').resolve()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////x/env.db")
    assert tracking_uri(exp) == "sqlite:////x/env.db"
    exp.mlflow.tracking_uri = "sqlite:////x/cfg.db"
    assert tracking_uri(exp) == "sqlite:////x/cfg.db"
    assert ui_command("sqlite:////x/cfg.db") == "mlflow ui --backend-store-uri sqlite:////x/cfg.db"


def test_parent_run_is_found_again_and_children_carry_status(exp):
    tracker = MLflowTracker(exp)
    tracker.start(exp, smoke=True)
    parent = tracker.parent_id
    base = {"research": "Summarise the sources."}
    trials = [
        _trial(0, TrialState.COMPLETE, 6.0, operator="baseline", instruction_hash="aaa", instructions=base,
               task_scores={"t0": 6.0}, dimensions={"depth": 6.5}, judge_sd=0.2, llm_calls=4),
        _trial(1, TrialState.FAIL, operator="opro", instruction_hash="bbb", fail_reason="task 't0' failed: boom"),
        _trial(2, TrialState.PRUNED, operator="reflect", instruction_hash="ccc", partial_value=4.0,
               instructions={"research": "Summarise the sources. Name tools."}),
    ]
    assert tracker.sync(trials, base) == 3
    assert tracker.sync(trials, base) == 0  # idempotent

    again = MLflowTracker(exp)
    again.start(exp)
    assert again.parent_id == parent
    runs = {int(r.data.tags["trial_number"]): r for r in again.trial_runs()}
    assert sorted(runs) == [0, 1, 2]
    # a pruned trial finished what the design asked of it (issue 52 A8): FINISHED, tagged, never KILLED
    assert [runs[i].info.status for i in range(3)] == ["FINISHED", "FAILED", "FINISHED"]
    assert runs[2].data.tags["state"] == "PRUNED" and runs[2].data.tags["pruned"] == "pruned"
    assert runs[0].data.metrics["composite"] == 6.0 and runs[0].data.metrics["n_tasks"] == 1
    assert read_task_scores(again.client, runs[0].info.run_id) == {"t0": 6.0}  # per task: a table, not metric keys
    assert not any(k.startswith("task.") for k in runs[0].data.metrics)
    assert runs[0].data.metrics["dim.depth"] == 6.5 and runs[0].data.metrics["judge_sd"] == 0.2
    assert runs[0].data.params["operator"] == "baseline" and runs[0].data.params["backend"] == "fake"
    assert runs[0].data.params["memory_frozen"] == "True" and runs[0].data.params["reuse_context"] == "True"
    assert runs[1].data.tags["fail_reason"].startswith("task 't0' failed")
    assert runs[2].data.metrics["composite"] == 4.0
    assert all(r.data.tags.get("smoke") == "true" for r in runs.values())
    assert all(r.data.tags["mlflow.parentRunId"] == parent for r in runs.values())
    arts = {f.path for f in again.client.list_artifacts(runs[2].info.run_id, "instructions")}
    assert arts == {"instructions/research.md", "instructions/diff_vs_baseline.patch"}
    again.finish({"noise_floor": 0.3}, {"summary.md": "x\n"})
    assert again.client.get_run(parent).info.status == "FINISHED"
    assert again.client.get_run(parent).data.metrics["noise_floor"] == 0.3


def test_instruction_diff_is_a_unified_diff_per_task_type():
    d = instruction_diff({"research": "A. B."}, {"research": "A. B. C."})
    assert "--- baseline/research" in d and "+C." in d
    assert instruction_diff({"research": "A."}, {"research": "A."}) == ""




def test_a_trial_another_worker_synced_is_not_logged_again(exp):
    # worker B starts while worker A has told trial 0 but not logged it yet: B's sync logs it (a crash between tell
    # and logging looks the same from outside); A's log after tell must then not make a second run
    a, b = MLflowTracker(exp), MLflowTracker(exp)
    a.start(exp)
    b.start(exp)
    base = {"research": "Summarise the sources."}
    told = _trial(0, TrialState.COMPLETE, 6.0, operator="baseline", instruction_hash="aaa", instructions=base,
                  task_scores={"t0": 6.0})
    assert b.sync([told], base) == 1
    assert a.log_trial_once(told, None, baseline=base) is False
    fresh = _trial(1, TrialState.COMPLETE, 6.5, operator="opro", instruction_hash="bbb", task_scores={"t0": 6.5})
    assert a.log_trial_once(fresh, None, baseline=base) is True
    assert b.sync([told, fresh], base) == 0
    numbers = sorted(int(r.data.tags["trial_number"]) for r in a.trial_runs())
    assert numbers == [0, 1]
