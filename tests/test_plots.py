"""Sweep plots (history, operators, per-task heatmap) and the rest of the user's view of a sweep: progress lines
with ETA, the summary block with both splits' CIs and where the artifacts are, plots logged to MLflow."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial
from conftest import OLD_DESIGN
from scripted_harness import ScriptedRunner, scripted_propose

from experiments.config import load_tasks
from experiments.sweep._study import open_study
from experiments.sweep import run_sweep
from experiments.promotion._evidence import split_scores
from experiments.sweep._summary import SUMMARY_BEGIN, SUMMARY_END, format_sweep
from experiments.tracking import sweep_plots
from experiments.tracking._plots import (HEATMAP_PNG, HISTORY_PNG, OPERATORS_PNG, QUALITY_COST_PNG, history_points,
                                         operator_stats, score_matrix)

optuna.logging.set_verbosity(optuna.logging.WARNING)
PNG = b"\x89PNG\r\n\x1a\n"
OPS = CategoricalDistribution(["add_tool", "noise", "crash"])


def _trial(number, state, value=None, *, op="add_tool", h=None, parent=None, dup=None, scores=None, partial=None):
    attrs = {"operator": op, "instruction_hash": h or f"h{number}", "parent_hash": parent}
    if dup is not None:
        attrs["duplicate_of"] = dup
    if scores is not None:
        attrs["task_scores"] = scores
    if partial is not None:
        attrs["partial_value"] = partial
    params, dists = ({}, {}) if op == "baseline" else ({"operator": op}, {"operator": OPS})
    t = create_trial(state=state, value=value, params=params, distributions=dists, user_attrs=attrs)
    t.number = number
    return t


# a small history: baseline 5.0; add_tool +1.0 over it, then +0.5 over itself; noise -0.2; a pruned noise; a failed
# crash; a duplicate of #1
TRIALS = [
    _trial(0, TrialState.COMPLETE, 5.0, op="baseline", h="base", scores={"a": 5.0, "b": 5.0}),
    _trial(1, TrialState.COMPLETE, 6.0, parent="base", scores={"a": 6.5, "b": 5.5}),
    _trial(2, TrialState.COMPLETE, 5.8, op="noise", parent="h1", scores={"a": 5.8, "b": 5.8}),
    _trial(3, TrialState.COMPLETE, 6.5, parent="h1", scores={"a": 7.0, "b": 6.0}),
    _trial(4, TrialState.PRUNED, op="noise", parent="h3", scores={"a": 4.0}, partial=4.0),
    _trial(5, TrialState.FAIL, op="crash", parent="h3"),
    _trial(6, TrialState.COMPLETE, 6.0, h="h1", parent="h3", dup=1),
]


def test_history_points_track_best_of_complete_trials_only():
    pts = history_points(TRIALS)
    assert [p.number for p in pts] == list(range(7))
    assert [p.best_so_far for p in pts] == [5.0, 6.0, 6.0, 6.5, 6.5, 6.5, 6.5]
    assert pts[4].state == "PRUNED" and pts[4].value == 4.0  # partial mean, never the best
    assert pts[5].value is None and pts[6].duplicate


def test_operator_stats_measure_gain_over_the_parent():
    stats = operator_stats(TRIALS)
    assert set(stats) == {"add_tool", "noise", "crash"}  # the baseline trial is not an operator
    add, noise, crash = stats["add_tool"], stats["noise"], stats["crash"]
    assert add.gains == pytest.approx((1.0, 0.5)) and add.mean_gain == pytest.approx(0.75)
    assert add.outcomes["improved"] == 2 and add.outcomes["duplicate"] == 1 and add.trials == 3
    assert add.gain_ci is not None and add.gain_ci[0] <= 0.75 <= add.gain_ci[1]
    assert noise.gains == pytest.approx((-0.2,)) and noise.gain_ci is None  # one gain: no interval
    assert noise.outcomes["not improved"] == 1 and noise.outcomes["pruned"] == 1
    assert crash.outcomes["failed"] == 1 and crash.mean_gain is None


def test_score_matrix_rows_columns_and_gaps():
    m = score_matrix(TRIALS, ["a", "b"], ["x"], holdout={"h3": {"x": 7.5}, "base": {"x": 5.5}, "h1": {"x": 6.0}})
    assert m.numbers == (0, 1, 2, 3, 4)  # failed and duplicate trials have no scores of their own
    assert m.rows[4] == "#4 noise (pruned)" and m.columns == ("a", "b", "x")
    assert m.values[3].tolist() == [7.0, 6.0, 7.5]
    assert m.values[0, 2] == 5.5 and m.values[1, 2] == 6.0
    assert math.isnan(m.values[4, 1]) and math.isnan(m.values[2, 2])  # pruned before b; noise not on holdout


def test_sweep_plots_write_pngs(tmp_path):
    paths = sweep_plots(TRIALS, tmp_path / "plots", train_tasks=["a", "b"], holdout_tasks=["x"],
                        holdout={"h3": {"x": 7.5}}, baseline=5.0, floor=0.3, highlight=[3], title="t")
    assert {p.name for p in paths.values()} == {HISTORY_PNG, OPERATORS_PNG, HEATMAP_PNG}
    for p in paths.values():
        assert p.read_bytes()[:8] == PNG and p.stat().st_size > 10_000
    empty = sweep_plots([], tmp_path / "empty", train_tasks=["a"])  # before any trial: still pictures, no crash
    assert all(p.exists() for p in empty.values())


@pytest.mark.parametrize(
    "cand, base, n, diff, has_ci",
    [
        ({"a": 6.0, "b": 7.0, "c": 8.0}, {"a": 5.0, "b": 5.0, "c": 6.0}, 3, 5 / 3, True),
        ({"a": 6.0, "z": 1.0}, {"a": 5.0}, 1, 1.0, False),  # one shared task: a mean, no interval
        (None, {"a": 5.0}, 0, None, False),  # never evaluated
    ],
)
def test_split_scores(cand, base, n, diff, has_ci):
    s = split_scores("holdout", cand, base, note="why")
    assert s.n == n
    assert (s.diff is None) if diff is None else s.diff == pytest.approx(diff)
    assert (s.diff_ci is not None) is has_ci
    if has_ci:
        assert s.diff_ci[0] <= s.diff <= s.diff_ci[1] and s.ci[0] <= s.mean <= s.ci[1]
    if n == 0:
        assert s.note == "why"


# -- a scripted sweep end to end ----------------------------------------------------------------------


@pytest.fixture
def make_exp(make_exp):
    """The shared scripted experiment (tests/conftest.py) with MLflow on: plots are logged to the parent run."""
    return functools.partial(make_exp, mlflow=True)


def _run(exp, **kw):
    lines: list[str] = []
    summary = run_sweep(exp, ScriptedRunner(load_tasks(exp.benchmark)), propose=scripted_propose, out=lines.append,
                        **kw)
    return summary, lines


def test_sweep_saves_plots_and_logs_them_on_the_parent_run(make_exp):
    exp = make_exp("sweep.n_trials=7", "sweep.pruner=none")
    summary, lines = _run(exp)
    plots = exp.sweep_dir / "plots"
    for name in (HISTORY_PNG, OPERATORS_PNG, HEATMAP_PNG):
        assert (plots / name).read_bytes()[:8] == PNG
    stats = operator_stats(open_study(exp).get_trials(deepcopy=False))
    add, noise = stats["add_tool"], stats["noise"]  # which operator paid: add_tool's first step gains the boost
    assert max(add.gains) > 1.0 > max(noise.gains) and add.mean_gain > noise.mean_gain

    from mlflow.tracking import MlflowClient

    from experiments.config import tracking_uri

    client = MlflowClient(tracking_uri(exp))
    eid = client.get_experiment_by_name(exp.sweep.name).experiment_id
    parent = client.search_runs([eid], "tags.sweep_parent = 'true'")[0]
    logged = {Path(a.path).name for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert logged == {HISTORY_PNG, OPERATORS_PNG, HEATMAP_PNG, QUALITY_COST_PNG}  # trials record their cost
    assert summary.mlflow_url == f"http://127.0.0.1:5000/#/experiments/{eid}/runs?workflowType=machine_learning"


def test_progress_lines_show_trial_task_best_elapsed_and_eta(make_exp):
    # every task of a trial that runs them all: the gate's design (racing would stop trial #1 after a block)
    exp = make_exp(*OLD_DESIGN, "sweep.n_trials=4", "sweep.pruner=none", "sweep.baseline_repeats=2",
                   "sweep.holdout_top_k=1", "sweep.holdout_baseline_runs=3", "sweep.holdout_candidate_runs=2", mlflow=False)
    _, lines = _run(exp)
    tasks = [ln for ln in lines if re.search(r" task \d+/\d+ ", ln)]
    # every evaluated task of every trial: trial i/n #number, task j/m, its id and score, elapsed, ETA of the trial
    assert [ln.split("] ")[1].split(" t")[0] for ln in tasks if "trial 2/4 #1" in ln] == ["trial 2/4 #1"] * 8
    assert re.search(r"trial 2/4 #1 task 8/8 t\d+ score \d+\.\d{3}  elapsed \d:\d\d:\d\d  ETA trial 0:00:00", "\n".join(tasks))
    assert sum("baseline repeat 2/2 task" in ln for ln in tasks) == 8
    # each holdout run of the baseline (3) and of the top candidate (2) on the 6 holdout tasks, named by its run
    assert [sum(f"holdout baseline run {k}/3 task" in ln for ln in tasks) for k in (1, 2, 3)] == [6, 6, 6]
    assert [sum(bool(re.search(rf"holdout [0-9a-f]{{12}} run {k}/2 task", ln)) for ln in tasks) for k in (1, 2)] == [6, 6]
    assert any(re.search(r"holdout [0-9a-f]{12} run 2/2 task 6/6", ln) for ln in tasks)
    trial_lines = [ln for ln in lines if re.search(r"\] trial \d/4 #\d \S+ +(COMPLETE|PRUNED|FAIL)", ln)]
    assert len(trial_lines) == 4
    assert all(re.search(r"best \d+\.\d{3} \(#\d\)  elapsed \d:\d\d:\d\d  ETA \d:\d\d:\d\d", ln) for ln in trial_lines)


def test_summary_block_has_both_splits_with_cis_and_artifact_locations(make_exp):
    exp = make_exp("sweep.n_trials=6", "sweep.pruner=none")
    summary, lines = _run(exp)
    text = "\n".join(lines)
    block = text[text.index(SUMMARY_BEGIN):text.index(SUMMARY_END)]
    assert block == (exp.sweep_dir / "summary.md").read_text()[:len(block)]
    best = summary.best_trial
    train = re.search(rf"best trial #{best} scores vs baseline.*\n  train +n=8: best (\S+) \[(\S+), (\S+)\]  baseline "
                      r"\S+ \[\S+, \S+\]  diff (\S+) \[(\S+), (\S+)\]", block)
    hold = re.search(r"\n  holdout +n=6: best (\S+) \[(\S+), (\S+)\]  baseline \S+ \[\S+, \S+\]  diff (\S+) "
                     r"\[(\S+), (\S+)\]", block)
    assert train and hold, block
    for m, scores in ((train, summary.best_scores[0]), (hold, summary.best_scores[1])):
        mean, lo, hi, diff, dlo, dhi = (float(x.rstrip("]")) for x in m.groups())
        assert lo <= mean <= hi and dlo <= diff <= dhi
        assert mean == pytest.approx(scores.mean, abs=1e-3) and diff == pytest.approx(scores.diff, abs=1e-3)
    assert float(hold.group(4)) > 1.0  # the scripted boost carries to the holdout
    best_text = open_study(exp).trials[best].user_attrs["instructions"]
    assert all(f"  [{tt}] {t}" in block for tt, t in best_text.items())
    assert "+Name a concrete tool for every point." in block  # the diff against the baseline
    assert f"plots: {exp.sweep_dir / 'plots'} ({HISTORY_PNG}, {OPERATORS_PNG}, {HEATMAP_PNG}, {QUALITY_COST_PNG})" in block
    assert f"study storage: {exp.storage_url} (study {exp.sweep.name})" in block
    assert f"ledger: {exp.sweep_dir / 'ledger.jsonl'}" in block
    assert re.search(r"MLflow UI: mlflow ui --backend-store-uri sqlite:///\S+\nMLflow runs: http://127\.0\.0\.1:5000/#/"
                     r"experiments/\d+/runs", block)
    # when the holdout promotes another trial than the train best, its text and diff follow
    other = {tt: t + " Cite a benchmark." for tt, t in best_text.items()}
    text2 = format_sweep(dataclasses.replace(summary, promoted=True, promoted_trial=best + 1,
                                               promoted_instructions=other))
    assert f"promoted instruction (trial #{best + 1}, best on the holdout among the winners):" in text2
    assert "+Cite a benchmark." in text2.split("promoted diff vs baseline:")[1]
    assert "promoted instruction" not in format_sweep(dataclasses.replace(summary, promoted_trial=best))


def test_holdout_not_evaluated_is_said_plainly(make_exp):
    exp = make_exp("sweep.n_trials=3", "sweep.pruner=none", mlflow=False, n_holdout=0)
    summary, lines = _run(exp)
    assert "  holdout  no holdout tasks" in "\n".join(lines)
    assert summary.best_scores[1].n == 0


def test_a_plotting_error_is_a_warning_not_a_failed_sweep(make_exp, monkeypatch):
    import experiments.tracking

    def broken(*a, **k):
        raise ValueError("no canvas")

    monkeypatch.setattr(experiments.tracking, "sweep_plots", broken)
    exp = make_exp("sweep.n_trials=3", "sweep.pruner=none", mlflow=False)
    summary, lines = _run(exp)
    assert summary.trials["total"] == 3
    assert any("warning: plots failed: ValueError: no canvas" in ln for ln in lines)
    assert "plots: (none: plotting failed)" in "\n".join(lines)


# -- issue 34 item 1: quality against cost, the Pareto front ----------------------------------------------------


@pytest.mark.parametrize("points, front", [
    ([(5.0, 100.0), (6.0, 200.0), (5.5, 300.0), (4.0, 50.0)], [3, 0, 1]),  # (5.5, 300) is beaten by (6, 200)
    ([(5.0, 100.0), (5.0, 100.0)], [0, 1]),  # equal points: neither dominates the other
    ([(5.0, 100.0), (5.0, 120.0), (4.0, 100.0)], [0]),  # same quality dearer / same cost worse: dominated
    ([(6.0, 100.0)], [0]),
    ([], []),
])
def test_pareto_front_keeps_the_points_nothing_beats_on_both(points, front):
    from experiments.stats import pareto_front

    assert pareto_front(points) == front


def _costly(number, state, value, tokens, **kw):
    t = _trial(number, state, value, **kw)
    if tokens is not None:
        t.user_attrs["task_costs"] = {"completion_tokens": {"a": tokens - 10, "b": tokens + 10},
                                      "llm_calls": {"a": 3, "b": 5}}
    return t


COSTLY = [
    _costly(0, TrialState.COMPLETE, 5.0, 200, op="baseline", h="base", scores={"a": 5.0, "b": 5.0}),
    _costly(1, TrialState.COMPLETE, 6.0, 400, parent="base", scores={"a": 6.0, "b": 6.0}),  # better, twice as long
    _costly(2, TrialState.COMPLETE, 5.5, 180, op="noise", parent="base", scores={"a": 5.5, "b": 5.5}),
    _costly(3, TrialState.COMPLETE, 5.2, 500, op="noise", parent="h1", scores={"a": 5.2, "b": 5.2}),  # dominated
    _costly(4, TrialState.PRUNED, None, 150, op="noise", parent="h1", scores={"a": 4.0}, partial=4.0),
    _costly(5, TrialState.COMPLETE, 6.0, 400, h="h1", parent="h3", dup=1),  # a duplicate: #1's text
    _costly(6, TrialState.COMPLETE, 5.9, None, parent="h1", scores={"a": 5.9, "b": 5.9}),  # no cost recorded
    _trial(7, TrialState.FAIL, op="crash", parent="h3"),
]


def test_quality_cost_points_and_front_of_a_sweep(tmp_path):
    from experiments.stats import pareto_front
    from experiments.tracking._trials import quality_cost_points, trial_cost

    pts = quality_cost_points(COSTLY)
    assert [(p.number, p.value, p.cost, p.pruned) for p in pts] == [
        (0, 5.0, 200.0, False), (1, 6.0, 400.0, False), (2, 5.5, 180.0, False), (3, 5.2, 500.0, False),
        (4, 4.0, 150.0, True)]  # no duplicate, no trial without a cost (not 0 tokens), no failed trial
    assert trial_cost(COSTLY[6], "completion_tokens") is None and trial_cost(COSTLY[0], "llm_calls") == 4.0
    done = [p for p in pts if not p.pruned]
    assert [done[i].number for i in pareto_front([(p.value, p.cost) for p in done])] == [2, 1]
    assert [p.cost for p in quality_cost_points(COSTLY, "llm_calls")] == [4.0] * 5


def test_quality_cost_png_is_written_and_joins_the_sweep_plots(tmp_path):
    from experiments.tracking._plots import plot_quality_cost

    path = plot_quality_cost(COSTLY, tmp_path / QUALITY_COST_PNG, promoted=2, title="t")
    assert path.read_bytes()[:8] == PNG and path.stat().st_size > 10_000
    paths = sweep_plots(COSTLY, tmp_path / "plots", train_tasks=["a", "b"], highlight=[1, 2], promoted=2,
                        cost_metric="llm_calls")
    assert paths["quality_cost"].name == QUALITY_COST_PNG and paths["quality_cost"].read_bytes()[:8] == PNG
    old = sweep_plots(TRIALS, tmp_path / "old", train_tasks=["a", "b"])  # a study without costs: the three plots
    assert "quality_cost" not in old
    empty = plot_quality_cost([], tmp_path / "empty.png")  # nothing measured yet: a picture that says so
    assert empty.read_bytes()[:8] == PNG
