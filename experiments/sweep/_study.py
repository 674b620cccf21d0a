"""The sweep's Optuna study: storage, sampler and pruner, the objective's fingerprint, stale trials, heartbeats.

Only Optuna's public API: RDBStorage (heartbeat_interval, grace_period) and its BaseStorage / BaseHeartbeat
methods (reached through the StudyStore that built it, never through study._storage),
optuna.storages.fail_stale_trials, study.ask / tell and trial.number.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

from experiments.config import (BASELINE, ConfigError, ExperimentConfig, decision_rule, fingerprint_diff, load_tasks,
                                split, with_rule_defaults)
from experiments.promotion import HoldoutScores
from experiments.storage import RETRIES, StaleTrials, created_whole, mask_url, requeued, shared_lock, worker_host
from harness.stores import (
    DiskFull, StoreError, busy_timeout_s, enable_wal, fault_in, full_in, sqlite_db, sqlite_file, store_lock,
)

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


class StudyMismatch(ConfigError):
    """A resume under another objective (tasks, evaluator, models, harness config or sweep kind)."""


@dataclass(frozen=True)
class StudyStore:
    """A study and the RDB storage it lives in (heartbeat on): what a sweep needs beyond study.ask / tell."""

    study: optuna.Study
    storage: optuna.storages.RDBStorage
    stale: StaleTrials | None = None  # the heartbeat-stale callback: retries a dead worker's trial once

    def trial_id(self, number: int) -> int:
        study_id = self.storage.get_study_id_from_name(self.study.study_name)
        return self.storage.get_trial_id_from_study_id_trial_number(study_id, number)

    @contextmanager
    def heartbeat(self, number: int) -> Iterator[None]:
        """Record the trial's heartbeat every heartbeat_interval seconds while the block runs (as Optuna's
        optimize() does), so another worker's fail_stale_trials can tell a live trial from a dead one."""
        trial_id, stop = self.trial_id(number), threading.Event()
        interval = self.storage.get_heartbeat_interval()

        def beat() -> None:
            while True:
                try:
                    self.storage.record_heartbeat(trial_id)
                except BaseException:  # the store failed (full, vanished, read-only: a StoreError): the trial's own
                    return  # next write meets it and stops the run with one line; this thread prints no traceback
                if stop.wait(timeout=interval):
                    return

        thread = threading.Thread(target=beat, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def fail_stale_trials(self) -> list[int]:
        """Mark RUNNING trials left by a dead process as FAIL: this host's dead pids at once, others by heartbeat."""
        host, failed = worker_host(), []
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
            a = t.user_attrs
            if a.get("worker_host") == host and isinstance(a.get("worker_pid"), int) and (
                a["worker_pid"] == os.getpid() or not _pid_alive(a["worker_pid"])
            ):
                trial_id = self.trial_id(t.number)
                self.storage.set_trial_user_attr(trial_id, "fail_reason", "process died while the trial was running")
                try:
                    self.storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
                    failed.append(t.number)
                    if self.stale is not None:  # retried like a trial failed by heartbeat
                        self.stale(self.study, frozen_trial(self.study, t.number))
                except optuna.exceptions.UpdateFinishedTrialError:
                    pass
        before = {t.number for t in self.study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}
        optuna.storages.fail_stale_trials(self.study)
        after = {t.number for t in self.study.get_trials(deepcopy=False, states=(TrialState.FAIL,))}
        return sorted(set(failed) | (after - before))


def open_store(exp: ExperimentConfig, stale: StaleTrials | None = None) -> StudyStore:
    """Create or load the study (RDB storage, heartbeat on) named after the sweep. stale: the callback that
    retries a trial whose worker stopped beating (experiments/storage/)."""
    url = exp.storage_url
    db = sqlite_db(url)
    hb = max(int(exp.sweep.heartbeat_s), 1)
    sw = exp.sweep
    sampler: optuna.samplers.BaseSampler
    if sw.sampler == "random":
        sampler = optuna.samplers.RandomSampler(seed=sw.seed)
    else:
        sampler = optuna.samplers.TPESampler(seed=sw.seed, n_startup_trials=min(len(sw.operators) + 1, 6))
    pruner: optuna.pruners.BasePruner
    # a per-type search judges each type's text on its own tasks: a test on the whole candidate's running mean
    # would stop a child whose good edit to one type sits beside a bad one to another, so it runs every task
    if sw.pruner == "wilcoxon" and sw.search == "joint":
        from experiments.search import pruner_threshold

        p = pruner_threshold(sw.pruner_p, len(split(load_tasks(exp.benchmark), "train")), sw.pruner_startup_steps,
                             sw.pruner_correction)
        pruner = optuna.pruners.WilcoxonPruner(p_threshold=p, n_startup_steps=sw.pruner_startup_steps)
    else:
        pruner = optuna.pruners.NopPruner()
    # SQLite: WAL + a 30 s busy timeout, and creation under a file lock (two workers starting at once race the
    # table creation otherwise); a server database: an advisory lock in that database (several machines)
    with named_store(url), store_lock(db) if db is not None else shared_lock(url, f"{sw.name}/open_study"):
        if db is not None:
            created_whole(db, _study_tables)  # all or nothing: a full disk leaves no half-created file
            enable_wal(db)
        storage = optuna.storages.RDBStorage(
            url, engine_kwargs={"connect_args": {"timeout": busy_timeout_s()}} if db else None,
            heartbeat_interval=hb, grace_period=2 * hb, **(stale.storage_kwargs() if stale else {}))
        study = optuna.create_study(storage=storage, study_name=sw.name, direction="maximize", sampler=sampler,
                                    pruner=pruner, load_if_exists=True)
        if not study.user_attrs.get("study_uid"):  # names this study apart from one of the same name in a file
            study.set_user_attr("study_uid", uuid.uuid4().hex)  # moved aside (the ledger's rows carry it)
    return StudyStore(study, storage, stale)


def _study_tables(db: Path) -> None:
    """Optuna's tables in a new SQLite file (WAL), for created_whole."""
    enable_wal(db)
    optuna.storages.RDBStorage(f"sqlite:///{db}").engine.dispose()


def open_study(exp: ExperimentConfig) -> optuna.Study:
    """The sweep's study (see open_store)."""
    return open_store(exp).study


def pin_fingerprint(study: optuna.Study, fingerprint: Mapping[str, Any], exp: ExperimentConfig) -> str | None:
    """Store the objective's fingerprint and the decision rule (experiments.config.decision_rule) on a new
    study; on a resume, refuse (StudyMismatch) when either differs, with the fields that do.

    Returns a note for a study made before fingerprints or the pinned rule existed (pinned now, nothing to compare
    with)."""
    stored = study.user_attrs.get("fingerprint")
    rule = decision_rule(exp)
    if stored is None:
        study.set_user_attr("fingerprint", dict(fingerprint))
        study.set_user_attr("decision_rule", rule)
        return ("study predates objective fingerprints: pinned to this command's objective now" if study.trials
                else None)
    diff = fingerprint_diff(stored, fingerprint)
    if diff:
        raise StudyMismatch(
            f"study {exp.sweep.name!r} in {mask_url(exp.storage_url)} was made for another objective, so its scores and these "
            f"would not compare ({len(diff)} field(s) differ: {'; '.join(diff[:8])}{'; ...' if len(diff) > 8 else ''}); "
            f"to start a new study run the same command with sweep.name={exp.sweep.name}-{_fp_tag(fingerprint)} ("
            f"{BUDGET_NOTE})"
        )
    if study.user_attrs.get("decision_rule") is None:
        study.set_user_attr("decision_rule", rule)
        return ("study predates the pinned decision rule: pinned to this command's (sweep.alpha, holdout and noise "
                "settings) now; the rule of its earlier conclusions cannot be checked")
    check_decision_rule(study.user_attrs["decision_rule"], exp)
    return None


def check_decision_rule(stored: Mapping[str, Any] | None, exp: ExperimentConfig) -> None:
    """Refuse (StudyMismatch, one line naming each field) a resume whose decision rule differs from the stored one."""
    diff = fingerprint_diff(with_rule_defaults(stored), decision_rule(exp)) if stored is not None else []
    if diff:
        raise StudyMismatch(
            f"study {exp.sweep.name!r} in {mask_url(exp.storage_url)} was run under another decision rule, and its "
            f"stored runs would be concluded under this one ({len(diff)} field(s) differ: {'; '.join(diff)}); resume "
            f"with the stored values, or start a new study with sweep.name={exp.sweep.name}-"
            f"{_fp_tag(decision_rule(exp))} ({BUDGET_NOTE})"
        )


# a refusal names a new study for another objective or rule, never as a way around the error budget
BUDGET_NOTE = ("a new sweep.name does not start a new error budget: its holdout conclusions on the same holdout "
               "tasks in this storage count as further looks, at the smallest alpha any of them used")


def stored_decision_rule(exp: ExperimentConfig) -> Mapping[str, Any] | None:
    """The decision rule pinned on the study of exp.sweep.name in an existing SQLite file, read without creating
    or writing anything (None: no such file, study or rule; a server database is checked when the sweep opens it)."""
    url = exp.storage_url
    db = sqlite_file(url)
    if db is None or not db.is_file():
        return None
    with named_store(url):
        storage = optuna.storages.RDBStorage(url, skip_compatibility_check=True, skip_table_creation=True)
        try:
            study_id = storage.get_study_id_from_name(exp.sweep.name)
            return storage.get_study_user_attrs(study_id).get("decision_rule")
        except KeyError:  # no study of that name yet
            return None
        finally:
            storage.engine.dispose()


@contextmanager
def named_store(url: str) -> Iterator[None]:
    """A study's SQLite file that SQLite cannot use (not a database, damaged pages), named in a StoreError
    (harness.stores) instead of Optuna's "An exception is raised during the commit" over a traceback."""
    try:
        yield
    except Exception as exc:
        fault, db = fault_in(exc), sqlite_file(url)
        if fault is None or db is None:
            raise
        if full_in(fault) is not None:
            raise DiskFull(db, fault) from exc
        raise StoreError(db, fault, STUDY_ADVICE) from exc


STUDY_ADVICE = ("the study's trials are in it: restore it from a backup, or move it aside to start the study anew, "
                "then run the same command again")


def _fp_tag(fingerprint: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True, default=str).encode()).hexdigest()[:6]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- reading the study -----------------------------------------------------------------------------------------


