"""The harness's SQLite stores (response cache, search cache, memory) open their files through here.

One set-up for all of them: autocommit connections (each statement its own short transaction unless the caller
says BEGIN), a 30 s busy timeout, WAL so readers never wait for a writer, synchronous=NORMAL, and the switch into
WAL retried while another connection holds the lock it needs. Each thread gets its own connection: sqlite3
connections must not be shared between threads, and worker threads of one sweep share one store object.

A store file SQLite cannot use (damaged pages, not a database, disk I/O, cannot open, read-only, disk full) raises
StoreError naming the file, from the connection and from every statement and fetch on it, so the run stops there.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator

__all__ = ["BUSY_TIMEOUT_S", "StoreError", "damaged", "fault_in", "named_faults", "set_wal", "connect",
           "ThreadLocalSQLite"]

BUSY_TIMEOUT_S = 30.0

# SQLite result codes (the primary code: extended codes carry it in the low byte) that mean the file itself is
# unusable. Busy/locked waits, constraint and SQL errors are the caller's business and pass unchanged (memory's
# FTS5 query of user text catches its syntax errors, for one).
_FAULTS = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
                     sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL, sqlite3.SQLITE_PERM})


class StoreError(BaseException):
    """A store file that cannot be used: the message names the file, what SQLite said, and what to do.

    A BaseException, as asyncio's CancelledError is: the handlers that turn a failed run or trial into data
    (`except Exception`) must not fold a damaged cache or memory into a result that exits 0 (issue 33: a garbled
    LLM cache counted as one failed candidate). It passes through them to the CLI edge, which prints it as one
    line and exits 1."""

    ADVICE = "repair or move the file aside (a cache is rebuilt, memory is not), then run the same command again"

    def __init__(self, path: str | Path, error: BaseException, advice: str = ADVICE) -> None:
        name = getattr(error, "sqlite_errorname", "") or type(error).__name__
        super().__init__(f"store {path} cannot be used: {error} ({name}); {advice}")
        self.path = str(path)


def is_fault(exc: BaseException) -> bool:
    """True when exc is an SQLite error that says the file itself is unusable (see _FAULTS)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.Error) and code is not None and (code & 0xFF) in _FAULTS


def fault_in(exc: BaseException | None) -> sqlite3.Error | None:
    """The SQLite error that says a file is unusable, found in exc or the exceptions it was raised from (SQLAlchemy
    wraps it in DatabaseError, Optuna that in StorageInternalError); None when there is none."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, sqlite3.Error) and is_fault(exc):
            return exc
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
    return None


def damaged(path: str | Path) -> sqlite3.Error | None:
    """What SQLite says is wrong with the file at path (opened read-only, `PRAGMA quick_check`), None when it
    reads as a sound database or does not exist. For naming the file behind an error that did not say which."""
    if not Path(path).is_file():
        return None
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
        try:
            rows = conn.execute("PRAGMA quick_check(1)").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return exc
    if rows != [("ok",)]:
        err = sqlite3.DatabaseError(f"database disk image is malformed ({rows[0][0]})")
        err.sqlite_errorcode, err.sqlite_errorname = sqlite3.SQLITE_CORRUPT, "SQLITE_CORRUPT"  # type: ignore[attr-defined]
        return err
    return None


@contextlib.contextmanager
def named_faults(path: str | Path) -> Iterator[None]:
    """Re-raise an SQLite error that says the file is unusable as StoreError naming path; others pass unchanged."""
    try:
        yield
    except sqlite3.Error as exc:
        if is_fault(exc):
            raise StoreError(path, exc) from exc
        raise


class _Cursor(sqlite3.Cursor):
    """A cursor whose statements and fetches raise StoreError (naming its store's file) on a damaged file: SQLite
    reads pages lazily, so a garbled page may surface only at a later fetch."""

    def _path(self) -> str:
        return getattr(self.connection, "store_path", "?")

    def execute(self, *args: Any) -> "_Cursor":
        with named_faults(self._path()):
            return super().execute(*args)

    def executemany(self, *args: Any) -> "_Cursor":
        with named_faults(self._path()):
            return super().executemany(*args)

    def executescript(self, *args: Any) -> "_Cursor":
        with named_faults(self._path()):
            return super().executescript(*args)

    def fetchone(self) -> Any:
        with named_faults(self._path()):
            return super().fetchone()

    def fetchmany(self, *args: Any) -> list[Any]:
        with named_faults(self._path()):
            return super().fetchmany(*args)

    def fetchall(self) -> list[Any]:
        with named_faults(self._path()):
            return super().fetchall()

    def __next__(self) -> Any:
        with named_faults(self._path()):
            return super().__next__()


class StoreConnection(sqlite3.Connection):
    """sqlite3.Connection whose statements raise StoreError on a damaged file (Connection.execute runs the statement
    itself, not through the cursor's execute, so both are wrapped)."""

    store_path = "?"

    def cursor(self, factory: Any = _Cursor) -> Any:
        return super().cursor(factory)

    def execute(self, *args: Any) -> Any:
        with named_faults(self.store_path):
            return super().execute(*args)

    def executemany(self, *args: Any) -> Any:
        with named_faults(self.store_path):
            return super().executemany(*args)

    def executescript(self, *args: Any) -> Any:
        with named_faults(self.store_path):
            return super().executescript(*args)


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
    """An autocommit connection to path with the busy timeout, WAL (retried) and synchronous=NORMAL; a file SQLite
    cannot use raises StoreError naming it, here or at any later statement."""
    with named_faults(path):
        conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None, factory=StoreConnection)
    conn.store_path = str(path)
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
