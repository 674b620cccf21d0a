"""Issue 41, defects 5-10 and 16: a disk that fills, stores left half-created, RUNNING or locked, a results folder that
vanishes or turns immutable mid-sweep. Each through the real sweep command against the Ollama stand-in
(tests/store_faults.py); each failed on 3306971.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3

import pytest
import store_faults as sf


@pytest.fixture
def docs(tmp_path):
    return sf.corpus(tmp_path / "corpus")


# -- 5: a full disk stops the run with one line; nothing computed under it is reused -------------------------------


def test_a_full_disk_stops_the_run_naming_the_file_and_nothing_is_reused(tmp_path):
    """Before: 'database or disk is full' while building the search index was one more research error; the contexts
    were cached with no sources, the trials ran on empty research and the sweep exited 0."""
    big = sf.corpus(tmp_path / "corpus", mb=2.5)  # its search index does not fit
    with sf.small_disk(tmp_path / "disk", 1.5) as (disk, limit), sf.stub() as s:
        results = disk / "r"
        cmd = sf.sweep_cmd(s.url, results, big, "sweep.n_trials=2", "mlflow.enabled=false")
        full = sf.run(cmd, size_limit=limit)
        line = full.one_line()
        assert full.rc == 1 and line is not None, full.out[-3000:]
        assert line.startswith(f"error: disk full: {results / 'search_index'}") and \
            line.endswith("free space, then run the same command again"), line
        assert not list((results / SWEEP_DIR / "context").glob("*.json"))  # no context cached
        assert not list((results / "research_cache").glob("*.json"))
        assert "trial 1/" not in full.out  # no trial ran on empty research
        sf.grow(disk, 64)
        again = sf.run(cmd)  # space freed (or no size limit): the same command
        states = [t.state.name for t in sf.study_trials(results)]
    assert again.rc == 0, again.out[-3000:]
    assert "contexts 0 reused, 5 computed" in again.out
    assert states == ["COMPLETE", "COMPLETE"]
    print(f"FIGURES full_disk: exit={full.rc} secs={full.secs:.1f} line={line[:160]!r} rerun_exit={again.rc}")


SWEEP_DIR = sf.SWEEP


# -- 6: a resume closes every MLflow run it finds RUNNING ----------------------------------------------------------


def test_a_resume_closes_the_trial_runs_a_stopped_process_left_running(tmp_path, docs):
    """Before: a trial run left RUNNING (the process stopped while logging it: a second Ctrl-C, a full disk) counted as
    logged, and stayed RUNNING after a successful resume (`trial-002-reflect`)."""
    results = tmp_path / "r"
    with sf.stub() as s:
        first = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=2"))
        assert first.rc == 0, first.out[-3000:]
        trial = next(r for r in sf.mlflow_runs(results) if r.data.tags.get("trial_number") == "1")
        sf.set_run_status(results, trial.info.run_id, "RUNNING")  # as a process killed mid-logging leaves it
        again = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=3"))
    assert again.rc == 0, again.out[-3000:]
    runs = sf.mlflow_runs(results)
    running = [(r.data.tags.get("mlflow.runName"), r.info.status) for r in runs if r.info.status == "RUNNING"]
    assert running == []
    trial_runs = sorted(r.data.tags["trial_number"] for r in runs if r.data.tags.get("kind") == "trial")
    assert trial_runs == ["0", "1", "2"]  # trial 1's run logged again, once, from the study


# -- 7: a store creation is all or nothing; a half-created store is named in one line ------------------------------


def test_an_mlflow_store_cut_short_at_creation_leaves_nothing_and_the_next_run_works(tmp_path, docs):
    """Before: `ulimit -f 3000` during creation left a half-created mlflow.db and every later run failed with a
    3-line OperationalError ('index ... already exists' / 'duplicate column name')."""
    results = tmp_path / "r"
    with sf.stub() as s:
        cut = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=1"), size_limit=3_000_000)
        line = cut.one_line()
        assert cut.rc == 1 and line is not None, cut.out[-3000:]
        assert line.startswith(f"error: disk full: {results / 'mlflow.db'} cannot be written") and "ulimit -f" in line
        assert not (results / "mlflow.db").exists()  # nothing half-created
        again = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=1"))
    assert again.rc == 0, again.out[-3000:]
    assert len([r for r in sf.mlflow_runs(results) if r.data.tags.get("kind") == "trial"]) == 1


def test_a_half_created_mlflow_store_is_named_in_one_line_with_the_way_out(tmp_path, docs):
    results = tmp_path / "r"
    results.mkdir()
    sf.half_created_mlflow(results / "mlflow.db")
    with sf.stub() as s:
        ran = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=1"))
    line = ran.one_line()
    assert ran.rc == 1 and line is not None, ran.out[-3000:]
    assert line.startswith(f"error: store {results / 'mlflow.db'} is half-created")
    assert "it holds no runs" in line and line.endswith("move it aside (it holds no runs, so nothing is lost), then "
                                                       "run the same command again")


# -- 8: the results folder deleted mid-trial --------------------------------------------------------------------


def test_a_results_folder_deleted_mid_trial_stops_the_sweep_and_charges_no_candidate(tmp_path, docs):
    """Before: trials #2 and #3 were recorded as failed candidates ('no such table: replies') and the sweep went on."""
    results = tmp_path / "r"
    gate = sf.Gate()
    with sf.stub(reply=gate) as s:
        ran = sf.mid_trial(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=3"), gate,
                           lambda: sf.remove_tree(results))
    line = ran.one_line()
    assert ran.rc == 1 and line is not None, ran.out[-3000:]
    assert "vanished" in line and str(results) in line
    assert "no such table" not in ran.out and " FAIL " not in ran.out  # no trial charged to a candidate
    print(f"FIGURES vanished: exit={ran.rc} secs={ran.secs:.1f} line={line[:200]!r}")


