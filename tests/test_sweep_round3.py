"""Issue 52, the sweep's items: A4 (a pairwise promotion's registry evidence), A8 (the MLflow parent run carries
what the verdict rests on, split by split; unmeasured noise is missing; raced-out trials are not KILLED), B2 (a
lost holdout_answers.jsonl is re-run, then judged), B3 (a moved results folder logs inside itself), B4 (a judge
whose replies are never readable fails the conclusion, spends no look, and the rerun judges again) and B9 (a
wrong-typed line of holdout_answers.jsonl is named and treated as lost).

Sweeps are scripted (tests/test_issue42_pairwise_holdout.py's AnswerRunner and real-typed Judge double: no model),
driven through experiments.sweep.run_sweep as the CLI drives it.
"""

from __future__ import annotations

import dataclasses
import json
import shutil

import optuna
import pytest
from scripted_harness import scripted_propose
from test_issue42_pairwise_holdout import AnswerRunner, Judge, _no_score_gain, _pairwise

from experiments.config import load_tasks, registry_uri, tracking_uri
from experiments.sweep import run_sweep
from experiments.sweep._study import open_study
from harness.synthesis import CHAMPION, prompt_name, prompt_version, registry_client

optuna.logging.set_verbosity(optuna.logging.WARNING)

ANSWERS = "holdout_answers.jsonl"


def _small(make_exp, name):
    """A pairwise sweep on 6 holdout tasks, one holdout run of each text: 6 pairs, sign-flip p 1/64 when the judge
    prefers every candidate answer (below the first look's level 0.025)."""
    return _pairwise(make_exp, name, holdout=6, holdout_candidate_runs=1, holdout_baseline_runs=1)


def _run(exp, judge, lines=None):
    runner = AnswerRunner(load_tasks(exp.benchmark), _no_score_gain)
    out = lines.append if lines is not None else (lambda s: None)
    return run_sweep(exp, runner, propose=scripted_propose, out=out, judge=judge), runner


def _text(lines):
    return "\n".join(lines)


def _holdout_runs(runner):
    return [r for r in runner.run_ids if "-holdout-" in r]


def _parent(exp):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri(exp))
    found = client.get_experiment_by_name(exp.mlflow.experiment or exp.sweep.name)
    (parent,) = client.search_runs([found.experiment_id], filter_string="tags.sweep_parent = 'true'")
    return client, found, parent


# -- A4: the registry says what a pairwise promotion rests on --------------------------------------------------


def test_a4_a_pairwise_promotion_is_registered_as_a_sign_flip_over_preferences(make_exp):
    """On ac27838 the champion's evidence says "one-sided paired t over 6 holdout tasks" for a promotion the
    sign-flip over per-task preferences made (p 1/2^6) and that claims 'preferred on more tasks'."""
    exp = _small(make_exp, "a4")
    exp.mlflow.enabled = True
    s, _ = _run(exp, Judge())
    assert s.promoted
    client = registry_client(registry_uri(exp))
    changed = [tt for tt, text in s.promoted_instructions.items() if text != s.baseline_instructions[tt]]
    assert changed
    for tt in changed:
        tags = prompt_version(client, prompt_name(exp.mlflow.prompt_prefix, tt), CHAMPION, None).tags
        test = tags["holdout_test"]
        assert "paired t" not in test
        assert "sign-flip" in test and "preference" in test and "6 holdout tasks" in test
        assert "preferred on more" in test  # what the claim is, not a mean effect
        assert float(tags["holdout_p_value"]) == pytest.approx(1 / 2 ** 6, rel=1e-3)
        assert float(tags["holdout_preference"]) == pytest.approx(1.0)


# -- A8: the parent run carries the verdict's figures, named by split -----------------------------------------


