"""The sweep with a scripted runner (no LLM): objective, promotion after holdout, noise, resume, failures."""

from __future__ import annotations

import re
import subprocess
import sys

import optuna
import pytest
from conftest import OLD_DESIGN
from scripted_harness import BASE, BOOST, ScriptedRunner, scripted_propose

from experiments.config import load_tasks
from experiments.config import BenchmarkConfig
from experiments.config._schema import TaskSpec
from experiments.runs import TrialFailed
from experiments.stats import compare, noise_floor
from experiments.storage import Ledger
from experiments.promotion._confirmation import HoldoutScores, HoldoutTest
from experiments.search._state import candidate_hash
from experiments.sweep._study import open_study
from experiments.sweep import run_sweep
from experiments.sweep._objective import make_objective
from experiments.sweep._summary import SUMMARY_BEGIN

optuna.logging.set_verbosity(optuna.logging.WARNING)


def _sweep(exp, runner=None, lines=None):
    runner = runner or ScriptedRunner(load_tasks(exp.benchmark))
    out = lines.append if lines is not None else (lambda s: None)
    return run_sweep(exp, runner, propose=scripted_propose, out=out), runner


# -- statistics --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cand, base, floor, claimed",
    [
        ({f"t{i}": 7.0 + i * 0.01 for i in range(8)}, {f"t{i}": 5.0 for i in range(8)}, 0.3, True),
        ({f"t{i}": 5.1 for i in range(8)}, {f"t{i}": 5.0 for i in range(8)}, 0.3, False),  # within the floor
        ({f"t{i}": 7.0 for i in range(3)}, {f"t{i}": 5.0 for i in range(3)}, 0.3, False),  # n=3 cannot reach 0.05
        ({f"t{i}": 5.0 for i in range(8)}, {f"t{i}": 5.0 for i in range(8)}, 0.0, False),  # identical
    ],
)
def test_compare_needs_floor_and_paired_test(cand, base, floor, claimed):
    c = compare(cand, base, floor=floor, alpha=0.05)
    assert c.claimed is claimed
    assert c.reason.startswith("improvement:") is claimed


def test_noise_floor_from_repeats():
    runs = [{"a": 5.0, "b": 6.0}, {"a": 5.2, "b": 6.2}, {"a": 4.8, "b": 5.8}]
    nf = noise_floor(runs)
    assert nf.repeats == 3 and nf.n_tasks == 2
    assert nf.sigma == pytest.approx(0.2)
    assert nf.floor(2, 3) == pytest.approx(2 * 0.2 * ((1 + 1 / 3) / 2) ** 0.5)
    assert noise_floor(runs[:1]).floor(2) == 0.0  # one run measures nothing


# -- objective with FixedTrial -------------------------------------------------------------------------


def test_objective_with_fixed_trial(make_exp):
    exp = make_exp("sweep.operator_choice=tpe", operators=("add_tool", "noise", "crash"))  # the trial's operator
    runner = ScriptedRunner(load_tasks(exp.benchmark))
    objective = make_objective(exp, runner, propose=scripted_propose)
    boosted = objective(optuna.trial.FixedTrial({"operator": "add_tool"}))
    plain = objective(optuna.trial.FixedTrial({"operator": "noise"}))
    assert boosted - plain > 1.0
    assert objective.last.operator == "noise" and len(objective.last.evaluation.scores) == 8
    assert all(BOOST not in t for t in objective.last.instructions.values())
    assert runner.prepares == 16  # no contexts given: prepared afresh per trial
    with pytest.raises(TrialFailed, match="scripted crash"):
        objective(optuna.trial.FixedTrial({"operator": "crash"}))


def test_objective_reuses_contexts(make_exp):
    exp = make_exp()
    tasks = load_tasks(exp.benchmark)
    runner = ScriptedRunner(tasks)
    contexts = {t.id: runner.prepare(t.task) for t in tasks}
    objective = make_objective(exp, runner, contexts=contexts, propose=scripted_propose)
    for op in ("add_tool", "noise"):
        objective(optuna.trial.FixedTrial({"operator": op}))
    assert runner.prepares == len(tasks)


# -- full sweeps ---------------------------------------------------------------------------------------


