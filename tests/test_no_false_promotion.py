"""No wrong answer on any path (issue 31, "Must show"): in a stand-in world where no instruction is better, no study
promotes, neither when it concludes nor when it is resumed and concludes again; and a resume that changes the
decision rule is refused with the field named, before anything runs.

The world: tests/scripted_harness.ScriptedRunner with effect 0 (a run's score is the task's difficulty plus noise
drawn per instruction, task and seed; naming a tool adds nothing). The sweep design is the shipped one
(conf/sweep/synth_mutation.yaml) with the holdout rule that can promote ("tasks").
bench/power/no_false_promotion.py runs the same over more seeds and reports the rate with its upper bound; a positive
control there (--effect 1.5) shows the same design does promote a real effect.
"""

from __future__ import annotations

import dataclasses

import optuna
import pytest
from scripted_harness import ScriptedRunner, scripted_propose

from experiments.config import load_tasks
from experiments.sweep._study import StudyMismatch, open_study
from experiments.sweep import run_sweep

optuna.logging.set_verbosity(optuna.logging.WARNING)
SEEDS = (0, 1, 2)


def _with(exp, **sweep):
    return dataclasses.replace(exp, sweep=dataclasses.replace(exp.sweep, **sweep))


@pytest.mark.parametrize("seed", SEEDS)
def test_no_study_promotes_when_no_instruction_is_better_and_a_changed_rule_is_refused(make_exp, seed):
    exp = make_exp(f"seed={seed}", f"sweep.seed={seed}", "sweep.n_trials=5", "sweep.operator_choice=tpe",
                   "sweep.holdout_test=tasks")
    runner = ScriptedRunner(load_tasks(exp.benchmark), effect=0.0)

    def sweep(e):
        return run_sweep(e, runner, propose=scripted_propose, out=lambda s: None)

    first = sweep(exp)
    assert first.trials["total"] == 5 and not first.promoted, first.holdout
    resumed = sweep(_with(exp, n_trials=8))  # more candidates, and a second look at the holdout
    assert resumed.new_trials == 3 and not resumed.promoted, resumed.holdout
    assert resumed.best_trial is not None  # there was a best candidate to (wrongly) promote

    runs, trials = len(runner.run_ids), len(open_study(exp).trials)
    with pytest.raises(StudyMismatch) as info:  # the same study concluded under a looser rule: refused
        sweep(_with(exp, n_trials=9, alpha=0.3))
    assert "\n" not in str(info.value) and "1 field(s) differ: sweep.alpha: 0.05 -> 0.3" in str(info.value)
    assert len(runner.run_ids) == runs and len(open_study(exp).trials) == trials
