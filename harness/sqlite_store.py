"""The harness's SQLite stores (response cache, search cache, memory) open their files through here.

One set-up for all of them: autocommit connections (each statement its own short transaction unless the caller
says BEGIN), a 30 s busy timeout, WAL so readers never wait for a writer, synchronous=NORMAL, and the switch into
WAL retried while another connection holds the lock it needs. Each thread gets its own connection: sqlite3
connections must not be shared between threads, and worker threads of one sweep share one store object.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

__all__ = ["BUSY_TIMEOUT_S", "set_wal", "connect", "ThreadLocalSQLite"]

BUSY_TIMEOUT_S = 30.0


def set_wal(conn: sqlite3.Connection, attempts: int = 100, pause_s: float = 0.05) -> None:
    """PRAGMA journal_mode=WAL, retried while another connection holds the lock it needs: switching into WAL takes
    an exclusive lock and SQLite may answer "database is locked" at once, busy timeout or not (two sweep workers,
    or two worker threads, opening a store together hit it). Other errors, and the last failed attempt, raise."""
    for attempt in range(attempts):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts - 1:
                raise
            time.sleep(pause_s)


def connect(path: str | Path, *, timeout_s: float = BUSY_TIMEOUT_S) -> sqlite3.Connection:
    """An autocommit connection to path with the busy timeout, WAL (retried) and synchronous=NORMAL."""
    conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
    try:
        conn.execute(f"PRAGMA busy_timeout={int(timeout_s * 1000)}")
        set_wal(conn)
        conn.execute("PRAGMA synchronous=NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


class ThreadLocalSQLite:
    """Holds one `connect`ed connection per thread to one SQLite file; the folder is created on first use."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._local = threading.local()

    def conn(self) -> sqlite3.Connection:
        """This thread's connection, opened on its first call."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = connect(self.path)
            self._local.conn = conn
        return conn
