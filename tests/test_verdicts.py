"""Verdicts a user can trust: each test pins one way the sweep gave a wrong or impossible answer before.

Checked against c040a71 (main before the fix): the reachability, fingerprint, de-duplication, attribution,
traceback, re-score and pruner tests fail there (no refusal, resume under another model continues the study,
repeats are proposed and caught only as duplicate_of, the requested operator is credited, a TypeError in an
operator becomes a quiet fallback, the trial value is the wiggum loop's own best, 'median' is accepted).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from conftest import OLD_DESIGN
from pipeline_fake import Router, judge_json, make_harness, read_trace
from scripted_harness import ScriptedRunner, scripted_propose

from experiments.config import load_tasks
from experiments.config import ConfigError, compose_config, to_experiment, validate
from experiments.runs import TaskOutcome
from experiments.runs._outcome import outcome_from_result
from experiments.storage import Ledger
from experiments.sweep._study import StudyMismatch, open_study
from experiments.sweep import run_sweep
from harness.config import EvaluatorConfig

optuna.logging.set_verbosity(optuna.logging.WARNING)
ROOT = Path(__file__).resolve().parents[1]


def _sweep(exp, runner=None, propose=scripted_propose, lines=None):
    runner = runner or ScriptedRunner(load_tasks(exp.benchmark))
    return run_sweep(exp, runner, propose=propose, out=(lines.append if lines is not None else lambda s: None)), runner


# -- 1. a design that cannot reach alpha is refused before anything runs ---------------------------------------


def test_readme_main_command_on_the_smoke_benchmark_is_refused_in_one_line_and_writes_nothing(tmp_path):
    results = tmp_path / "fresh-results"
    env = {"PATH": "/usr/bin:/bin", "HARNESS_RESULTS_DIR": str(results), "DDGS_DISABLED": "1"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "experiments.run", "+sweep=synth_mutation", "benchmark=smoke",
                           f"results_dir={results}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    # the shipped design's check (issue 42: no Wilcoxon train filter) is the holdout's: 2 holdout tasks all moving
    # the same way give an exact sign-flip p of 1/4, above the first look's 0.025
    assert len(lines) == 1 and lines[0].startswith("config error: sweep: 2 holdout tasks cannot reach the first "
                                                   "holdout look's level 0.025 (alpha 0.05 / 2)")
    assert "p = 1/2^2 = 0.25" in lines[0] and "sweep.allow_underpowered=true" in lines[0]
    assert not results.exists()  # no study, no MLflow store, no Hydra run folder, no cache
    assert elapsed < 10


@pytest.mark.parametrize("overrides, fragment", [
    # the Wilcoxon train filter's reachability on 3 train tasks, and its noise floor
    ([*OLD_DESIGN, "benchmark=smoke"], "smallest one-sided exact Wilcoxon p over 3 train tasks is 0.125"),
    ([*OLD_DESIGN, "sweep.baseline_repeats=1"], "measures no noise floor"),
    (["sweep.holdout_top_k=0"], "no candidate can be confirmed on held-out tasks"),
])
def test_sweep_designs_that_cannot_promote_are_refused(overrides, fragment):
    exp = to_experiment(compose_config(["+sweep=synth_mutation", *overrides]))
    with pytest.raises(ConfigError, match=fragment) as info:
        validate(exp)
    assert "\n" not in str(info.value)
    exp.sweep.allow_underpowered = True  # an explicit first look is allowed
    assert validate(exp) is exp


def test_the_default_sweep_design_can_conclude():
    exp = validate(to_experiment(compose_config(["+sweep=synth_mutation"])))
    assert exp.benchmark.name == "asyncio_practices"
    assert len(exp.tasks("train")) >= 8 and len(exp.tasks("holdout")) >= 4
    assert 0.5 ** len(exp.tasks("train")) < exp.sweep.alpha


def test_median_pruner_is_not_a_choice():
    exp = to_experiment(compose_config(["+sweep=synth_mutation", "sweep.pruner=median"]))
    with pytest.raises(ConfigError, match=r"sweep.pruner='median' is not allowed; expected one of: wilcoxon, none"):
        validate(exp)


# -- 2. a study answers for one objective ----------------------------------------------------------------------


def test_resume_under_another_model_is_refused_with_the_field_diff(make_exp):
    exp = make_exp("sweep.n_trials=2", "sweep.baseline_repeats=2", operators=("add_tool",))
    tasks = load_tasks(exp.benchmark)
    _sweep(exp, ScriptedRunner(tasks, model="model-a"))
    stored = open_study(exp).user_attrs["fingerprint"]
    assert stored["backend"]["producer"] == {"backend": "scripted", "model": "model-a"}
    assert stored["benchmark"]["ids"][0] == "t0:train" and stored["sweep_kind"] == "synth_mutation"

    exp_more = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, n_trials=4))
    runner_b = ScriptedRunner(tasks, model="model-b")
    with pytest.raises(StudyMismatch) as info:
        _sweep(exp_more, runner_b)
    msg = str(info.value)
    assert "\n" not in msg and "backend.producer.model: model-a -> model-b" in msg
    assert f"sweep.name={exp.sweep.name}-" in msg
    assert runner_b.run_ids == [] and len(open_study(exp).trials) == 2  # nothing ran, nothing was added

    renamed = dataclasses.replace(exp_more, sweep=dataclasses.replace(exp_more.sweep, name=msg.split("sweep.name=")[1]))
    s, runner = _sweep(renamed, runner_b)
    assert s.trials["total"] == 4 and runner.run_ids


def test_resume_after_changing_the_evaluator_or_tasks_is_refused(make_exp):
    exp = make_exp("sweep.n_trials=2", operators=("add_tool",))
    _sweep(exp)
    other = dataclasses.replace(exp, evaluator=dataclasses.replace(exp.evaluator, rubric_weight=0.3))
    with pytest.raises(StudyMismatch, match=r"evaluator.rubric_weight: 0.6 -> 0.3"):
        _sweep(other)
    fewer = make_exp("sweep.n_trials=2", operators=("add_tool",), n_train=7, n_holdout=5)
    fewer.sweep.storage = exp.sweep.storage
    with pytest.raises(StudyMismatch, match=r"benchmark\.(ids|sha256)"):
        _sweep(fewer)


def test_same_objective_resumes(make_exp):
    exp = make_exp("sweep.n_trials=2", operators=("add_tool",))
    _sweep(exp)
    more = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, n_trials=3, timeout_s=3600.0))
    s, _ = _sweep(more)  # budget changes are not the objective
    assert s.new_trials == 1 and s.trials["total"] == 3


# -- 3. one hash on both sides of de-duplication; the operator used gets the credit ----------------------------


def test_real_propose_never_repeats_a_tried_instruction_and_credits_the_fallback(make_exp):
    """drop_sentence on two-sentence instructions has only a few outcomes: before the fix propose was given
    candidate hashes, compared instruction hashes, and proposed the same text again (caught as duplicate_of)."""
    from mutators import propose

    exp = make_exp("sweep.n_trials=6", "sweep.pruner=none", "sweep.operator_choice=tpe", operators=("drop_sentence",))
    s, _ = _sweep(exp, propose=propose)  # TPE: the operator asked for is the trial's param
    study = open_study(exp)
    trials = [t for t in study.trials if t.user_attrs.get("operator") != "baseline"]
    assert s.trials["duplicate"] == 0 and all(t.user_attrs.get("duplicate_of") is None for t in trials)
    texts = [tuple(sorted(t.user_attrs["instructions"].items())) for t in study.trials]
    assert len(texts) == len(set(texts))
    assert all(t.params["operator"] == "drop_sentence" == t.user_attrs["operator_requested"] for t in trials)
    fell_back = [t for t in trials if t.user_attrs["operator"] != "drop_sentence"]
    assert fell_back, "later trials cannot drop from one sentence: a fallback operator must be credited"
    rows = {r["trial"]: r for r in Ledger(exp.sweep_dir / "ledger.jsonl").rows()}
    for t in fell_back:
        assert rows[t.number]["operator"] == t.user_attrs["operator"] != "drop_sentence"
        assert rows[t.number]["operator_requested"] == "drop_sentence"
        assert "fell back to" in t.user_attrs["note"]


def test_scripted_propose_fallback_is_credited_in_ledger_and_plots(make_exp):
    from experiments.tracking._plots import operator_stats

    exp = make_exp("sweep.n_trials=4", "sweep.pruner=none", operators=("add_tool",))
    _sweep(exp)
    study = open_study(exp)
    used = [t.user_attrs["operator"] for t in study.trials if t.number > 0]
    assert used[0] == "add_tool" and "noise" in used[1:]  # the second add_tool would repeat the first text
    assert set(operator_stats(study.trials)) == set(used)


def test_a_programming_error_in_an_operator_fails_the_trial_with_its_traceback(make_exp):
    exp = make_exp("sweep.n_trials=3", "sweep.failure_rate_stop=1.0", operators=("typeerror",))
    s, _ = _sweep(exp)
    failed = [t for t in open_study(exp).trials if t.state.name == "FAIL"]
    assert len(failed) == 2 and s.trials["failed"] == 2
    for t in failed:
        assert t.user_attrs["fail_reason"] == "TypeError: scripted operator bug"
        assert "Traceback (most recent call last)" in t.user_attrs["traceback"]
        assert t.user_attrs["operator_requested"] == "typeerror" and "operator" not in t.user_attrs


def test_real_propose_lets_a_type_error_through_and_falls_back_on_model_errors(monkeypatch):
    from harness.inference import BackendUnavailable
    from mutators import MutationContext, operators, propose

    ctx = MutationContext(base="List the items. Give each a heading. Explain each one briefly.", task_type="enumerated")

    def buggy(ctx, llm):
        raise TypeError("bug in operator")

    monkeypatch.setitem(operators.OPERATORS, "reorder", buggy)
    with pytest.raises(TypeError, match="bug in operator"):
        propose("reorder", ctx, None)

    def down(ctx, llm):
        raise BackendUnavailable("server down")

    monkeypatch.setitem(operators.OPERATORS, "reorder", down)
    cand = propose("reorder", ctx, None)
    assert cand.operator != "reorder" and "reorder failed: BackendUnavailable" in cand.note


# -- 5. the trial value is an independent re-score, the selection bias logged -----------------------------------


def test_trial_value_is_the_independent_score_and_the_selection_bias_is_logged(make_exp):
    exp = make_exp("sweep.n_trials=2", operators=("add_tool",))
    lines: list[str] = []
    s, _ = _sweep(exp, ScriptedRunner(load_tasks(exp.benchmark), selection_bias=0.4), lines=lines)
    for t in open_study(exp).trials:
        scores = t.user_attrs["task_scores"]
        assert t.value == pytest.approx(sum(scores.values()) / len(scores), abs=1e-3)
        sel = t.user_attrs["selection_scores"]
        assert all(sel[k] == pytest.approx(scores[k] + 0.4, abs=1e-3) for k in scores)
        assert t.user_attrs["selection_bias"] == pytest.approx(0.4, abs=1e-3) and t.user_attrs["rescored"]
    assert s.selection_bias == pytest.approx(0.4, abs=1e-3)
    assert any(ln.startswith("selection bias (wiggum best round - trial value)") and "+0.400" in ln
               for ln in "\n".join(lines).splitlines())


def _judge_router(first: int, second: int) -> Router:
    return Router(judge=[judge_json(first), judge_json(second)])


def test_harness_verify_rescores_the_kept_text_with_seeds_of_its_own(tmp_path):
    router = _judge_router(9, 3)  # the loop's judge sample flatters the draft; the verify sample does not
    h = make_harness(tmp_path, router, evaluator=EvaluatorConfig(temperature=0.7))
    result = h.run("List 5 best practices for asyncio")
    assert router.calls["judge"] == 2
    wig = result.record["wiggum"]
    assert wig["rescored"] is True and wig["best_score"] > result.evaluation.composite
    assert wig["selection_bias"] == pytest.approx(wig["best_score"] - result.evaluation.composite, abs=1e-3)
    assert result.record["scores"]["composite"] == result.evaluation.composite
    events = read_trace(result.trace_path)
    assert [e["name"] for e in events if e["name"] == "wiggum.verify"] == ["wiggum.verify"]
    assert len([e for e in events if e["name"] == "llm.evaluator"]) == 2
    outcome = outcome_from_result(result)
    assert outcome.rescored and outcome.selection_bias == pytest.approx(wig["selection_bias"], abs=1e-3)


def test_a_greedy_judge_s_kept_text_is_rescored_by_a_sample(tmp_path):
    """Issue 31 item 7: a greedy judge was not asked again, so the trial value was the sample that chose the round
    (selection bias printed as +0.000). The verify re-score now samples at evaluator.rescore_temperature."""
    router = _judge_router(9, 3)
    h = make_harness(tmp_path, router, evaluator=EvaluatorConfig(temperature=0.0))
    result = h.run("List 5 best practices for asyncio")
    assert router.calls["judge"] == 2
    judged = [(c.temperature, c.seed) for c in h.roles.evaluator.inner.calls if "strict, fair reviewer" in
              c.messages[0]["content"]]
    assert judged == [(0.0, 0), (0.7, 1_000_003)]  # the loop's greedy sample, then a sample of its own
    assert result.record["wiggum"]["rescored"] is True and result.record["wiggum"]["selection_bias"] > 0


# -- 7. typed seam ----------------------------------------------------------------------------------------------


def test_runner_must_return_a_task_outcome(make_exp):
    from experiments.runs import TrialFailed, evaluate_candidate

    class Untyped(ScriptedRunner):
        def finish(self, prepared, **kw):
            return {"status": "ok", "score": 5.0}

    exp = make_exp()
    tasks = load_tasks(exp.benchmark)
    with pytest.raises(TypeError, match="must return experiments.runs.TaskOutcome, got dict"):
        evaluate_candidate({"enumerated": "x", "research": "y"}, tasks[:1], Untyped(tasks))
    bad = TaskOutcome.failed("boom")
    with pytest.raises(TrialFailed, match="boom"):
        from experiments.runs._evaluate import task_score

        task_score(tasks[0], bad)
    with pytest.raises(ValueError, match="needs a numeric score"):
        TaskOutcome(status="ok")


def test_contexts_are_keyed_by_the_resolved_models(make_exp, tmp_path):
    """The context cache keyed "auto" before: contexts planned by one model were reused under another."""
    exp = make_exp("sweep.n_trials=1", operators=("add_tool",))
    tasks = load_tasks(exp.benchmark)
    _sweep(exp, ScriptedRunner(tasks, model="model-a"))
    fresh_study = dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, storage=f"sqlite:///{tmp_path / 'b.db'}"))
    same = ScriptedRunner(tasks, model="model-a")
    _sweep(fresh_study, same)
    assert same.prepares == 0  # same models: every context reused
    other = ScriptedRunner(tasks, model="model-b")
    _sweep(dataclasses.replace(fresh_study, sweep=dataclasses.replace(
        fresh_study.sweep, storage=f"sqlite:///{tmp_path / 'c.db'}")), other)
    assert other.prepares == len(tasks)  # another model: planned and researched again


@pytest.mark.parametrize("design, reason", [
    ("old", "sweep: benchmark"),  # the Wilcoxon train filter cannot reach alpha on 3 train tasks
    ("shipped", "sweep: 2 holdout tasks cannot reach"),  # the holdout's sign-flip bound on 2 tasks
])
def test_an_allowed_underpowered_sweep_says_so_in_its_summary(make_exp, design, reason):
    pinned = OLD_DESIGN if design == "old" else ()
    exp = make_exp(*pinned, "sweep.n_trials=2", "sweep.allow_underpowered=true", operators=("add_tool",),
                   n_train=3, n_holdout=2)
    lines: list[str] = []
    s, _ = _sweep(exp, lines=lines)
    text = "\n".join(lines)
    assert f"UNDERPOWERED (sweep.allow_underpowered=true): nothing can be promoted; {reason}" in text
    assert not s.promoted
