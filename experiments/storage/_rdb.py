"""Workers on several machines against one study: the shared stores checked before any trial, a lock every
worker of a study sees, and a dead worker's trial failed by heartbeat and retried.

The study lives in an Optuna RDB storage (sweep.storage: SQLite on one host, PostgreSQL or MySQL across hosts) and
the runs in MLflow (mlflow.tracking_uri: a file or database store, or an `mlflow server`). What must happen once
per study (the baseline enqueued, its repeats, each holdout confirmation, the MLflow parent run) runs under
`shared_lock`: an advisory lock in the study's own database when that database is a server, else a file lock on
this host (SQLite cannot be shared between machines anyway).

A worker is named by host and pid (trial user attrs worker_host, worker_pid). HARNESS_WORKER_HOST overrides the
host name: containers on different machines can share one, and then a worker would take another machine's live
pid for a dead one of its own.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import socket
import threading
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

from experiments.config import ConfigError

SERVER_DIALECTS = ("postgresql", "mysql")  # advisory locks: pg_advisory_lock, GET_LOCK
EXTRA = {"postgresql": "postgres"}  # pip install -e '.[<extra>]' brings these drivers:
EXTRA_DRIVERS = ("psycopg", "psycopg2")
PIP_NAMES = {"MySQLdb": "mysqlclient", "pymysql": "PyMySQL", "psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary"}


class ServiceUnavailable(ConfigError):
    """A shared store (the study's database, the MLflow tracking server or database) cannot be used."""


def mask_url(url: str) -> str:
    """The URL with its password replaced by ***: safe for logs, summaries and MLflow params."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def worker_host() -> str:
    """This worker's host name in trial attrs: $HARNESS_WORKER_HOST, else the machine's host name."""
    return os.environ.get("HARNESS_WORKER_HOST") or socket.gethostname()


def dialect(url: str) -> str:
    """'postgresql' for postgresql+psycopg2://..., 'sqlite', 'http', ...: the scheme before any '+driver'."""
    return url.split(":", 1)[0].split("+", 1)[0].lower()


def is_server_db(url: str) -> bool:
    return dialect(url) in SERVER_DIALECTS


_engines: dict[str, Any] = {}
_engines_lock = threading.Lock()


def _engine(url: str) -> Any:
    """One SQLAlchemy engine per URL (no pool: a lock's connection is its own, and closes with it)."""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    with _engines_lock:
        if url not in _engines:
            args = {"connect_timeout": 10} if dialect(url) in SERVER_DIALECTS else {}
            _engines[url] = sqlalchemy.create_engine(url, poolclass=NullPool, connect_args=args)
        return _engines[url]


def check_database(url: str, what: str) -> None:
    """Raise ServiceUnavailable (one line, password masked) when the database's driver is missing or it does not
    answer. SQLite and non-database URLs pass without a look."""
    name = dialect(url)
    if name == "sqlite" or "://" not in url or name in ("http", "https", "file", "databricks"):
        return
    shown = mask_url(url)
    import sqlalchemy.exc

    try:
        engine = _engine(url)
    except ImportError as exc:
        extra, module = EXTRA.get(name), exc.name or ""
        how = (f"pip install -e '.[{extra}]'" if extra and module in EXTRA_DRIVERS
               else f"pip install {PIP_NAMES.get(module, module)}" if module else "install the database driver")
        raise ServiceUnavailable(f"{what}={shown}: the database driver is not installed "
                                 f"({exc.name or exc}); {how}") from None
    except (sqlalchemy.exc.ArgumentError, sqlalchemy.exc.NoSuchModuleError) as exc:
        raise ServiceUnavailable(f"{what}={shown}: not a database URL SQLAlchemy can open ({_first_line(exc)})") from None
    try:
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT 1"))
    except sqlalchemy.exc.SQLAlchemyError as exc:
        reason = _first_line(getattr(exc, "orig", None) or exc)
        raise ServiceUnavailable(f"{what}={shown}: the database does not answer ({reason})") from None


def check_tracking(uri: str) -> None:
    """An MLflow server URL must answer GET /health; a database URL must connect (check_database)."""
    if dialect(uri) not in ("http", "https"):
        check_database(uri, "mlflow.tracking_uri")
        return
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=10) as resp:
            resp.read()
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise ServiceUnavailable(f"mlflow.tracking_uri={mask_url(uri)}: the MLflow server does not answer "
                                 f"({_first_line(reason)})") from None


def check_services(exp: Any) -> None:
    """Before any trial: the study's storage (a sweep) and the MLflow store, each one line when unusable; a SQLite
    file of either that another process holds locked, or that cannot be written, one line naming it (StoreError)."""
    from harness.stores import sqlite_file

    from ._sqlite_files import guard_engines, probe_lock

    guard_engines()
    urls = []
    if exp.sweep.kind == "synth_mutation":
        check_database(exp.storage_url, "sweep.storage")
        urls.append(exp.storage_url)
    if exp.mlflow.enabled:
        from experiments.config import tracking_uri

        check_tracking(tracking_uri(exp))
        urls.append(tracking_uri(exp))
    for url in urls:
        db = sqlite_file(url)
        if db is not None:
            probe_lock(db)


def _first_line(exc: Any) -> str:
    text = str(exc).strip()
    return mask_secrets(text.splitlines()[0].strip() if text else type(exc).__name__)


def mask_secrets(text: str) -> str:
    """Any scheme://user:password@ inside a message, masked."""
    import re

    return re.sub(r"(\w[\w+.-]*://[^:/@\s]*):[^@/\s]+@", r"\1:***@", text)


