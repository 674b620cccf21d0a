"""harness.stores (_sqlite): the WAL switch retried on "database is locked", and one connection per thread."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness.stores import ThreadLocalSQLite
from harness.stores._sqlite import connect, set_wal

REPO = Path(__file__).resolve().parents[1]


class _FlakyConn:
    """Answers `PRAGMA journal_mode=WAL` with the given errors first, then succeeds."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = list(errors)
        self.calls = 0

    def execute(self, sql: str) -> None:
        assert sql == "PRAGMA journal_mode=WAL"
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)


def test_set_wal_retries_database_is_locked():
    conn = _FlakyConn([sqlite3.OperationalError("database is locked")] * 3)
    set_wal(conn, pause_s=0)  # type: ignore[arg-type]
    assert conn.calls == 4


def test_set_wal_reraises_other_errors_at_once():
    conn = _FlakyConn([sqlite3.OperationalError("disk I/O error")])
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        set_wal(conn, pause_s=0)  # type: ignore[arg-type]
    assert conn.calls == 1


def test_set_wal_gives_up_after_its_attempts():
    conn = _FlakyConn([sqlite3.OperationalError("database is locked")] * 5)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        set_wal(conn, attempts=3, pause_s=0)  # type: ignore[arg-type]
    assert conn.calls == 3


def test_set_wal_waits_for_a_lock_held_while_it_switches(tmp_path):
    """Two sweep workers opening the cache at once: switching into WAL can answer 'database is locked' at once,
    busy timeout or not; set_wal retries instead of failing the worker."""
    path = tmp_path / "c.sqlite"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    conn = sqlite3.connect(path, timeout=0, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        conn.execute("PRAGMA journal_mode=WAL")  # a bare PRAGMA fails
    release = threading.Timer(0.2, lambda: holder.execute("COMMIT"))
    release.start()
    set_wal(conn)
    release.join()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


_HOLDER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("CREATE TABLE other_worker (a)")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
conn.execute("COMMIT")
"""


def _hold_in_another_process(path: Path, seconds: float) -> subprocess.Popen:
    """A second process creating its table on the new file (a write transaction, rollback journal) for seconds."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_connect_waits_for_another_process_creating_the_db(tmp_path):
    """The case the retry exists for, across processes: while another process still writes the new file's first
    table, switching to WAL answers "locked" at once even with a 30 s busy timeout; connect() waits it out."""
    bare = tmp_path / "bare.sqlite"
    proc = _hold_in_another_process(bare, 0.5)
    try:
        conn = sqlite3.connect(bare, timeout=30.0, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=30000")
        t0 = time.monotonic()
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            conn.execute("PRAGMA journal_mode=WAL")
        assert time.monotonic() - t0 < 0.4  # at once: the busy timeout does not cover it
        conn.close()
    finally:
        assert proc.wait(30) == 0

    path = tmp_path / "store.sqlite"
    proc = _hold_in_another_process(path, 0.3)
    try:
        conn = connect(path)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 30000
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert conn.execute("SELECT name FROM sqlite_master").fetchall() == [("other_worker",)]
    finally:
        assert proc.wait(30) == 0


_WRITER = """
import sys
from harness.stores import ThreadLocalSQLite
db = ThreadLocalSQLite(sys.argv[1])
conn = db.conn()
conn.execute("CREATE TABLE IF NOT EXISTS rows (who TEXT, n INTEGER)")
for n in range(int(sys.argv[3])):
    conn.execute("INSERT INTO rows VALUES (?, ?)", (sys.argv[2], n))
"""


def test_processes_open_and_write_one_new_store_at_once(tmp_path):
    """Sweep worker processes start together on a store that does not exist yet: none fails, no row is lost."""
    path = tmp_path / "sub" / "store.sqlite"  # the folder is created on first use
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), f"p{i}", "200"], env=env, stderr=subprocess.PIPE)
        for i in range(4)
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    conn = connect(path)
    assert conn.execute("SELECT who, count(*) FROM rows GROUP BY who ORDER BY who").fetchall() == [
        (f"p{i}", 200) for i in range(4)
    ]


def test_threads_get_their_own_connection_and_keep_it(tmp_path):
    db = ThreadLocalSQLite(tmp_path / "t.sqlite")
    db.conn().execute("CREATE TABLE rows (n INTEGER)")
    mine = db.conn()
    assert db.conn() is mine
    seen: list[sqlite3.Connection] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(i: int) -> None:
        try:
            barrier.wait()
            conn = db.conn()
            for n in range(50):
                conn.execute("INSERT INTO rows VALUES (?)", (i * 1000 + n,))
            assert db.conn() is conn
            seen.append(conn)
        except BaseException as exc:  # noqa: BLE001 - asserted on the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert len({id(c) for c in seen}) == 8 and all(c is not mine for c in seen)
    assert mine.execute("SELECT count(*), count(DISTINCT n) FROM rows").fetchone() == (400, 400)
