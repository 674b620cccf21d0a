"""Store faults of issue 41 (defects 5-10, 16) as a user meets them: the real sweep command against the Ollama
stand-in (tests/ollama_stub.py), with its disk filling, its results folder deleted or made immutable mid-trial, its
stores half-created, moved aside or held locked. Shared by tests/test_issue41_stores.py (which asserts) and
bench/faults/stores.py (the fault campaign's cases)."""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ollama_stub import OllamaStub

ROOT = Path(__file__).resolve().parents[1]
MODELS = ["glm4:9b", "qwen2.5:32b"]
REPLY = ("1. **json**: parse JSON text with json.loads and write it with json.dumps.\n"
         "2. **csv**: read rows with csv.reader and always open files with encoding='utf-8'.\n"
         "3. **logging**: set the level with logging.basicConfig(level=logging.INFO) per thread.")
SWEEP = "synth_mutation"


def sweep_cmd(host: str, results: Path, corpus: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "experiments.run", f"+sweep={SWEEP}", "backend=ollama", f"backend.host={host}",
            "backend.retries=1", "backend.backoff_s=0.05", "backend.timeout_s=20", "evaluator=deterministic_only",
            "planner=single_pass", "wiggum.max_rounds=1", "research.max_rounds=1", "research.compress=false",
            "research.enrich_urls=0", "search.provider=local", f"search.local_corpus=[{corpus}]",
            "sweep.operators=[add_constraint,drop_sentence,reorder]", "sweep.holdout_top_k=1", "benchmark=smoke",
            "sweep.allow_underpowered=true", "sweep.baseline_repeats=1", f"results_dir={results}",
            f"mlflow.tracking_uri=sqlite:///{results / 'mlflow.db'}",
            "backend.planner_model=glm4:9b", "backend.compressor_model=glm4:9b", "backend.producer_model=qwen2.5:32b",
            "backend.evaluator_model=qwen2.5:32b", *extra]


def env(**more: str) -> dict[str, str]:
    e = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), **more)
    for name in ("HARNESS_DEBUG", "HARNESS_RESULTS_DIR", "MLFLOW_TRACKING_URI"):
        e.pop(name, None)
    return e


def corpus(folder: Path, mb: float = 0.0) -> Path:
    """A search corpus folder; with mb, that much text (its index is about as large: to fill a small disk)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "formats.md").write_text("# Data formats\nThe json module parses JSON; csv reads rows.\n")
    if mb:
        words = [f"word{i} module{i % 97} practice{i % 13}" for i in range(4000)]
        text = "\n\n".join(" ".join(words[i:i + 40]) for i in range(0, len(words), 40))
        for i in range(max(1, int(mb * 1e6 / len(text)))):
            (folder / f"bulk{i}.md").write_text(f"# Bulk {i}\n{text}\n")
    return folder


@dataclass
class Ran:
    rc: int
    out: str  # stdout and stderr together, in order
    secs: float

    @property
    def errors(self) -> list[str]:
        return [ln for ln in self.out.splitlines() if ln.startswith("error")]

    def one_line(self) -> str | None:
        """The single `error...` line when it is the last line and no traceback was printed; else None."""
        lines = [ln for ln in self.out.strip().splitlines() if ln.strip()]
        if len(self.errors) == 1 and lines and lines[-1] == self.errors[0] and "Traceback" not in self.out:
            return self.errors[0]
        return None


def run(cmd: list[str], *, environ: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 240,
        size_limit: int | None = None) -> Ran:
    def limit() -> None:  # `ulimit -f` with SIGXFSZ ignored: a write past it fails with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size_limit, size_limit))

    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=environ or env(), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, preexec_fn=limit if size_limit else None)
    return Ran(p.returncode, p.stdout, time.perf_counter() - t0)


@contextlib.contextmanager
def stub(**kw) -> Iterator[OllamaStub]:
    with OllamaStub(models=MODELS, default_reply=kw.pop("reply", REPLY), **kw) as s:
        yield s


# -- a small file system: tmpfs when this process may mount one (root), else a file-size limit --------------------


@contextlib.contextmanager
def small_disk(where: Path, size_mb: float) -> Iterator[tuple[Path, int | None]]:
    """(folder, size_limit): a tmpfs of size_mb mounted at `where` (ENOSPC when it fills, as a full disk answers)
    when the mount succeeds (root), else the folder as it is and a file-size limit of size_mb for the command
    (`ulimit -f`: EFBIG, which SQLite reports as an I/O error). `grow(where, mb)` frees space."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = os.geteuid() == 0 and shutil.which("mount") is not None and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={int(size_mb * 1024)}k", "tmpfs", str(where)],
        capture_output=True).returncode == 0
    try:
        yield where, (None if mounted else int(size_mb * 1e6))
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def grow(where: Path, size_mb: float) -> None:
    """Free space: remount the tmpfs larger (a no-op where small_disk fell back to a size limit)."""
    subprocess.run(["mount", "-o", f"remount,size={int(size_mb * 1024)}k", str(where)], capture_output=True)


