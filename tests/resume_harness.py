"""Kill -9 at a chosen moment of the real CLI, resume with the same command, compare with an uninterrupted run.

Each run is `python tests/resume_driver.py <overrides>` (experiments.run on the fake backend with scripted replies) in
a folder of its own: results/ (runs.jsonl, the Optuna study, the ledger), mlflow.db. A moment is a run-id regex and
a count: the driver SIGKILLs itself right after the n-th runs.jsonl record of a run whose id matches (a finished
task of the step is on disk, the step is not stored), or, for the MLflow moments, right after a nested run's traces
are logged (the run made, the step not yet stored). `outcome()` reads back what a person checks: the Optuna values
of the trials that count, the promoted instructions, runs.jsonl ids and MLflow runs.
tests/test_resume_kill.py asserts on it; bench/faults/resume_after_kill.py prints the table in docs/RELIABILITY.md.
"""

from __future__ import annotations

import collections
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "resume_driver.py"
SWEEP = "synth_mutation"

# small but whole: baseline, a repeat, 3 proposals, the final race of 2, holdout 2 + 1 runs on 2 tasks; the joint
# search, whose three proposals all reach the race (a per-type search sends its composition alone)
SWEEP_ARGS = ["+sweep=synth_mutation", "backend=fake", "sweep.search=joint", "evaluator=deterministic_only", "planner=single_pass",
              "wiggum.max_rounds=1", "research.max_rounds=1", "research.compress=false", "research.enrich_urls=0",
              "search.provider=local", "sweep.operators=[add_constraint,drop_sentence,reorder]", "benchmark=smoke",
              "sweep.allow_underpowered=true", "sweep.n_trials=4", "sweep.baseline_repeats=2", "sweep.race_top=2",
              "sweep.holdout_baseline_runs=2", "sweep.holdout_candidate_runs=1", "sweep.gate_tasks=0"]
AB_ARGS = ["+sweep=prior_knowledge_ab", "backend=fake", "evaluator=deterministic_only", "planner=single_pass",
           "wiggum.max_rounds=1", "research.max_rounds=1", "research.compress=false", "research.enrich_urls=0",
           "search.provider=local", "benchmark=smoke", "ab.allow_underpowered=true", "ab.replications=1"]

# moment -> (kind, hook env): runs.jsonl moments "RUNS=<regex>:<n>", MLflow moments "TRACES=<kind tag>:<n>"
MOMENTS = {
    "baseline trial": ("sweep", "RUNS=-t0-:2"),
    "search trial": ("sweep", "RUNS=-t2-:2"),
    "baseline repeat": ("sweep", "RUNS=-baseline-s1-:2"),
    "baseline repeat, MLflow run logged": ("sweep", "TRACES=baseline_repeat:1"),
    "final race": ("sweep", "RUNS=-race-:2"),
    "holdout run": ("sweep", "RUNS=-holdout-:3"),
    "holdout run, MLflow run logged": ("sweep", "TRACES=holdout:1"),
    "A/B cell": ("ab", "RUNS=^ab-:3"),
}


@dataclass
class Run:
    rc: int
    output: str
    seconds: float


@dataclass
class Outcome:
    values: list[tuple[int, str, float | None]]  # (slot, state, value) of the trials that count, by slot
    promoted: str  # promoted_synth.yaml without its first line (the header names the trial number)
    run_ids: collections.Counter
    mlflow_runs: collections.Counter  # (kind, run name) of every run under the experiment
    mlflow_running: int  # runs left RUNNING
    trials_total: int
    ab_cells: collections.Counter = field(default_factory=collections.Counter)


def corpus(folder: Path) -> Path:
    c = folder / "corpus"
    c.mkdir(parents=True, exist_ok=True)
    (c / "formats.md").write_text("# Data formats\nThe json module parses JSON; csv reads rows; pickle stores "
                                  "objects. Open text files with encoding='utf-8'.\n")
    return c


