"""A store file several processes share: where it is (sqlite_file, sqlite_db, resolve_tracking_uri), the exclusive lock
that serialises check-then-create steps across processes (file_lock, and store_lock on a SQLite file), and WAL
(enable_wal). The MLflow tracking store, the Optuna study store and the ledgers use these."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

from ._sqlite import connect


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """Hold an exclusive flock on `path` (created if missing): serialises check-then-write steps across processes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def sqlite_file(uri: str) -> Path | None:
    """The database file of a sqlite:/// URL (nothing created); None for any other URL."""
    return Path(uri[len("sqlite:///"):]) if uri.startswith("sqlite:///") else None


def resolve_tracking_uri(configured: str | None, results_dir: str) -> str:
    """mlflow.tracking_uri (`configured`), else $MLFLOW_TRACKING_URI, else sqlite:///<results_dir>/mlflow.db."""
    if configured:
        return configured
    if os.environ.get("MLFLOW_TRACKING_URI"):
        return os.environ["MLFLOW_TRACKING_URI"]
    return f"sqlite:///{(Path(results_dir) / 'mlflow.db').resolve()}"


def sqlite_db(url: str) -> Path | None:
    """The database file of a sqlite:/// URL, with its folder created; None for any other URL."""
    db = sqlite_file(url)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
    return db


def store_lock(db: Path | None):
    """An exclusive lock on <db>.lock that serialises a SQLite store's check-then-create steps across processes
    (MLflow tables and parent run, Optuna tables and study). A no-op for None: a server database needs none."""
    return file_lock(db.with_name(db.name + ".lock")) if db is not None else contextlib.nullcontext()


def enable_wal(db: Path) -> None:
    """Put a SQLite file in WAL mode (persistent) with a busy timeout and the lock retry (connect), so
    concurrent writers wait, not fail."""
    connect(db).close()