# -- 9: the ledger belongs to one study ---------------------------------------------------------------------------


def test_a_new_study_after_optuna_db_was_moved_aside_starts_a_new_ledger(tmp_path, docs):
    """Before: ledger.jsonl kept the old study's rows (trials 0-2) beside a new study of 2 trials."""
    results = tmp_path / "r"
    ledger = results / SWEEP_DIR / "ledger.jsonl"
    with sf.stub() as s:
        first = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=3"))
        assert first.rc == 0, first.out[-3000:]
        old = ledger.read_text()
        shutil.move(results / "optuna.db", tmp_path / "optuna.db.old")  # the project's own advice for a damaged one
        for suffix in ("-wal", "-shm"):
            (results / f"optuna.db{suffix}").unlink(missing_ok=True)
        again = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=2"))
    assert again.rc == 0, again.out[-3000:]
    rows = [json.loads(line) for line in ledger.read_text().splitlines()]
    trials = sf.study_trials(results)
    assert [(r["trial"], r["state"]) for r in rows] == [(t.number, t.state.name) for t in trials]
    kept = [p for p in ledger.parent.glob("ledger.*.jsonl")]
    assert len(kept) == 1 and kept[0].read_text() == old  # the old study's rows kept apart, whole


# -- 10: a store another process holds locked ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["optuna.db", "mlflow.db"])
def test_a_store_another_process_holds_locked_is_named_in_one_line(tmp_path, docs, name):
    """Before: mlflow.db: after 20 s a 5-line MlflowException 'database is locked [SQL ...]'; optuna.db: after 30 s
    'StorageInternalError ... invalid data in the commit', naming neither file nor the lock."""
    results = tmp_path / "r"
    with sf.stub() as s:
        first = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=1"))
        assert first.rc == 0, first.out[-3000:]
        with sf.held_lock(results / name) as pid:
            ran = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=2"), environ=sf.env(HARNESS_LOCK_WAIT_S="2"))
    line = ran.one_line()
    assert ran.rc == 1 and line is not None, ran.out[-3000:]
    assert line.startswith(f"error: store {results / name} is locked by another process (pid {pid}")
    assert line.endswith("let it finish or stop it, then run the same command again")
    assert ran.secs < 20, ran.secs
    print(f"FIGURES locked_{name}: exit={ran.rc} secs={ran.secs:.1f} line={line[:200]!r}")