def lock_key(name: str) -> int:
    """A signed 64-bit key for pg_advisory_lock from a lock name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


@contextlib.contextmanager
def shared_lock(url: str, name: str, local: Path | None = None) -> Iterator[None]:
    """An exclusive lock named `name` that every worker of the study holds in turn, on any machine: an advisory
    lock in the study's database (PostgreSQL, MySQL), held by a connection of its own (a killed worker's
    connection closes and frees it). For any other storage, a file lock on `local` (None: no lock)."""
    if not is_server_db(url):
        if local is None:
            yield
            return
        from harness.stores import file_lock

        with file_lock(local):
            yield
        return
    import sqlalchemy

    with _engine(url).connect() as conn:
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")  # not idle in a transaction while held
        if dialect(url) == "postgresql":
            key = lock_key(name)
            conn.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": key})
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": key})
        else:  # MySQL: names up to 64 characters
            key = hashlib.sha256(name.encode()).hexdigest()[:60]
            conn.execute(sqlalchemy.text("SELECT GET_LOCK(:k, -1)"), {"k": key})
            try:
                yield
            finally:
                conn.execute(sqlalchemy.text("SELECT RELEASE_LOCK(:k)"), {"k": key})


# -- a dead worker's trial --------------------------------------------------------------------------------------

STALE_REASON = "worker died: no heartbeat from {host} pid {pid} within the grace period"
RETRIES = 3  # a trial stopped by its process's end is queued again up to this many times (a trial that kills its
# process every time would otherwise loop); past that it stays FAIL and counts


def requeued(trials: Any) -> set[int]:
    """Numbers of the trials that were queued again (their process died or was stopped mid-trial): each has a copy
    that takes its place (Optuna's system attr retry_history), so they do not count toward n_trials."""
    out: set[int] = set()
    for t in trials:
        out.update(int(n) for n in t.system_attrs.get("retry_history", ()))
    return out


def trial_slot(trial: Any, trials: Any) -> int:
    """The place a trial takes in the search, which seeds its choices and names its runs (experiments.sweep):
    a copy queued again takes the place of the trial it replaces (user attr slot, kept on the copy), a new trial its
    number less the trials queued again before it. Without a kill every trial's slot is its number; with one, the
    resumed search makes the choices an uninterrupted one made."""
    if isinstance(trial.user_attrs.get("slot"), int):
        return int(trial.user_attrs["slot"])
    number = int(trial.system_attrs.get("failed_trial", trial.number))  # a copy of a trial made before slots
    return number - sum(1 for n in requeued(trials) if n < number)


class StaleTrials:
    """The storage's heartbeat-stale callback: a trial left RUNNING by a dead worker is queued again once (Optuna's
    retry callback, which marks the copy with system attr failed_trial) and remembered, so that the process that
    failed it (only one can) logs its MLflow run.

    The retry keeps the trial's parameters and only the user attrs it was enqueued with (`keep`: the baseline's
    operator); what the dead worker recorded mid-trial (instructions, partial scores) is not carried over."""

    def __init__(self, max_retry: int = 1, keep: Callable[[str, Any], bool] = lambda k, v: (k == "operator"
                 and v == "baseline") or k == "slot") -> None:
        import optuna

        retry_cls = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None) or \
            optuna.storages.RetryFailedTrialCallback  # Optuna 4
        self._retry = retry_cls(max_retry=max_retry)
        self._keep = keep
        self._failed: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, study: Any, trial: Any) -> None:
        failed = copy.deepcopy(trial)
        a = failed.user_attrs
        if not a.get("fail_reason"):
            a = {**a, "fail_reason": STALE_REASON.format(host=a.get("worker_host", "?"), pid=a.get("worker_pid", "?"))}
            failed.user_attrs = a
        with self._lock:
            self._failed.append(failed)
        again = copy.deepcopy(trial)
        again.user_attrs = {k: v for k, v in trial.user_attrs.items() if self._keep(k, v)}
        self._retry(study, again)

    def requeue(self, study: Any, trial: Any) -> None:
        """Queue a copy of a failed trial (its parameters, slot and the kept attrs), as for a stale one, without
        reporting it as a dead worker's: a trial this process stopped (Ctrl-C, SIGTERM)."""
        again = copy.deepcopy(trial)
        again.user_attrs = {k: v for k, v in trial.user_attrs.items() if self._keep(k, v)}
        self._retry(study, again)

    def take(self) -> list[Any]:
        """The trials this process failed since the last take (FrozenTrials with a fail_reason)."""
        with self._lock:
            out, self._failed = self._failed, []
        return out

    def storage_kwargs(self) -> dict[str, Any]:
        """RDBStorage keyword for this callback (its name changed in Optuna 4.9)."""
        import inspect

        import optuna

        params = inspect.signature(optuna.storages.RDBStorage.__init__).parameters
        key = "heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in params else "failed_trial_callback"
        return {key: self}


def log_stale(stale: StaleTrials, tracker: Any, baseline: Any = None, out: Callable[[str], None] | None = None,
              name: str = "") -> list[int]:
    """One line, and an MLflow run (FAILED, with the reason) unless one exists, for each trial this process failed
    as stale."""
    failed = stale.take()
    if not failed:
        return []
    if out is not None:
        out(f"[{name}] failed {len(failed)} trial(s) of a dead worker and queued each again: "
            + "; ".join(f"#{t.number} ({t.user_attrs['fail_reason']})" for t in failed))
    have = {int(r.data.tags["trial_number"]) for r in tracker.trial_runs() if "trial_number" in r.data.tags}
    for t in failed:
        if t.number not in have:
            tracker.log_trial(t, None, baseline=baseline)
    return [t.number for t in failed]
