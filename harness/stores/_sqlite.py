"""The harness's SQLite stores (response cache, search cache, memory) open their files through here.

One set-up for all of them: autocommit connections (each statement its own short transaction unless the caller
says BEGIN), a 30 s busy timeout, WAL so readers never wait for a writer, synchronous=NORMAL, and the switch into
WAL retried while another connection holds the lock it needs. Each thread gets its own connection: sqlite3
connections must not be shared between threads, and worker threads of one sweep share one store object.

A store file SQLite cannot use (damaged pages, not a database, disk I/O, cannot open, read-only, disk full) raises
StoreError naming the file, from the connection and from every statement and fetch on it, so the run stops there.
Three kinds say more: DiskFull (no space left: free space, then the same command), StoreGone (the file or
its folder vanished while in use: `rm -rf results`) and StoreReadOnly (the file or its -shm became read-only or
immutable while in use). The last two are checked before every statement (`check_store`, two stat calls): SQLite keeps
its WAL index in a memory-mapped -shm file, and a write to that mapping once the file is immutable kills the process
with SIGBUS (a "Bus error", exit 135), beyond any handler; so is closing such a connection, which is why the CLI
leaves the process without closing them once `unsafe_to_close()` says so.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator

__all__ = ["BUSY_TIMEOUT_S", "DiskFull", "StoreError", "StoreGone", "StoreLocked", "StoreReadOnly", "busy_timeout_s",
           "check_store", "damaged", "fault_in", "full_in", "locked_in", "named_faults", "no_space", "set_wal", "connect",
           "unsafe_to_close", "watch", "ThreadLocalSQLite"]

BUSY_TIMEOUT_S = 30.0  # how long a statement waits for another connection's lock; HARNESS_LOCK_WAIT_S overrides


def busy_timeout_s() -> float:
    """Seconds a store waits for a lock another connection holds: $HARNESS_LOCK_WAIT_S, else BUSY_TIMEOUT_S."""
    raw = os.environ.get("HARNESS_LOCK_WAIT_S", "")
    try:
        value = float(raw) if raw else BUSY_TIMEOUT_S
    except ValueError:
        return BUSY_TIMEOUT_S
    return value if value >= 0 and value == value else BUSY_TIMEOUT_S

# SQLite result codes (the primary code: extended codes carry it in the low byte) that mean the file itself is
# unusable. Busy/locked waits, constraint and SQL errors are the caller's business and pass unchanged (memory's
# FTS5 query of user text catches its syntax errors, for one).
_FAULTS = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN,
                     sqlite3.SQLITE_READONLY, sqlite3.SQLITE_FULL, sqlite3.SQLITE_PERM})


_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})  # EFBIG: a file-size limit (ulimit -f)


class StoreError(BaseException):
    """A store file that cannot be used: the message names the file, what SQLite said, and what to do.

    A BaseException, as asyncio's CancelledError is: the handlers that turn a failed run or trial into data
    (`except Exception`) must not fold a damaged cache or memory into a result that exits 0 (a garbled LLM cache
    would count as one failed candidate). It passes through them to the CLI edge, which prints it as one
    line and exits 1."""

    ADVICE = "repair or move the file aside (a cache is rebuilt, memory is not), then run the same command again"

    def __init__(self, path: str | Path, error: BaseException, advice: str = ADVICE) -> None:
        name = getattr(error, "sqlite_errorname", "") or type(error).__name__
        super().__init__(f"store {path} cannot be used: {error} ({name}); {advice}")
        self.path = str(path)


class DiskFull(StoreError):
    """A write that found no space left (ENOSPC, a quota, a file-size limit, SQLite's "database or disk is full"):
    the run stops, naming the file, instead of recording an empty result it would reuse."""

    ADVICE = "free space, then run the same command again"

    def __init__(self, path: str | Path, error: BaseException) -> None:
        BaseException.__init__(self, f"disk full: {path} cannot be written ({_why(error)}{_free(path)}); "
                                     f"{self.ADVICE}")
        self.path = str(path)


class StoreGone(StoreError):
    """A store file that vanished while in use (deleted, or its folder deleted or moved): nothing more can be stored
    there, and the work under way is not recorded as anyone's failure."""

    def __init__(self, path: str | Path, folder: Path | None = None) -> None:
        where = (f"the results folder {folder} vanished (deleted or moved) while the run used {path}" if folder
                 else f"store {path} vanished while the run used it (deleted or replaced: the folder {Path(path).parent} "
                      f"emptied?)")
        BaseException.__init__(self, f"{where}: nothing more can be stored, and nothing under way was recorded as "
                                     f"failed; restore it to resume, or run the same command again to start anew")
        self.path = str(path)


class StoreReadOnly(StoreError):
    """A store file (or its -shm WAL index) that became read-only or immutable while in use."""

    def __init__(self, path: str | Path, which: str) -> None:
        BaseException.__init__(self, f"store {path} cannot be written: {which} became read-only while the run used it "
                                     f"(chmod -w or chattr +i?); make {Path(path).parent} writable again (chmod u+w, "
                                     f"chattr -i), then run the same command again")
        self.path = str(path)


class StoreLocked(StoreError):
    """A store file another process holds locked (BEGIN EXCLUSIVE, a stuck writer) past the busy timeout."""

    def __init__(self, path: str | Path, waited_s: float | None = None) -> None:
        holder, waited = lock_holder(path), f" (waited {waited_s:g} s)" if waited_s is not None else ""
        BaseException.__init__(self, f"store {path} is locked by another process{holder}{waited}: let it finish or "
                                     f"stop it, then run the same command again")
        self.path = str(path)


def _why(error: BaseException) -> str:
    if isinstance(error, OSError) and error.errno is not None:
        why = os.strerror(error.errno)
    else:
        why = str(error).splitlines()[0] if str(error) else type(error).__name__
    limit = _size_limit()
    if limit is not None and (getattr(error, "errno", None) == errno.EFBIG or isinstance(error, sqlite3.Error)):
        why += f"; this process may write files of at most {limit} bytes (ulimit -f)"
    return why


def _free(path: str | Path) -> str:
    """'; 12.0 KiB free on its file system', or '' when the folder cannot be measured."""
    folder = Path(path)
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    try:
        free = float(shutil.disk_usage(folder).free)
    except OSError:
        return ""
    unit = "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if free < 1024 or unit == "TiB":
            break
        free /= 1024
    return f"; {free:.0f} {unit} free there now" if unit == "B" else f"; {free:.1f} {unit} free there now"


def lock_holder(path: str | Path) -> str:
    """' (pid 123: python -c ...)' for the process holding a POSIX lock on path or its -shm (from /proc/locks), or ''."""
    pids: list[int] = []
    try:
        inodes = {os.stat(p).st_ino for p in (str(path), f"{path}-shm") if os.path.exists(p)}
        with open("/proc/locks", encoding="ascii", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) > 5 and parts[4].isdigit() and int(parts[5].rsplit(":", 1)[-1]) in inodes:
                    pid = int(parts[4])
                    if pid != os.getpid() and pid not in pids:
                        pids.append(pid)
    except (OSError, ValueError):
        return ""
    if not pids:
        return ""
    try:
        with open(f"/proc/{pids[0]}/cmdline", "rb") as fh:
            cmd = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()[:80]
    except OSError:
        cmd = ""
    return f" (pid {pids[0]}{': ' + cmd if cmd else ''})"


def full_in(exc: BaseException | None) -> BaseException | None:
    """The error that says no space was left (OSError ENOSPC / EDQUOT / EFBIG, SQLite's SQLITE_FULL), found in exc
    or the exceptions it was raised from; None when there is none."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFull):
            return exc
        if isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS:
            return exc
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF if isinstance(exc, sqlite3.Error) else None
        if code == sqlite3.SQLITE_FULL or (code == sqlite3.SQLITE_IOERR and _size_limit() is not None):
            return exc  # SQLite reports a write cut by the file-size limit (EFBIG) as an I/O error
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
    return None


def _size_limit() -> int | None:
    """This process's file-size limit in bytes (`ulimit -f`), None when unlimited."""
    import resource

    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def locked_in(exc: BaseException | None) -> sqlite3.Error | None:
    """SQLite's "database is locked" (SQLITE_BUSY / SQLITE_LOCKED) in exc or the exceptions it was raised from."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, sqlite3.Error) and ((getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF in
                                               (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)):
            return exc
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
    return None


@contextlib.contextmanager
def no_space(path: str | Path) -> Iterator[None]:
    """An OSError that says no space was left, re-raised as DiskFull naming path (not a temp file beside it)."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _FULL_ERRNOS:
            raise DiskFull(path, exc) from exc
        raise


# -- files in use: each store file's identity when first used, checked before every statement ------------------

Known = tuple[tuple[int, int], list[tuple[Path, tuple[int, int]]]]  # a file's identity and its folders'
_in_use: dict[str, Known] = {}  # path -> the identity of the file last opened at it


def _identity(path: str | Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def watch(path: str | Path) -> Known | None:
    """The identity (device, inode) of path and its folders now, for the connection that just opened it (its own
    checks: check_store(path, known)) and for checks by path alone (the file opened last there); None if unreadable. Per
    connection: a store deleted and made anew in one process (a notebook's second sweep) is not taken for a
    vanished one, and an old connection to the deleted file still sees it gone."""
    key = str(path)
    try:
        known = (_identity(key), [(f, _identity(f)) for f in Path(key).absolute().parents if f != f.parent])
    except OSError:
        return None
    _in_use[key] = known
    return known


def check_store(path: str | Path, known: Known | None = None) -> None:
    """Raise StoreGone when a watched store file vanished or was replaced (the message names the outermost folder
    that went with it: `rm -rf results` then a writer's mkdir makes a new, empty one), StoreReadOnly when it or its
    -shm can no longer be written (writing the -shm's mapping then would be a SIGBUS). `known`: the identity the
    checking connection opened (watch); without it, the file last opened at path."""
    key = str(path)
    known = known if known is not None else _in_use.get(key)
    if known is None:
        watch(key)
        return
    ident, folders = known
    try:
        same = _identity(key) == ident
    except FileNotFoundError:
        same = False
    except OSError:
        return
    if not same:
        gone = None
        for folder, fid in folders:  # innermost first: keep the outermost that vanished
            try:
                if _identity(folder) != fid:
                    gone = folder
            except OSError:
                gone = folder
        raise StoreGone(key, gone)
    shm = f"{key}-shm"
    if os.path.exists(shm) and not os.access(shm, os.W_OK):
        raise StoreReadOnly(key, "its WAL index (-shm)")
    if not os.access(key, os.W_OK):
        raise StoreReadOnly(key, "the file")


def unsafe_to_close() -> bool:
    """True when a store file this process used has a -shm it can no longer write: closing a connection to it (as
    the interpreter does at exit) would write the memory-mapped WAL index and die of SIGBUS."""
    for key in list(_in_use):
        shm = f"{key}-shm"
        if os.path.exists(shm) and not os.access(shm, os.W_OK):
            return True
    return False


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
        if full_in(exc) is not None:
            raise DiskFull(path, exc) from exc
        if is_fault(exc):
            raise StoreError(path, exc) from exc
        raise


class _Cursor(sqlite3.Cursor):
    """A cursor whose statements and fetches raise StoreError (naming its store's file) on a damaged file: SQLite
    reads pages lazily, so a garbled page may surface only at a later fetch."""

    def _path(self) -> str:
        return getattr(self.connection, "store_path", "?")

    def _check(self) -> None:
        check_store(self._path(), getattr(self.connection, "store_known", None))

    def execute(self, *args: Any) -> "_Cursor":
        self._check()
        with named_faults(self._path()):
            return super().execute(*args)

    def executemany(self, *args: Any) -> "_Cursor":
        self._check()
        with named_faults(self._path()):
            return super().executemany(*args)

    def executescript(self, *args: Any) -> "_Cursor":
        self._check()
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
    store_known: Known | None = None  # the file this connection opened (watch)

    def cursor(self, factory: Any = _Cursor) -> Any:
        return super().cursor(factory)

    def execute(self, *args: Any) -> Any:
        check_store(self.store_path, self.store_known)
        with named_faults(self.store_path):
            return super().execute(*args)

    def executemany(self, *args: Any) -> Any:
        check_store(self.store_path, self.store_known)
        with named_faults(self.store_path):
            return super().executemany(*args)

    def executescript(self, *args: Any) -> Any:
        check_store(self.store_path, self.store_known)
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


def connect(path: str | Path, *, timeout_s: float | None = None) -> sqlite3.Connection:
    """An autocommit connection to path with the busy timeout (busy_timeout_s()), WAL (retried) and
    synchronous=NORMAL; a file SQLite cannot use raises StoreError naming it, here or at any later statement."""
    timeout_s = busy_timeout_s() if timeout_s is None else timeout_s
    with named_faults(path):
        conn = sqlite3.connect(path, timeout=timeout_s, isolation_level=None, factory=StoreConnection)
    conn.store_path = str(path)
    conn.store_known = watch(path)
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