# -- 16: the results folder made immutable mid-sweep -----------------------------------------------------------------


def test_a_results_folder_made_immutable_mid_trial_exits_cleanly_with_one_line(tmp_path, docs):
    """Before: the one-line StoreError, then the process died of SIGBUS (a write to the memory-mapped -shm of a WAL
    store that turned immutable; closing the connection at exit writes it too): 'Bus error', exit 135."""
    results = tmp_path / "r"
    ran, how = sf.immutable_mid_trial(results, docs)
    line = ran.one_line()
    assert ran.rc == 1 and line is not None, (how, ran.rc, ran.out[-6000:])
    assert "Bus error" not in ran.out and "Fatal Python error" not in ran.out
    if how == "chattr +i":
        assert "became read-only" in line and str(results) in line
    print(f"FIGURES immutable: how={how} exit={ran.rc} line={line[:200]!r}")


def test_a_store_whose_shm_turned_read_only_says_so_before_any_statement(tmp_path):
    from harness.stores import StoreReadOnly, unsafe_to_close
    from harness.stores._sqlite import connect

    conn = connect(tmp_path / "c.sqlite")
    conn.execute("CREATE TABLE t (x)")
    os.chmod(tmp_path / "c.sqlite-shm", 0o444)
    try:
        if os.access(tmp_path / "c.sqlite-shm", os.W_OK):
            pytest.skip("root writes a read-only file: the chattr case above covers it")
        with pytest.raises(StoreReadOnly, match=r"c\.sqlite cannot be written: its WAL index \(-shm\) became read-only"):
            conn.execute("INSERT INTO t VALUES (1)")
        assert unsafe_to_close()
    finally:
        os.chmod(tmp_path / "c.sqlite-shm", 0o644)
    with sqlite3.connect(tmp_path / "c.sqlite") as other:
        assert other.execute("SELECT count(*) FROM t").fetchone() == (0,)


# -- a store deleted and created again in one process: the new file is the run's own, not a vanished one ------------


def test_a_store_deleted_and_created_again_in_one_process_opens_and_the_old_connection_still_sees_it_gone(tmp_path):
    """Found after issue 41: the check remembered one file per path for the whole process, so a notebook that ran a
    sweep, removed results/optuna.db* and swept again met StoreGone naming its own new file (the temp file of the
    whole creation, whose name came back), every time it tried; the response cache likewise. Each connection now
    checks against the file it opened: the new store opens, the old connection to the deleted file still stops."""
    import optuna

    from experiments.config import compose_config, to_experiment, validate
    from experiments.storage import check_services
    from experiments.sweep._study import open_store
    from harness.inference import ResponseCache
    from harness.stores import StoreGone

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    exp = validate(to_experiment(compose_config(["+sweep=synth_mutation", "backend=fake",
                                                 f"results_dir={tmp_path}"]), environ={}), warn=False)
    check_services(exp)  # as experiments.run.run_experiment does: every SQLite engine checks its file before a statement
    first = open_store(exp).storage
    first.get_all_studies()
    for p in tmp_path.glob("optuna.db*"):
        if p.suffix != ".lock":
            p.unlink()
    for _ in range(2):  # as the message would have it: run again
        open_store(exp).storage.get_all_studies()
    assert (tmp_path / "optuna.db").stat().st_size > 0
    with pytest.raises(StoreGone):  # the first store's connection points at the deleted file
        first.create_new_study([optuna.study.StudyDirection.MAXIMIZE], "after")

    old = ResponseCache(tmp_path / "llm_cache.sqlite")
    old.get("k")
    for p in tmp_path.glob("llm_cache.sqlite*"):
        p.unlink()
    new = ResponseCache(tmp_path / "llm_cache.sqlite")
    assert new.get("k") is None
    with pytest.raises(StoreGone):
        old.get("k")