def test_a8_the_parent_run_carries_the_holdout_verdict_and_no_unmeasured_noise(make_exp):
    """On ac27838 the parent run logs the train filter's best_diff / best_p_value (the train Wilcoxon, 'not used'),
    no holdout difference, p or level, and noise_sigma / noise_floor 0.0 when nothing measured them."""
    exp = _small(make_exp, "a8")
    exp.mlflow.enabled = True
    s, _ = _run(exp, Judge())
    (row,) = s.holdout
    assert s.promoted and s.noise.repeats < 2  # the shipped design measures no train noise
    _, _, parent = _parent(exp)
    m = parent.data.metrics
    assert "best_diff" not in m and "best_p_value" not in m
    assert m["train_best_diff"] == pytest.approx(s.best_comparison.diff)
    assert m["train_best_p"] == pytest.approx(s.best_comparison.p_value)
    assert m["holdout_diff"] == pytest.approx(row.holdout_diff)
    assert m["holdout_p"] == pytest.approx(1 / 2 ** 6)
    assert m["holdout_level"] == pytest.approx(row.holdout_level)
    assert m["holdout_look_level"] == pytest.approx(0.025)
    assert m["holdout_n_tasks"] == 6 and m["holdout_preference"] == pytest.approx(1.0)
    assert m["promoted"] == 1.0
    assert not any(k.startswith(("noise_sigma", "noise_floor", "train_noise")) for k in m), m
    tags = parent.data.tags
    assert "sign-flip" in tags["holdout_test"] and tags["holdout_trial"] == str(row.trial)


