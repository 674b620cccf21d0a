"""The study room on Optuna's public API: a heartbeat keeps another host's trial alive, a silent one goes stale."""

from __future__ import annotations

import time

import optuna

from experiments.promotion import HoldoutScores
from experiments.study import holdout_run, open_store, store_holdout_run, stored_holdout

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