def start_mid_trial(folder: Path, corpus_root: Path, *,
                    poll_s: float = 0.05) -> tuple[subprocess.Popen, list[str], threading.Thread]:
    """Start the scripted sweep (SWEEP_ARGS) in `folder` with SIGINT at its default action, as a terminal's Ctrl-C
    finds it (a test started with nohup ... & hands its children SIGINT ignored), and return once trial #1 is
    mid-way: (the process, its output lines as they come, the reader thread)."""
    import signal

    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_TEST_")}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), DDGS_DISABLED="1", HARNESS_TEST_DELAY_S="0.05",
               HARNESS_RESULTS_DIR=str(folder / "results"), MLFLOW_TRACKING_URI=f"sqlite:///{folder / 'mlflow.db'}")
    args = SWEEP_ARGS + [f"search.local_corpus=[{corpus(corpus_root)}]"]
    p = subprocess.Popen([sys.executable, str(DRIVER), *args], cwd=folder, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(ln.rstrip("\n") for ln in p.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while not any("trial 2/4 #1 task 1/3" in ln for ln in list(lines)):  # mid-trial #1
        assert p.poll() is None and time.monotonic() < deadline, "\n".join(lines[-40:])
        time.sleep(poll_s)
    return p, lines, reader


def run_cli(folder: Path, kind: str, *, hook: str | None = None, fail_after: str | None = None,
            extra: tuple[str, ...] = (), timeout: float = 400, root: Path = ROOT) -> Run:
    """One CLI invocation in `folder` (its own results/ and mlflow.db); hook arms the kill. root: the source tree
    that runs (another commit's, for a before/after figure; tests/resume_driver.py must be in it)."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_TEST_")}
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=str(root), DDGS_DISABLED="1",
               HARNESS_RESULTS_DIR=str(folder / "results"), MLFLOW_TRACKING_URI=f"sqlite:///{folder / 'mlflow.db'}")
    env.pop("HARNESS_DEBUG", None)
    if hook:
        what, spec = hook.split("=", 1)
        env["HARNESS_TEST_KILL_AT" if what == "RUNS" else "HARNESS_TEST_KILL_IN_TRACES"] = spec
    if fail_after:
        env["HARNESS_TEST_FAIL_AFTER"] = fail_after
    # one corpus beside every run's folder: its path is in the prompts (sources), so runs compared share it
    args = (SWEEP_ARGS if kind == "sweep" else AB_ARGS) + [f"search.local_corpus=[{corpus(folder.parent)}]", *extra]
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, str(root / "tests" / DRIVER.name), *args], cwd=folder, env=env,
                       capture_output=True, text=True, timeout=timeout)
    return Run(p.returncode, p.stdout + p.stderr, time.monotonic() - t0)


def outcome(folder: Path, kind: str = "sweep") -> Outcome:
    results = folder / "results"
    runs = results / "runs.jsonl"
    ids = collections.Counter(json.loads(line)["run_id"] for line in runs.read_text(encoding="utf-8").splitlines()
                              if line.strip()) if runs.exists() else collections.Counter()
    mruns, running = _mlflow(folder / "mlflow.db")
    if kind == "ab":
        ledger = results / "ab" / "prior_knowledge_ab" / "ledger.jsonl"
        cells = collections.Counter((r["task"], r["arm"], r["replication"]) for r in map(json.loads, ledger.read_text(
            encoding="utf-8").splitlines()) if r.get("kind") == "cell")
        return Outcome([], "", ids, mruns, running, 0, cells)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    trials = optuna.load_study(study_name=SWEEP, storage=f"sqlite:///{results / 'optuna.db'}").get_trials()
    # the trials a copy replaced (experiments.storage.requeued, read here so that an older tree's runs read back too)
    gone = {int(n) for t in trials for n in t.system_attrs.get("retry_history", ())}
    values = sorted((int(t.user_attrs.get("slot", t.number)), t.state.name, None if t.value is None else
                     round(t.value, 6)) for t in trials if t.number not in gone)
    promoted = (results / SWEEP / "promoted_synth.yaml").read_text(encoding="utf-8").split("\n", 1)[1]
    return Outcome(values, promoted, ids, mruns, running, len(trials))


def _mlflow(db: Path) -> tuple[collections.Counter, int]:
    if not db.exists():
        return collections.Counter(), 0
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT r.status, "
            "(SELECT value FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = 'kind'), "
            "(SELECT value FROM tags t WHERE t.run_uuid = r.run_uuid AND t.key = 'mlflow.runName') "
            "FROM runs r WHERE r.lifecycle_stage = 'active'").fetchall()
    return collections.Counter((k, n) for _, k, n in rows), sum(s == "RUNNING" for s, _, _ in rows)


def duplicates(counter: collections.Counter) -> list:
    return sorted(k for k, c in counter.items() if c > 1)


def kill_and_resume(folder: Path, moment: str, root: Path = ROOT) -> tuple[Run, Run]:
    """The kill at `moment`, then the same command once more."""
    kind, hook = MOMENTS[moment]
    first = run_cli(folder, kind, hook=hook, root=root)
    second = run_cli(folder, kind, root=root)
    return first, second