def test_sweep_finds_and_promotes_real_improvement(make_exp):
    exp = make_exp("sweep.n_trials=6", mlflow=True)
    lines: list[str] = []
    s, runner = _sweep(exp, lines=lines)
    assert s.trials["total"] == 6 and s.new_trials == 6
    assert s.promoted and s.best_comparison.claimed
    promoted = s.best_instructions if s.promoted_trial == s.best_trial else None
    text = (exp.sweep_dir / "promoted_synth.yaml").read_text()
    assert BOOST in text
    assert promoted is None or any(BOOST in v for v in promoted.values())
    assert any(r.wins for r in s.holdout)
    block = "\n".join(lines)
    assert SUMMARY_BEGIN in block and "PROMOTED: trial #" in block and "mlflow ui --backend-store-uri" in block
    assert "controls: reuse_context=True memory_frozen=True" in block
    assert any("trial 6/6" in line for line in lines)
    assert runner.prepares == 14  # contexts once per task (8 train + 6 holdout), reused by every trial


def test_noise_only_candidates_are_not_promoted(make_exp):
    # mechanism: the Wilcoxon filter on a noise floor keeps noise-only candidates from the holdout. Under the shipped
    # design (train_filter positive) the holdout alone stands between them and a promotion, at its level: this
    # study's best noise candidate reaches holdout p 0.019 < 0.025 there, a chance it has by design (rate over many
    # studies: bench/power/no_false_promotion.py, tests/test_no_false_promotion.py)
    exp = make_exp(*OLD_DESIGN, "sweep.n_trials=5", operators=("noise",))
    s, _ = _sweep(exp)
    assert not s.promoted and s.promoted_hash == candidate_hash(BASE)
    assert "PROMOTED: baseline (no change kept" in (exp.sweep_dir / "summary.md").read_text()


def test_holdout_repeats_run_once_each_average_per_task_and_feed_the_bound(make_exp):
    # mechanism: the "bound" rule's sigma pooled from the noise floor's 2 baseline runs and the holdout's repeats
    exp = make_exp(*OLD_DESIGN, "sweep.n_trials=4", "sweep.holdout_top_k=1", "sweep.holdout_baseline_runs=3",
                   "sweep.holdout_candidate_runs=2", "sweep.holdout_test=bound", n_holdout=4)  # "bound": any size
    lines: list[str] = []
    s, runner = _sweep(exp, lines=lines)
    held_ids = [rid for rid in runner.run_ids if "-holdout-" in rid]
    assert len(held_ids) == 4 * (3 + 2)  # 4 holdout tasks x (3 baseline runs + 2 of the top candidate)
    study = open_study(exp)
    base = study.user_attrs["baseline_hash"]
    (row,) = s.holdout
    assert sorted(study.user_attrs["holdout_repeats"][base]) == ["1", "2"]  # seeds cfg.seed + 1, + 2
    assert list(study.user_attrs["holdout_repeats"][row.hash]) == ["1"]
    runs = [study.user_attrs["holdout"][base], *study.user_attrs["holdout_repeats"][base].values()]
    assert s.baseline_holdout == pytest.approx(sum(sum(r.values()) for r in runs) / (3 * 4))
    assert row.runs == (2, 3) and row.holdout_rule == "bound" and row.holdout_p is not None
    # sigma pooled: the noise floor's runs and the holdout's own repeats (both texts)
    cand_runs = [study.user_attrs["holdout"][row.hash], *study.user_attrs["holdout_repeats"][row.hash].values()]
    test = HoldoutTest.of(s.noise, alpha=0.05, rule="bound").pooled([HoldoutScores.of_runs(runs),
                                                                    HoldoutScores.of_runs(cand_runs)])
    assert test.df == 8 * (2 - 1) + 4 * (3 - 1) + 4 * (2 - 1) and test.sigma != s.noise.sigma
    assert row.holdout_se == pytest.approx(test.sigma * ((1 / 2 + 1 / 3) / 4) ** 0.5)
    # the scripted tool edit (+1.5) on 4 tasks is far past the bound, but "bound" is a fixed-task statement
    assert not s.promoted and row.wins and row.fixed_task
    assert any("[runs 2/3, se " in line and "vs Holm level 0.0500; fixed-task statement]" in line for line in lines)
    runner2 = ScriptedRunner(load_tasks(exp.benchmark))
    again, _ = _sweep(exp, runner2)
    assert not any("-holdout-" in rid for rid in runner2.run_ids)  # resumed: every holdout run was stored
    assert again.holdout[0].holdout_diff == pytest.approx(row.holdout_diff)


