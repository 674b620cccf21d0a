"""The study room on Optuna's public API: a heartbeat keeps another host's trial alive, a silent one goes stale."""

from __future__ import annotations

import time

import optuna

from experiments.study import open_store

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
