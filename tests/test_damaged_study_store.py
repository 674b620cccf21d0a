"""A damaged study file (optuna.db) or MLflow store is named in one line, and nothing is written over it.

Before (6224203): a sweep on an optuna.db that is not a database, or whose pages are garbled, printed Optuna's
"StorageInternalError: An exception is raised during the commit. This typically happens due to invalid data in the
commit, e.g. exceeding max length" under a 60-line traceback (the decision-rule check reads the file before the
CLI's error handling), naming neither the file nor what is wrong with it.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import sqlalchemy
from store_damage import garble_pages

from experiments.run import store_fault
from harness.stores import damaged, fault_in

ROOT = Path(__file__).resolve().parents[1]


def _sweep(results: Path, cwd: Path, trials: int) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("HARNESS_DEBUG", None)
    cmd = [sys.executable, "-m", "experiments.run", "+sweep=synth_mutation", "backend=fake", "benchmark=smoke",
           "sweep.allow_underpowered=true", f"sweep.n_trials={trials}", "sweep.baseline_repeats=1",
           f"results_dir={results}", f"mlflow.tracking_uri=sqlite:///{results / 'mlflow.db'}"]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _one_error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error")]
    assert len(errors) == 1, proc.stderr[-3000:]
    return errors[0]


def test_an_optuna_db_that_is_not_a_database_is_named_in_one_line_and_left_as_it_was(tmp_path):
    results = tmp_path / "r"
    results.mkdir()
    db = results / "optuna.db"
    junk = os.urandom(20_000)
    db.write_bytes(junk)
    line = _one_error_line(_sweep(results, tmp_path, 1))
    assert line.startswith(f"error: store {db} cannot be used: file is not a database (SQLITE_NOTADB); ")
    assert "the study's trials are in it" in line
    assert db.read_bytes() == junk  # nothing written over the user's file
    assert sorted(p.name for p in results.iterdir()) == ["optuna.db"]  # and nothing else begun


def test_an_optuna_db_with_garbled_pages_is_named_in_one_line(tmp_path):
    results = tmp_path / "r"
    first = _sweep(results, tmp_path, 1)
    # backend=fake answers no model call: exit 3, resumable (issue 41 item 1); the study file exists all the same
    assert first.returncode == 3, first.stderr[-3000:]
    db = results / "optuna.db"
    garble_pages(db)
    before = db.read_bytes()
    line = _one_error_line(_sweep(results, tmp_path, 2))
    assert line.startswith(f"error: store {db} cannot be used: database disk image is malformed")
    assert "(SQLITE_CORRUPT)" in line
    assert db.read_bytes() == before


def _wrapped_fault(db: Path, table: str) -> Exception:
    """What a damaged file looks like by the time it reaches the CLI from inside Optuna: SQLite's error wrapped by
    SQLAlchemy's DatabaseError, that by Optuna's StorageInternalError (as optuna.storages._rdb raises it)."""
    engine = sqlalchemy.create_engine(f"sqlite:///{db}")
    try:
        try:
            with engine.connect() as conn:
                conn.execute(sqlalchemy.text(f"SELECT * FROM {table}")).fetchall()
        except sqlalchemy.exc.DatabaseError as exc:
            raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") from exc
    except optuna.exceptions.StorageInternalError as exc:
        return exc
    finally:
        engine.dispose()
    raise AssertionError("the damaged file read as a database")


@pytest.mark.parametrize("which, table", [("optuna.db", "trials"), ("mlflow.db", "runs")])
def test_a_fault_met_mid_sweep_names_whichever_store_sqlite_reads_as_damaged(tmp_path, monkeypatch, which, table):
    from experiments.config import compose_config

    monkeypatch.delenv("HARNESS_RESULTS_DIR")  # as experiments.run.command_line_wins leaves it beside results_dir=

    results = tmp_path / "r"
    first = _sweep(results, tmp_path, 1)
    # backend=fake answers no model call: exit 3, resumable (issue 41 item 1); the study file exists all the same
    assert first.returncode == 3, first.stderr[-3000:]
    assert damaged(results / "optuna.db") is None and damaged(results / "mlflow.db") is None
    garble_pages(results / which)
    assert damaged(results / which) is not None
    exc = _wrapped_fault(results / which, table)
    assert isinstance(fault_in(exc), sqlite3.DatabaseError)
    cfg = compose_config(["+sweep=synth_mutation", "backend=fake", f"results_dir={results}",
                          f"mlflow.tracking_uri=sqlite:///{results / 'mlflow.db'}"])
    err = store_fault(exc, cfg)
    assert err is not None and err.path == str(results / which)
    assert ("the study's trials" if which == "optuna.db" else "the MLflow runs are in it") in str(err)


def test_errors_without_a_sqlite_fault_behind_them_are_not_store_errors(tmp_path):
    try:
        try:
            sqlite3.connect(":memory:").execute("SELEC 1")
        except sqlite3.OperationalError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as exc:
        assert fault_in(exc) is None
        assert store_fault(exc, None) is None
    assert damaged(tmp_path / "absent.db") is None