def test_the_final_race_reruns_the_leaders_once_ranks_on_their_mean_and_a_resume_reruns_none(make_exp):
    exp = make_exp("sweep.n_trials=5", "sweep.race_top=2", "sweep.holdout_top_k=1", mlflow=True)
    lines: list[str] = []
    s, runner = _sweep(exp, lines=lines)
    raced = [rid for rid in runner.run_ids if "-race-" in rid]
    assert len(raced) == 2 * 8 and all("-s1" in rid for rid in raced)  # 2 leaders x 8 train tasks, seed cfg.seed + 1
    study = open_study(exp)
    reruns = study.user_attrs["train_reruns"]
    assert len(reruns) == 2 and all(list(v) == ["1"] for v in reruns.values())
    # the ranking the holdout took its top from is the mean of each leader's trial run and its re-run
    from experiments.promotion._decide import race
    from experiments.promotion._decide import candidates

    ranked = race(candidates(study.trials, study.user_attrs["baseline_hash"]),
                  {h: list(v.values()) for h, v in reruns.items()})
    assert s.best_trial == ranked[0].number and s.best_value == pytest.approx(ranked[0].train_mean)
    assert ranked[0].runs == 2 and s.holdout[0].hash == ranked[0].hash
    assert any("final race 1/2" in line for line in lines) and s.best_runs == 2
    assert "(mean of 2 runs: the final race)" in (exp.sweep_dir / "summary.md").read_text()
    runner2 = ScriptedRunner(load_tasks(exp.benchmark))
    again, _ = _sweep(exp, runner2)
    assert not any("-race-" in rid for rid in runner2.run_ids)  # resumed: both re-runs were stored
    assert again.best_trial == s.best_trial and again.best_value == pytest.approx(s.best_value)


def test_resume_runs_only_new_trials_and_counts_agree(make_exp):
    exp = make_exp("sweep.n_trials=3", mlflow=True)
    first, runner1 = _sweep(exp)
    assert first.trials["total"] == 3
    exp.sweep.n_trials = 5
    runner2 = ScriptedRunner(load_tasks(exp.benchmark))
    second, _ = _sweep(exp, runner2)
    assert second.new_trials == 2 and second.trials["total"] == 5
    assert runner2.prepares == 0  # contexts came from the cache
    study = open_study(exp)
    ran = {int(m.group(1)) for rid in runner2.run_ids if (m := re.search(r"-t(\d+)-", rid))}
    reused = {t.number for t in study.trials if t.user_attrs.get("duplicate_of") is not None}
    assert ran | reused == {3, 4} and not ran & {0, 1, 2}
    assert not any("baseline-s" in rid for rid in runner2.run_ids)  # noise-floor repeats were not re-run
    assert len(study.trials) == 5
    ledger = Ledger(exp.sweep_dir / "ledger.jsonl").rows()
    assert sorted(r["trial"] for r in ledger) == [0, 1, 2, 3, 4]
    from experiments.tracking._mlflow import MLflowTracker

    tracker = MLflowTracker(exp)
    tracker.start(exp)
    assert sorted(int(r.data.tags["trial_number"]) for r in tracker.trial_runs()) == [0, 1, 2, 3, 4]
    assert len(tracker.client.search_runs([tracker.experiment_id], "tags.sweep_parent = 'true'")) == 1


def test_failed_trials_are_recorded_and_the_sweep_continues(make_exp):
    exp = make_exp("sweep.n_trials=4", "sweep.failure_rate_stop=1.0", "sweep.operator_choice=tpe",
                   operators=("crash", "add_tool"), mlflow=True)
    s, _ = _sweep(exp)
    assert s.trials["total"] == 4
    study = open_study(exp)
    failed = [t for t in study.trials if t.state.name == "FAIL"]
    assert failed and all("scripted crash" in t.user_attrs["fail_reason"] for t in failed)
    rows = Ledger(exp.sweep_dir / "ledger.jsonl").rows()
    assert {r["trial"] for r in rows if r["status"] == "crash"} == {t.number for t in failed}
    from experiments.tracking._mlflow import MLflowTracker

    tracker = MLflowTracker(exp)
    tracker.start(exp)
    statuses = {int(r.data.tags["trial_number"]): r.info.status for r in tracker.trial_runs()}
    assert all(statuses[t.number] == "FAILED" for t in failed)