def test_a8_a_raced_out_trial_ends_finished_and_says_so(make_exp):
    """A candidate the race drops is a result, not a run a user killed: on ac27838 its MLflow run ends KILLED."""
    from test_issue42_promotion import RuleRunner, _exp

    exp = _exp(make_exp, "sweep.name=a8race", "sweep.n_trials=3", race_block=4, holdout_futility_block=0)
    exp.mlflow.enabled = True
    # naming a tool loses 2 on every train task: the race drops the candidate at its first block
    runner = RuleRunner(load_tasks(exp.benchmark), lambda instr, tid, part: -2.0 if "concrete tool" in
                        instr.lower() else 0.0)
    run_sweep(exp, runner, propose=scripted_propose, out=lambda s: None)
    raced = [t for t in open_study(exp).get_trials() if t.user_attrs.get("raced_out")]
    assert raced
    client, found, parent = _parent(exp)
    runs = {int(r.data.tags["trial_number"]): r for r in client.search_runs(
        [found.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}' and tags.kind = 'trial'")}
    for t in raced:
        r = runs[t.number]
        assert r.info.status == "FINISHED" and r.data.tags["state"] == "PRUNED"
        assert r.data.tags["pruned"] == "raced out"
    assert "KILLED" not in {r.info.status for r in runs.values()}


# -- B2: a lost answer file is re-run, then judged -------------------------------------------------------------


def test_b2_a_lost_answer_file_is_rerun_and_the_study_finishes(make_exp):
    """The judge died after 2 of the 6 pairs; holdout_answers.jsonl is then deleted. On ac27838 every rerun exits 3 with
    "rerun its holdout run ... run the same command again", which changes nothing. Now the rerun says what was lost,
    runs again the holdout task runs whose answers the unjudged pairs need (their stored scores are kept), judges
    them, and concludes; a further rerun runs and judges nothing."""
    exp = _small(make_exp, "b2")
    cut, _ = _run(exp, Judge(die_after=2))
    assert cut.unconcluded
    (exp.sweep_dir / ANSWERS).unlink()
    scores_before = dict(open_study(exp).user_attrs["holdout"])

    lines: list[str] = []
    rest = Judge()
    s, runner = _run(exp, rest, lines)
    assert not s.unconcluded and s.promoted, s.unconcluded
    assert len(rest.seen) == 6 - 2
    text = _text(lines)
    assert f"{ANSWERS}" in text and "lost" in text and "rerun its holdout run" not in text
    # only the task runs the 4 unjudged pairs need, of both texts: none of the 2 judged pairs' tasks runs again
    assert len(_holdout_runs(runner)) == 2 * 4
    assert dict(open_study(exp).user_attrs["holdout"]) == scores_before  # the scores the futility used stay

    again = Judge()
    s2, runner2 = _run(exp, again)
    assert again.seen == [] and not _holdout_runs(runner2) and s2.promoted


# -- B4: a judge never readable is a failed judge ----------------------------------------------------------------


def test_b4_a_judge_never_readable_concludes_nothing_and_the_rerun_judges_again(make_exp):
    """Every pairwise reply unreadable. On ac27838: 'does not win', p 1.0, look 1 spent, exit 0, and a rerun with a
    healthy judge changes nothing. Now: not concluded (the CLI exits 3), no look spent, nothing stored, and the
    rerun judges every pair again and promotes."""
    exp = _small(make_exp, "b4")
    every = [f"h{i}" for i in range(6)]
    lines: list[str] = []
    cut, _ = _run(exp, Judge(unreadable=every), lines)
    (row,) = cut.holdout
    assert cut.unconcluded and not cut.promoted and row.holdout_p is None and not row.wins
    assert "could be read" in row.error
    study = open_study(exp)
    assert "holdout_looks" not in study.user_attrs
    assert not study.user_attrs.get("holdout_pairs", {}).get(row.hash)
    assert "NOT CONCLUDED" in _text(lines)

    rest = Judge()
    s, _ = _run(exp, rest)
    assert len(rest.seen) == 6 and s.promoted and not s.unconcluded
    (row,) = s.holdout
    assert row.holdout_p == pytest.approx(1 / 2 ** 6)


class CachedJudge(Judge):
    """A judge behind a response cache (harness.inference.CachedLLM keys a reply on its seed): a pair asked again
    with a seed it has answered gets the stored reply back, unreadable if it was."""

    def __init__(self, cache: dict, **kw):
        super().__init__(**kw)
        self.cache = cache

    def __call__(self, task, candidate, baseline, seed):
        key = (task.id, candidate, baseline, seed)
        if key not in self.cache:
            self.cache[key] = super().__call__(task, candidate, baseline, seed)
        return self.cache[key]


def test_b4_the_rerun_judges_with_new_seeds_past_a_response_cache(make_exp):
    """The unreadable replies are cached (same model, same seeds): the rerun after the server is mended asks with
    the next judge round's seeds, so it reads fresh replies and concludes."""
    exp = _small(make_exp, "b4cache")
    cache: dict = {}
    cut, _ = _run(exp, CachedJudge(cache, unreadable=[f"h{i}" for i in range(6)]))
    assert cut.unconcluded
    s, _ = _run(exp, CachedJudge(cache))
    assert s.promoted and not s.unconcluded, s.unconcluded
    assert open_study(exp).user_attrs["holdout_judge_round"] == 1


def test_b4_some_unreadable_replies_still_count_against_the_candidate(make_exp):
    """The judge reads most pairs: an unreadable one is a missing preference, counted -1, and the look concludes."""
    s, _ = _run(_small(make_exp, "b4some"), Judge(unreadable=("h3",)))
    (row,) = s.holdout
    assert not s.unconcluded and row.holdout_p is not None and row.preference == pytest.approx(4 / 6)


# -- B9: a wrong-typed answer line is named and treated as lost ---------------------------------------------------


def test_b9_a_wrong_typed_answer_line_is_named_and_rerun(make_exp):
    """A line with "seed": "zero": on ac27838 the rerun exits 1 with `ValueError: invalid literal for int()` and no
    file named. Now one line names the file and the line, the line counts as lost, the holdout run it held is run
    again for its answer, and the study concludes."""
    exp = _small(make_exp, "b9")
    cut, _ = _run(exp, Judge(die_after=0))
    assert cut.unconcluded
    path = exp.sweep_dir / ANSWERS
    rows = path.read_text(encoding="utf-8").splitlines()
    bad = json.loads(rows[4])
    bad["seed"] = "zero"
    rows[4] = json.dumps(bad)
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")

    lines: list[str] = []
    s, runner = _run(exp, Judge(), lines)
    assert not s.unconcluded and s.promoted
    named = [ln for ln in lines if f"{path}:5" in ln]
    assert len(named) == 1 and "seed" in named[0], _text(lines)
    assert len(_holdout_runs(runner)) == 1  # the run of the text and seed whose answer that line held


# -- B3: a moved results folder logs inside itself --------------------------------------------------------------


def test_b3_a_moved_results_folder_logs_inside_itself_and_ends_its_parent(make_exp, tmp_path, monkeypatch):
    """Run with every store in results/, `mv results res_moved`, leave a file where results/ was (not writable),
    then the same sweep with results_dir=res_moved and one more trial. On ac27838 MLflow writes its artifacts to
    <old>/mlartifacts: NotADirectoryError, and the parent run stays RUNNING. Now the run logs under res_moved."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    old, new = tmp_path / "results", tmp_path / "res_moved"
    exp = _small(make_exp, "b3")
    exp.mlflow.enabled, exp.sweep.storage, exp.results_dir = True, None, str(old)
    _run(exp, Judge())
    assert (old / "mlflow.db").exists() and (old / "mlartifacts").is_dir()
    shutil.move(str(old), str(new))
    old.write_text("not a folder\n")

    moved = dataclasses.replace(exp, results_dir=str(new), sweep=dataclasses.replace(exp.sweep, n_trials=3))
    lines: list[str] = []
    s, _ = _run(moved, Judge(), lines)
    assert old.read_text() == "not a folder\n"
    client, found, parent = _parent(moved)
    assert parent.info.status == "FINISHED"
    assert found.artifact_location.startswith(new.resolve().as_uri())
    assert parent.info.artifact_uri.startswith(new.resolve().as_uri())
    assert client.list_artifacts(parent.info.run_id)  # summary.md and the rest, inside res_moved
    assert (new / "mlartifacts").is_dir() and not any(p.is_dir() for p in tmp_path.glob("results*"))
    note = [ln for ln in lines if "MLflow: experiment 'b3'" in ln]
    assert len(note) == 1 and str(old) in note[0] and "renamed" in note[0], _text(lines)
    # the study's trials are logged under the new parent; the old runs stay in the renamed experiment
    trials = client.search_runs([found.experiment_id], filter_string="tags.kind = 'trial'")
    assert sorted(int(r.data.tags["trial_number"]) for r in trials) == [0, 1, 2]
    (kept,) = [e for e in client.search_experiments() if e.name.startswith("b3 (before its results folder moved")]
    assert client.search_runs([kept.experiment_id], filter_string="tags.sweep_parent = 'true'")


def test_b3_a_parent_whose_files_cannot_be_written_is_not_left_running(make_exp, tmp_path):
    """An MLflow store outside results_dir (shared on purpose: left as it is) whose experiment keeps its artifacts
    where no folder can be made: the run fails, and on ac27838 its parent run stays RUNNING (the FAILED status was
    set only after error.txt, which cannot be written either). Now the parent ends FAILED."""
    from mlflow import MlflowClient

    exp = _small(make_exp, "b3fail")
    exp.mlflow.enabled = True
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder\n")
    MlflowClient(tracking_uri=tracking_uri(exp)).create_experiment(
        "b3fail", artifact_location=(blocker / "mlartifacts").as_uri())
    with pytest.raises(NotADirectoryError):
        _run(exp, Judge())
    _, found, parent = _parent(exp)
    assert found.artifact_location == (blocker / "mlartifacts").as_uri()  # a store outside results_dir: untouched
    assert parent.info.status == "FAILED"


def test_b3_a_context_trace_from_before_the_move_is_found_in_the_moved_folder(tmp_path):
    """The context cache keeps a preparation trace's absolute path (<old>/traces/prepare-....json). After the move
    the runs that reuse the context read it: on ac27838 that raised (NotADirectoryError where a file stands at
    <old>: 'MLflow logging failed: TraceLoggingError: 0 of 3 task traces logged'). Now it is found by name beside
    the run's own trace (the traces/ folder moved with the results), and the run's trace shows the preparation."""
    from experiments.runs import FailedRun
    from experiments.tracking._traces import CONTEXT_SPAN, load_run_trace
    from harness.tracing import Tracer

    old, new = tmp_path / "results", tmp_path / "res_moved"
    prep = Tracer("prepare-1")
    with prep.span("plan"):
        pass
    prepared = prep.write(old / "traces")
    shutil.move(str(old), str(new))
    old.write_text("not a folder\n")
    run = Tracer("run-1")
    with run.span("synthesis"):
        pass
    trace = load_run_trace(FailedRun("t0", "research", "boom", trace_path=str(run.write(new / "traces")),
                                     context_trace_path=str(prepared)))
    (span,) = [e for e in trace.events if e["name"] == CONTEXT_SPAN]
    assert span["args"]["prepare_trace"] == str(new / "traces" / prepared.name)