def finished_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Finished trials that count toward n_trials: not one queued again after its process died (its copy counts)."""
    trials = study.get_trials(deepcopy=False, states=FINISHED)
    gone = requeued(study.get_trials(deepcopy=False)) if trials else set()
    return [t for t in trials if t.number not in gone]


def frozen_trial(study: optuna.Study, number: int) -> FrozenTrial:
    return next(t for t in study.get_trials(deepcopy=False) if t.number == number)


def ensure_baseline(study: optuna.Study) -> None:
    """Enqueue the baseline trial unless one is complete, waiting or running."""
    live = (TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING)
    if not any(t.user_attrs.get("operator") == BASELINE and t.state in live for t in study.get_trials(deepcopy=False)):
        study.enqueue_trial(params={}, user_attrs={"operator": BASELINE}, skip_if_exists=False)


def baseline_trial(study: optuna.Study) -> FrozenTrial | None:
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.user_attrs.get("operator") == BASELINE]
    return done[0] if done else None


def trial_counts(trials: Sequence[FrozenTrial]) -> dict[str, int]:
    """Finished trials by state, duplicates, and the pruned ones the minibatch gate stopped."""
    return {
        "total": sum(t.state in FINISHED for t in trials),
        "complete": sum(t.state == TrialState.COMPLETE for t in trials),
        "pruned": sum(t.state == TrialState.PRUNED for t in trials),
        "failed": sum(t.state == TrialState.FAIL for t in trials),
        "duplicate": sum(t.user_attrs.get("duplicate_of") is not None for t in trials),
        "gated": sum(bool(t.user_attrs.get("gated_out")) for t in trials),  # PRUNED by the minibatch gate or the race
        "raced": sum(bool(t.user_attrs.get("raced_out")) for t in trials),  # of those, by the race
    }


# -- holdout runs: run 0 of a text in the attr "holdout" {hash: scores} (as before repeats existed), the others in
# "holdout_repeats" {hash: {seed: scores}}


def holdout_run(study: optuna.Study, key: str, k: int, seed: int) -> dict[str, float] | None:
    """Run k (with this seed) of one text on the holdout, if the study stored it."""
    if k == 0:
        return study.user_attrs.get("holdout", {}).get(key)
    return study.user_attrs.get("holdout_repeats", {}).get(key, {}).get(str(seed))


def store_holdout_run(study: optuna.Study, key: str, k: int, seed: int, scores: dict[str, float]) -> dict[str, float]:
    """Store run k (with this seed) of one text on the holdout; returns the scores."""
    attr = "holdout" if k == 0 else "holdout_repeats"
    stored = {h: (v if k == 0 else dict(v)) for h, v in study.user_attrs.get(attr, {}).items()}
    if k == 0:
        stored[key] = scores
    else:
        stored.setdefault(key, {})[str(seed)] = scores
    study.set_user_attr(attr, stored)
    return scores


def train_reruns(user_attrs: Mapping[str, Any], key: str) -> dict[str, dict[str, float]]:
    """seed -> train scores of every final-race re-run a study stored for one text."""
    return {seed: dict(v) for seed, v in dict(user_attrs.get("train_reruns", {})).get(key, {}).items()}


def store_train_rerun(study: optuna.Study, key: str, seed: int, scores: dict[str, float]) -> dict[str, float]:
    """Store one final-race re-run of a text on the train split; returns the scores."""
    stored = {h: dict(v) for h, v in study.user_attrs.get("train_reruns", {}).items()}
    stored.setdefault(key, {})[str(seed)] = scores
    study.set_user_attr("train_reruns", stored)
    return scores


def stored_holdout(user_attrs: Mapping[str, Any], key: str) -> HoldoutScores | None:
    """Every holdout run a study stored for one text, averaged per task (None: none stored)."""
    first = dict(user_attrs.get("holdout", {})).get(key)
    if first is None:
        return None
    more = list(dict(user_attrs.get("holdout_repeats", {})).get(key, {}).values())
    return HoldoutScores.of_runs([first, *more])


def live_trials(study: optuna.Study) -> list[Any]:
    """The study's trials less those queued again (a copy of each runs in its place): what the search and the
    summary count."""
    trials = study.get_trials(deepcopy=False)
    gone = requeued(trials)
    return [t for t in trials if t.number not in gone]


# -- trials a model call failed: the server's failure, not the candidate's -------------------------------------


def _retried_out(trial: FrozenTrial) -> bool:
    """The trial's slot was queued again RETRIES times already: it stays failed and counts."""
    return len(trial.system_attrs.get("retry_history", ())) >= RETRIES