def test_failure_rate_stops_the_sweep(make_exp):
    exp = make_exp("sweep.n_trials=10", "sweep.failure_rate_stop=0.6", operators=("crash",))
    s, _ = _sweep(exp)
    assert s.trials["total"] == 3 and "failure rate" in s.stop_reason and s.failed_out


def test_a_finished_sweep_is_not_failed_out(make_exp):
    s, _ = _sweep(make_exp("sweep.n_trials=3"))
    assert "n_trials reached" in s.stop_reason and not s.failed_out


def test_stale_running_trial_from_dead_process_is_failed(make_exp):
    import os
    import socket

    exp = make_exp("sweep.n_trials=2")
    study = open_study(exp)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    trial = study.ask()
    trial.set_user_attr("worker_host", socket.gethostname())
    trial.set_user_attr("worker_pid", dead.pid)
    assert dead.pid != os.getpid()
    s, _ = _sweep(exp)
    states = {t.number: t.state.name for t in open_study(exp).trials}
    assert states[0] == "FAIL" and s.trials["total"] == 2
    rows = {r["trial"]: r for r in Ledger(exp.sweep_dir / "ledger.jsonl").rows()}
    assert rows[0]["status"] == "crash" and "process died" in rows[0]["reason"]


def test_duplicate_candidate_reuses_value(make_exp):
    exp = make_exp("sweep.n_trials=4", operators=("add_tool",))

    def same(name, ctx, llm, *, seen=frozenset()):
        # propose's "exhausted" case: nothing new can be made, the parent comes back with operator "none"
        from mutators.base import Candidate

        return Candidate(ctx.base, "none", (ctx.base_hash,), ctx.base_hash, "exhausted: returned the parent")

    runner = ScriptedRunner(load_tasks(exp.benchmark))
    run_sweep(exp, runner, propose=same, out=lambda s: None)
    rows = Ledger(exp.sweep_dir / "ledger.jsonl").rows()
    dups = [r for r in rows if r["status"] == "duplicate"]
    assert len(dups) == 3 and all(r["duplicate_of"] == 0 for r in dups)  # the parent is the baseline trial
    trial_finishes = [rid for rid in runner.run_ids if any(f"-t{n}-" in rid for n in (1, 2, 3))]
    assert trial_finishes == []


@pytest.mark.embedded
def test_two_trial_sweep_on_the_embedded_model(make_exp):
    """Real harness, SmolLM2-135M: structure only (it finishes, resumes, logs to MLflow, says SMOKE)."""
    from experiments.config import to_harness_config
    from experiments.runs import HarnessRunner
    from experiments.tracking._mlflow import MLflowTracker

    exp = make_exp("backend=embedded", "planner=single_pass", "evaluator=deterministic_only", "wiggum.max_rounds=1",
                   "research.max_rounds=1", "research.compress=false", "research.enrich_urls=0",
                   "synth.max_tokens=200", "sweep.n_trials=2", "sweep.baseline_repeats=1", "sweep.holdout_top_k=1",
                   operators=("add_constraint",), mlflow=True)
    exp.benchmark = BenchmarkConfig(name="tiny", tasks=[
        TaskSpec(id="json", task="List 2 Python modules for reading data files.", task_type="enumerated",
                 expected_count=2, required_terms=["json"], split="train"),
        TaskSpec(id="tests", task="List 2 tools for testing Python code.", task_type="enumerated",
                 expected_count=2, required_terms=["pytest"], split="holdout"),
    ])
    exp.synth.instructions = {}
    runner = HarnessRunner(to_harness_config(exp))
    lines: list[str] = []
    s = run_sweep(exp, runner, out=lines.append)
    # the label names the GGUF file actually loaded (no calibration: a smoke run)
    assert s.smoke and "SMOKE RUN (embedded SmolLM2-135M-Instruct.Q4_1.gguf" in "\n".join(lines)
    assert s.label == "SMOKE RUN (embedded SmolLM2-135M-Instruct.Q4_1.gguf): structure check only, not research quality"
    assert s.trials["total"] == 2
    calls_before = runner.llm_calls()
    again = run_sweep(exp, runner, out=lambda x: None)
    assert again.new_trials == 0 and runner.llm_calls() == calls_before  # nothing re-run, nothing re-asked
    tracker = MLflowTracker(exp)
    tracker.start(exp)
    assert len(tracker.trial_runs()) == 2 == len(Ledger(exp.sweep_dir / "ledger.jsonl").rows())
