"""Throwaway shared services on loopback for the multi-worker tests and bench/throughput/scale_workers.py: a PostgreSQL
cluster in a temporary folder (initdb + pg_ctl; as the postgres user when run as root, since initdb refuses root)
and an `mlflow server` with a PostgreSQL backend store and its own artifact store.

    with postgres_cluster() as pg, mlflow_server(pg.url("mlflow"), tmp / "artifacts") as mlflow_url:
        ...sweep.storage=pg.url("optuna") mlflow.tracking_uri=mlflow_url...

`postgres_unavailable()` says why PostgreSQL cannot be had here (None when it can): the tests skip with it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

PASSWORD = "s3cret-pw"  # trust auth ignores it; it is there so the tests can check it never shows


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bindir() -> Path | None:
    """Where initdb and pg_ctl are: PATH, else Debian's /usr/lib/postgresql/<version>/bin (newest)."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(found).resolve().parent  # a symlink on PATH: the folder that has psql beside it
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]), reverse=True):
        if Path(d, "initdb").exists() and Path(d, "pg_ctl").exists():
            return Path(d)
    return None


def postgres_unavailable() -> str | None:
    if pg_bindir() is None:
        return "PostgreSQL is not installed (no initdb/pg_ctl on PATH or in /usr/lib/postgresql/*/bin)"
    try:
        import sqlalchemy

        sqlalchemy.create_engine("postgresql://postgres@127.0.0.1/postgres")  # imports the default driver
    except ImportError as exc:
        return f"the PostgreSQL driver is not installed ({exc.name}): pip install -e '.[postgres]'"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres user to run initdb as"
    return None


@dataclass(frozen=True)
class Postgres:
    port: int
    folder: Path

    def url(self, db: str, driver: str = "postgresql") -> str:
        return f"{driver}://postgres:{PASSWORD}@127.0.0.1:{self.port}/{db}"


def _as_owner(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@contextlib.contextmanager
def postgres_cluster(databases: tuple[str, ...] = ("optuna", "mlflow")) -> Iterator[Postgres]:
    """initdb in a temporary folder, start on a free loopback port (socket in that folder), create the databases;
    stop (immediate) and remove everything on exit."""
    bindir = pg_bindir()
    folder = Path(tempfile.mkdtemp(prefix="pg-services-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    data, port = folder / "data", free_port()
    run = dict(check=True, capture_output=True, text=True, cwd=folder)
    started = False
    try:
        subprocess.run(_as_owner([str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                                  "-E", "UTF8", "--no-sync"]), **run)
        subprocess.run(_as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-l", str(folder / "server.log"), "-w",
                                  "-o", f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off "
                                        f"-c max_connections=200", "start"]), **run)
        started = True
        for db in databases:
            subprocess.run([str(bindir / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d",
                            "postgres", "-q", "-c", f'CREATE DATABASE "{db}"'], **run)
        yield Postgres(port, folder)
    finally:
        if started:
            subprocess.run(_as_owner([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"]),
                           capture_output=True, cwd=folder)
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def mlflow_server(backend_uri: str, artifacts: Path, *, timeout_s: float = 90) -> Iterator[str]:
    """`mlflow server` on a free loopback port (one worker, proxied artifacts under `artifacts`); yields its URL
    once /health answers; terminated on exit."""
    port = free_port()
    artifacts.mkdir(parents=True, exist_ok=True)
    log = open(artifacts.parent / f"mlflow-server-{port}.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_uri,
                             "--artifacts-destination", str(artifacts), "--host", "127.0.0.1", "--port", str(port),
                             "--workers", "1"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            # no job runner: it starts seven huey consumers, for GenAI scorer jobs nothing here uses
                            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    raise RuntimeError(f"mlflow server did not start: {Path(log.name).read_text()[-2000:]}")
                time.sleep(0.3)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 15)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait()
        log.close()