def model_failed_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Live trials that failed because a model call failed (user attr model_failed) and may still be queued again."""
    return [t for t in live_trials(study)
            if t.state == TrialState.FAIL and t.user_attrs.get("model_failed") and not _retried_out(t)]


def requeue_model_failures(store: StudyStore) -> list[int]:
    """Queue a copy of each trial a model call failed (its parameters and slot, as for a trial stopped by Ctrl-C):
    the copy takes its place, so the same command reruns what the server failed and the study ends as a clean run's
    would. Returns the numbers queued again."""
    if store.stale is None:
        return []
    study, out = store.study, []
    for t in model_failed_trials(study):
        store.stale.requeue(study, t)
        out.append(t.number)
    return out


def unanswered(study: optuna.Study) -> list[str]:
    """What leaves the study unable to answer: no complete baseline trial, or trials that failed because a model
    call failed (each queued again at the next start). One clause each, for the CLI's line."""
    out = []
    if baseline_trial(study) is None:
        failed = [t for t in live_trials(study)
                  if t.user_attrs.get("operator") == BASELINE and t.state == TrialState.FAIL]
        out.append(f"the baseline trial #{failed[-1].number} failed: "
                   f"{str(failed[-1].user_attrs.get('fail_reason', 'no reason recorded'))[:240]}" if failed
                   else "the baseline trial did not run")
    search = [t for t in model_failed_trials(study) if t.user_attrs.get("operator") != BASELINE]
    if search:
        out.append(f"{len(search)} trial(s) failed because a model call failed, queued again for the next start "
                   f"(#{search[0].number}: {str(search[0].user_attrs.get('fail_reason', ''))[:200]})")
    return out

