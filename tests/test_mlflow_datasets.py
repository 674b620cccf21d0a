"""MLflow datasets and per-task tables: each benchmark split is a dataset input of the sweep's runs (name, digest,
context, source), and a run's per-task scores are one table artifact, not one metric key per task."""

from __future__ import annotations

from pathlib import Path

import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial

from experiments.config import compose_config, holdout_set, load_tasks, to_experiment
from experiments.config._schema import TaskSpec
from experiments.runs import CandidateEval, TaskScore
from experiments.tracking import log_evaluation_run
from experiments.tracking._datasets import CONTEXT_TAG, read_task_scores, split_digest
from experiments.tracking._mlflow import MLflowTracker


@pytest.fixture
def exp():
    e = to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake", "benchmark=smoke"]))
    e.sweep.name = "datasets_test"
    return e


def _inputs(tracker, run_id):
    """(name, digest, context, source) of a run's dataset inputs."""
    out = []
    for i in tracker.client.get_run(run_id).inputs.dataset_inputs:
        tags = {t.key: t.value for t in i.tags}
        out.append((i.dataset.name, i.dataset.digest, tags.get(CONTEXT_TAG), i.dataset.source))
    return sorted(out, key=lambda r: r[2])


def _trial(number, scores, **attrs):
    t = create_trial(state=TrialState.COMPLETE, value=sum(scores.values()) / len(scores),
                     params={"operator": "opro"}, distributions={"operator": CategoricalDistribution(["opro"])},
                     user_attrs={"operator": "opro", "task_scores": scores, "dimensions": {"depth": 6.0},
                                 "judge_sd": 0.1, "llm_calls": 4, **attrs},
                     intermediate_values={0: 5.0, 1: 6.0})
    t.number = number
    return t


def _many_tasks(exp, n_train, n_holdout):
    topics = ["asyncio", "threading", "sqlite3", "pathlib", "logging", "typing", "itertools", "functools"]
    exp.benchmark.name = f"many{n_train + n_holdout}"
    exp.benchmark.tasks = [TaskSpec(id=f"t{i:02d}", task=f"List {i + 2} uses of {topics[i % 8]} in case {i}.",
                                    task_type="enumerated", expected_count=i + 2,
                                    split="train" if i < n_train else "holdout")
                           for i in range(n_train + n_holdout)]


def test_parent_and_trial_runs_carry_the_benchmark_splits_as_datasets(exp):
    tracker = MLflowTracker(exp)
    tracker.start(exp)
    tasks = load_tasks(exp.benchmark)
    train = [t for t in tasks if t.split == "train"]
    source = str(Path(__file__).resolve().parents[1] / "conf" / "benchmark" / "smoke.yaml")
    got = _inputs(tracker, tracker.parent_id)
    assert [(n, d, c) for n, d, c, _ in got] == [("smoke", holdout_set(tasks)["sha256"], "holdout"),
                                                 ("smoke", split_digest(train), "train")]
    assert all(source in s for *_, s in got)  # the source is the benchmark's YAML
    assert split_digest(train) != holdout_set(tasks)["sha256"]

    again = MLflowTracker(exp)  # a resume finds the parent and logs the same datasets: nothing added
    again.start(exp)
    assert again.parent_id == tracker.parent_id and len(_inputs(again, again.parent_id)) == 2

    tracker.sync([_trial(0, {t.id: 5.0 + i for i, t in enumerate(train)}, operator="baseline")])
    (run,) = tracker.trial_runs()
    assert [(n, d, c) for n, d, c, _ in _inputs(tracker, run.info.run_id)] == [("smoke", split_digest(train), "train")]


def test_a_changed_task_text_is_a_new_digest(exp, tmp_path):
    first = MLflowTracker(exp)
    first.start(exp)
    before = {c: d for _, d, c, _ in _inputs(first, first.parent_id)}

    exp.benchmark.tasks[0].task = exp.benchmark.tasks[0].task + " Keep it short."
    exp.sweep.name = "datasets_test_edited"
    assert exp.benchmark.tasks[0].split == "train"
    second = MLflowTracker(exp)
    second.start(exp)
    after = {c: d for _, d, c, _ in _inputs(second, second.parent_id)}
    assert after["train"] != before["train"] and after["holdout"] == before["holdout"]


def test_a_40_task_run_logs_few_metrics_and_a_table_of_its_tasks(exp):
    _many_tasks(exp, 40, 40)
    tracker = MLflowTracker(exp)
    tracker.start(exp)
    holdout = [t for t in load_tasks(exp.benchmark) if t.split == "holdout"]
    assert len(holdout) == 40
    ev = CandidateEval(tuple(TaskScore(t.id, t.task_type, 4.0 + i / 10) for i, t in enumerate(holdout)))
    log_evaluation_run(tracker, "holdout-abc", {"kind": "holdout", "instruction_hash": "abc"}, ev)
    (run,) = tracker.child_runs("holdout")
    metrics = run.data.metrics
    assert len(metrics) < 15 and not any(k.startswith("task.") for k in metrics)
    assert metrics["n_tasks"] == 40 and metrics["composite"] == pytest.approx(ev.mean)
    scores = read_task_scores(tracker.client, run.info.run_id)
    assert scores == pytest.approx(ev.by_task()) and len(scores) == 40
    assert [c for _, _, c, _ in _inputs(tracker, run.info.run_id)] == ["holdout"]

    # a trial's metric keys do not grow with its tasks: 4 tasks and 40 tasks log the same keys
    train = [t.id for t in load_tasks(exp.benchmark) if t.split == "train"]
    tracker.sync([_trial(0, {t: 5.0 for t in train[:4]}, operator="baseline"),
                  _trial(1, {t: 5.5 for t in train})])
    runs = {int(r.data.tags["trial_number"]): r for r in tracker.trial_runs()}
    assert set(runs[0].data.metrics) == set(runs[1].data.metrics) and runs[1].data.metrics["n_tasks"] == 40
    assert len(read_task_scores(tracker.client, runs[1].info.run_id)) == 40
