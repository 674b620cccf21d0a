"""The study's and MLflow's SQLite files (optuna.db, mlflow.db) as files on a disk that can fill, vanish, turn
read-only or be held locked by another process.

- `created_whole`: a store is created in a temp file beside its name and renamed into place once whole, so a full
  disk or a kill mid-creation leaves no half-created store behind (MLflow's tables come from ~60 migrations, each
  its own commit: one cut short leaves a file every later run fails on with "index ... already exists").
- `guard_engines`: SQLAlchemy's engines (Optuna's, MLflow's) check their SQLite file before every statement, as the
  harness's own stores do (harness.stores.check_store): a file that vanished or turned read-only stops the run with
  one line, before a write to its memory-mapped -shm could kill the process with SIGBUS.
- `probe_lock` / `locked_store`: a file another process holds locked, named with its holder.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Callable

from harness.stores import (DiskFull, StoreError, StoreLocked, StoreReadOnly, busy_timeout_s, check_store, full_in,
                            locked_in, watch)


def created_whole(db: Path, create: Callable[[Path], None]) -> bool:
    """Create the SQLite store `db` all or nothing: `create(tmp)` builds it in a temp file beside db; once it
    returns, the temp file's WAL is checkpointed into it and it is renamed to db. A db that exists (with content, or
    with a WAL beside it) is left as it is. The caller holds the store's creation lock. True when it created db.

    A failure removes the temp files and leaves db absent: the next run creates it afresh. No space left raises
    DiskFull naming db."""
    if _has_content(db):
        return False
    for orphan in (Path(f"{db}-wal"), Path(f"{db}-shm")):  # a WAL with no database: nothing to apply it to
        with contextlib.suppress(OSError):
            orphan.unlink()
    tmp = db.with_name(f".{db.name}.creating-{os.getpid()}-{threading.get_ident()}")
    try:
        create(tmp)
        with contextlib.closing(sqlite3.connect(tmp)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, db)
    except BaseException as exc:
        full = full_in(exc)
        if full is not None and not isinstance(exc, DiskFull):
            raise DiskFull(db, full) from exc
        raise
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}-journal")):
            with contextlib.suppress(OSError):
                leftover.unlink()
    return True


def _has_content(db: Path) -> bool:
    try:
        if db.stat().st_size > 0:
            return True
    except FileNotFoundError:
        return False
    try:
        return Path(f"{db}-wal").stat().st_size > 0
    except FileNotFoundError:
        return False


class HalfCreated(StoreError):
    """An MLflow store whose creation stopped part way (before stores were created whole) or that this MLflow
    cannot bring to its schema: named in one line with the way out, instead of MLflow's 3-line OperationalError."""

    def __init__(self, path: Path, error: BaseException) -> None:
        first = str(getattr(error, "orig", None) or error).strip().splitlines()
        runs = _count_runs(path)
        held = ("it holds no runs, so nothing is lost" if runs == 0 else f"it holds {runs} run(s): keep the moved file"
                if runs else "its runs could not be counted: keep the moved file")
        BaseException.__init__(self, f"store {path} is half-created or not a store this MLflow can open (creating its "
                                     f"tables failed: {first[0][:200] if first else type(error).__name__}); a run that "
                                     f"stopped while creating it (a full disk, a kill) leaves this: move it aside "
                                     f"({held}), then run the same command again")
        self.path = str(path)


def _count_runs(path: Path) -> int | None:
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as conn:
            return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    except (sqlite3.Error, OSError):
        return None


def probe_lock(db: Path, wait_s: float | None = None) -> None:
    """Take and release the write lock of an existing SQLite file (waiting up to wait_s, busy_timeout_s() by
    default): StoreLocked naming the file and its holder when another process keeps it; StoreReadOnly when the file
    or its -shm cannot be written. A missing file passes."""
    if not db.is_file():
        return
    for path, which in ((Path(f"{db}-shm"), "its WAL index (-shm)"), (db, "the file")):
        if path.exists() and not os.access(path, os.W_OK):
            raise StoreReadOnly(db, which)
    wait_s = busy_timeout_s() if wait_s is None else wait_s
    conn = sqlite3.connect(db, timeout=wait_s, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        if locked_in(exc) is not None:
            raise StoreLocked(db, wait_s) from None
        # anything else (damaged, not a database) is named where the store is opened
    finally:
        conn.close()


def locked_store(paths: list[Path]) -> StoreLocked | None:
    """Of these SQLite files, the first another process holds locked now (probed without waiting)."""
    for db in paths:
        try:
            probe_lock(db, wait_s=0)
        except StoreLocked:
            return StoreLocked(db)
        except (StoreError, sqlite3.Error, OSError):
            continue
    return None


_guarded = threading.Lock()
_installed = False


def guard_engines() -> None:
    """Every SQLAlchemy engine on a SQLite file checks the file before each statement (harness.stores.check_store:
    vanished, replaced, read-only); idempotent. The check's StoreError passes Optuna's and MLflow's handlers (a
    BaseException) to the CLI; SQLAlchemy would take it for a disconnect and close the connection, which writes the
    -shm a read-only file cannot take, so the error handler says it is not one."""
    global _installed
    with _guarded:
        if _installed:
            return
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        event.listen(Engine, "before_cursor_execute", _before_execute)
        event.listen(Engine, "handle_error", _not_a_disconnect)
        _installed = True


def _before_execute(conn, cursor, statement, parameters, context, executemany) -> None:  # noqa: ANN001
    """Each pooled DBAPI connection checks against the file it opened (recorded at its first statement in the
    pool's per-connection info), so a store deleted and created anew in this process is not taken for a vanished
    one by the new connections, and still is by the old ones (harness.stores.watch)."""
    url = conn.engine.url
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        info = conn.connection.info
        known = info.get(_KNOWN)
        if known is None:
            info[_KNOWN] = watch(url.database)
            return
        check_store(url.database, known)


_KNOWN = "harness.store_known"


def _not_a_disconnect(ctx) -> None:  # noqa: ANN001
    if isinstance(ctx.original_exception, StoreError):
        ctx.is_disconnect = False


def store_stop(exc: BaseException | None, db: Path | None) -> StoreError | None:
    """The StoreError that must stop the run when exc, met by a step that turns failures into data (a trial's
    handler, the sweep's MLflow guard), came from a store and not from the step: the SQLite file `db` vanished or
    turned read-only, no space was left (DiskFull naming db, or the file the error names), or a file stayed locked.
    None: the step failed on its own account."""
    if isinstance(exc, StoreError):
        return exc
    if db is not None:
        try:
            check_store(db)
        except StoreError as gone:
            return gone
    full = full_in(exc)
    if full is not None:
        return full if isinstance(full, DiskFull) else DiskFull(getattr(full, "filename", None) or db or "?", full)
    if locked_in(exc) is not None:
        return locked_store([db] if db is not None else []) or StoreLocked(db if db is not None else "?")
    return None