# -- reading what a run left --------------------------------------------------------------------------------------


def study_trials(results: Path) -> list:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=SWEEP, storage=f"sqlite:///{results / 'optuna.db'}")
    return study.get_trials(deepcopy=False)


def mlflow_runs(results: Path) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    exp = client.get_experiment_by_name(SWEEP)
    return client.search_runs([exp.experiment_id], max_results=10000) if exp else []


def set_run_status(results: Path, run_id: str, status: str) -> None:
    from mlflow.tracking import MlflowClient

    MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}").update_run(run_id, status=status)


class Gate:
    """A stub reply that, once armed, holds every chat request until released (a fault lands mid-trial)."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, body: dict) -> str:
        if self.armed.is_set():
            self.held.set()
            self.release.wait(60)
        return REPLY


def mid_trial(cmd: list[str], gate: Gate, fault, *, environ: dict[str, str] | None = None,
              timeout: float = 240) -> Ran:
    """Run cmd; when trial #0's first task starts, hold the model, apply fault(), release, and let the run end."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=environ or env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []

    def read() -> None:
        for line in p.stdout:
            lines.append(line)
            if not gate.armed.is_set() and re.search(rf"\[{SWEEP}\] preflight", line):
                gate.armed.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if gate.held.wait(timeout / 2):
            fault()
        gate.armed.clear()
        gate.release.set()
        rc = p.wait(timeout)
    finally:
        if p.poll() is None:
            p.kill()
    reader.join(10)
    return Ran(rc, "".join(lines), time.perf_counter() - t0)


def remove_tree(path: Path) -> None:
    """`rm -rf path`, again while writers recreate files in it."""
    for _ in range(5):
        subprocess.run(["rm", "-rf", str(path)], capture_output=True)
        if not path.exists():
            return
        time.sleep(0.05)


def make_immutable(path: Path) -> str:
    """chattr +i on everything under path when possible (root), else chmod -w on its folders; the way used."""
    if os.geteuid() == 0 and shutil.which("chattr") and subprocess.run(
            ["chattr", "-R", "+i", str(path)], capture_output=True).returncode == 0:
        return "chattr +i"
    for folder, _, _ in os.walk(path):
        os.chmod(folder, 0o555)
    return "chmod -w"


def make_mutable(path: Path) -> None:
    if shutil.which("chattr"):
        subprocess.run(["chattr", "-R", "-i", str(path)], capture_output=True)
    for folder, _, _ in os.walk(path):
        os.chmod(folder, 0o755)


def immutable_mid_trial(results: Path, docs: Path) -> tuple[Ran, str]:
    """A sweep whose results folder turns immutable mid-trial (make_immutable), made writable again after: what it
    did, and how the folder was made immutable (issue 41 item 16)."""
    gate, how = Gate(), []
    try:
        with stub(reply=gate) as s:
            ran = mid_trial(sweep_cmd(s.url, results, docs, "sweep.n_trials=3"), gate,
                            lambda: how.append(make_immutable(results)))
    finally:
        make_mutable(results)
    return ran, how[0] if how else ""


@contextlib.contextmanager
def held_lock(db: Path) -> Iterator[int]:
    """Another process holding BEGIN EXCLUSIVE on db; yields its pid."""
    code = (f"import sqlite3, sys, time; c = sqlite3.connect({str(db)!r}, isolation_level=None); "
            f"c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(300)")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder.pid
    finally:
        holder.kill()
        holder.wait()


def half_created_mlflow(db: Path, size_limit: int = 3_000_000) -> None:
    """An MLflow store whose creation a file-size limit cut short, made as MLflow makes one (its own
    SqlAlchemyStore, migrations committed one by one), as a run before issue 41 left it."""
    code = ("import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({size_limit}, {size_limit})); "
            "import sqlite3; c = sqlite3.connect(%r); c.execute('PRAGMA journal_mode=WAL'); c.close(); "
            "from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore; "
            "SqlAlchemyStore('sqlite:///%s', %r)" % (str(db), str(db), (db.parent / "mlartifacts").as_uri()))
    subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    with sqlite3.connect(db) as conn:  # what was committed before the cut: tables, no complete schema
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables and "runs" in tables, tables
