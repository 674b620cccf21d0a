"""The store cases (ids 41.5-41.10, 41.16, held-*): the sweep command against the Ollama stand-in when a store is
full, locked, cut or removed. The machinery is tests/store_faults.py, shared with tests/test_issue41_stores.py."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import store_faults as sf
from ollama_stub import free_port

from . import Case, Outcome


def _line(ran: sf.Ran) -> str:
    return f"exit {ran.rc} in {ran.secs:.0f} s: {ran.one_line() or ran.out.strip().splitlines()[-1:]}"


def full_disk(tmp: Path) -> Outcome:
    big = sf.corpus(tmp / "corpus", mb=2.5)
    with sf.small_disk(tmp / "disk", 1.5) as (disk, limit), sf.stub() as s:
        results = disk / "r"
        cmd = sf.sweep_cmd(s.url, results, big, "sweep.n_trials=2", "mlflow.enabled=false")
        full = sf.run(cmd, size_limit=limit)
        cached = len(list((results / sf.SWEEP / "context").glob("*.json")))
        sf.grow(disk, 64)
        again = sf.run(cmd)
        states = [t.state.name for t in sf.study_trials(results)] if again.rc == 0 else []
    line = full.one_line() or ""
    ok = (full.rc == 1 and "disk full" in line and "free space, then run the same command again" in line
          and cached == 0 and again.rc == 0 and "contexts 0 reused, 5 computed" in again.out
          and states == ["COMPLETE", "COMPLETE"])
    return Outcome(ok, f"{_line(full)}; contexts cached {cached}; after space freed exit {again.rc}, trials {states}")


def running_runs(tmp: Path) -> Outcome:
    docs, results = sf.corpus(tmp / "corpus"), tmp / "r"
    with sf.stub() as s:
        first = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=2"))
        if first.rc != 0:
            return Outcome(False, f"first run {_line(first)}")
        trial = next(r for r in sf.mlflow_runs(results) if r.data.tags.get("trial_number") == "1")
        sf.set_run_status(results, trial.info.run_id, "RUNNING")
        again = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=3"))
    running = [r.data.tags.get("mlflow.runName") for r in sf.mlflow_runs(results) if r.info.status == "RUNNING"]
    return Outcome(again.rc == 0 and not running, f"resume exit {again.rc}; runs still RUNNING: {running or 'none'}")


def cut_creation(tmp: Path) -> Outcome:
    docs, results = sf.corpus(tmp / "corpus"), tmp / "r"
    with sf.stub() as s:
        cut = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=1"), size_limit=3_000_000)
        left = (results / "mlflow.db").exists()
        again = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=1"))
    line = cut.one_line() or ""
    ok = cut.rc == 1 and "mlflow.db" in line and not left and again.rc == 0
    return Outcome(ok, f"under ulimit -f: {_line(cut)}; mlflow.db left: {left}; without the limit: exit {again.rc}")


def half_created(tmp: Path) -> Outcome:
    docs, results = sf.corpus(tmp / "corpus"), tmp / "r"
    results.mkdir()
    sf.half_created_mlflow(results / "mlflow.db")
    with sf.stub() as s:
        ran = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=1"))
    line = ran.one_line() or ""
    return Outcome(ran.rc == 1 and "half-created" in line and "move it aside" in line, _line(ran))


def results_removed(tmp: Path) -> Outcome:
    docs, results, gate = sf.corpus(tmp / "corpus"), tmp / "r", sf.Gate()
    with sf.stub(reply=gate) as s:
        ran = sf.mid_trial(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=3"), gate, lambda: sf.remove_tree(results))
    line = ran.one_line() or ""
    ok = ran.rc == 1 and "vanished" in line and "no such table" not in ran.out and " FAIL " not in ran.out
    return Outcome(ok, _line(ran))


def ledger_moved_study(tmp: Path) -> Outcome:
    docs, results = sf.corpus(tmp / "corpus"), tmp / "r"
    ledger = results / sf.SWEEP / "ledger.jsonl"
    with sf.stub() as s:
        first = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=3"))
        shutil.move(results / "optuna.db", tmp / "optuna.db.old")
        for suffix in ("-wal", "-shm"):
            (results / f"optuna.db{suffix}").unlink(missing_ok=True)
        again = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=2"))
    rows = [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []
    trials = [(t.number, t.state.name) for t in sf.study_trials(results)]
    got = [(r["trial"], r["state"]) for r in rows]
    ok = first.rc == 0 and again.rc == 0 and got == trials
    return Outcome(ok, f"ledger rows {got} for study trials {trials}; old rows in "
                       f"{[p.name for p in ledger.parent.glob('ledger.*.jsonl')]}")


def locked(name: str):
    def case(tmp: Path) -> Outcome:
        docs, results = sf.corpus(tmp / "corpus"), tmp / "r"
        with sf.stub() as s:
            first = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=1"))
            if first.rc != 0:
                return Outcome(False, f"first run {_line(first)}")
            with sf.held_lock(results / name):
                ran = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=2"),
                             environ=sf.env(HARNESS_LOCK_WAIT_S="2"))
        line = ran.one_line() or ""
        ok = ran.rc == 1 and f"{name} is locked by another process" in line and "let it finish or stop it" in line
        return Outcome(ok, f"HARNESS_LOCK_WAIT_S=2: {_line(ran)}")
    return case


def immutable(tmp: Path) -> Outcome:
    ran, how = sf.immutable_mid_trial(tmp / "r", sf.corpus(tmp / "corpus"))
    ok = ran.rc == 1 and ran.one_line() is not None and "Bus error" not in ran.out
    return Outcome(ok, f"{how}: {_line(ran)}")


# -- held cases -------------------------------------------------------------------------------------------------


def two_sweeps_at_once(tmp: Path) -> Outcome:
    docs, results = sf.corpus(tmp / "corpus"), tmp / "r"
    with sf.stub() as s:
        cmd = sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=4")
        procs = [subprocess.Popen(cmd, env=sf.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for _ in range(2)]
        outs = [p.communicate(timeout=300)[0] for p in procs]
    rcs = [p.returncode for p in procs]
    trials = sf.study_trials(results)
    baselines = [t.number for t in trials if t.user_attrs.get("operator") == "baseline"]
    parents = [r for r in sf.mlflow_runs(results) if r.data.tags.get("sweep_parent") == "true"]
    ok = rcs == [0, 0] and len(baselines) == 1 and len(parents) == 1 and all("Traceback" not in o for o in outs)
    return Outcome(ok, f"exits {rcs}; {len(trials)} trials, baseline trials {baselines}, MLflow parents {len(parents)}")


def _kill_at(tmp: Path, pattern: str) -> Outcome:
    """kill -9 the sweep when a line matching pattern appears, then the same command: it ends as a clean run does."""
    import re

    docs, results = sf.corpus(tmp / "corpus"), tmp / "r"
    with sf.stub() as s:
        cmd = sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=3")
        p = subprocess.Popen(cmd, env=sf.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        killed = False
        for line in p.stdout:
            if re.search(pattern, line):
                p.send_signal(signal.SIGKILL)
                killed = True
                break
        p.wait(60)
        again = sf.run(cmd)
        clean = sf.run(sf.sweep_cmd(s.url, tmp / "clean", docs, "sweep.n_trials=3"))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{results / 'mlflow.db'}")
    versions = {pr.name: sorted(v.template for v in client.search_prompt_versions(pr.name))
                for pr in client.search_prompts(filter_string="name LIKE '%-synth-%'")}
    dup = {n: len(v) - len(set(v)) for n, v in versions.items() if len(v) != len(set(v))}
    promoted = [ln for ln in again.out.splitlines() if ln.startswith("PROMOTED")]
    clean_promoted = [ln for ln in clean.out.splitlines() if ln.startswith("PROMOTED")]
    ok = killed and again.rc == 0 and not dup and promoted == clean_promoted
    return Outcome(ok, f"killed: {killed}; resume exit {again.rc}; duplicate prompt versions {dup or 'none'}; "
                       f"{promoted} (clean run: {clean_promoted})")


def kill_registration(tmp: Path) -> Outcome:
    return _kill_at(tmp, r"context 5/5")  # registration of the baseline texts follows the contexts at once


def kill_promotion(tmp: Path) -> Outcome:
    return _kill_at(tmp, r"holdout")  # the conclusion: holdout runs, then promotion and the registry's aliases


def mlflow_ui_polled(tmp: Path) -> Outcome:
    docs, results = sf.corpus(tmp / "corpus"), tmp / "r"
    results.mkdir()
    port = free_port()
    ui = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri",
                           f"sqlite:///{results / 'mlflow.db'}", "--port", str(port), "--workers", "1"],
                          env=sf.env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    polls, bad, stop = [0], [], threading.Event()

    def poll() -> None:
        while not stop.is_set():
            try:
                req = urllib.request.Request(f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search",
                                             data=b'{"max_results": 10}', headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=10) as resp:
                    polls[0] += 1
                    if resp.status != 200:
                        bad.append(resp.status)
            except OSError as exc:  # not up yet, or refused: counted only once it served
                if polls[0]:
                    bad.append(str(exc)[:80])
            time.sleep(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    try:
        poller.start()
        with sf.stub() as s:
            ran = sf.run(sf.sweep_cmd(s.url, results, docs, "sweep.n_trials=3"))
    finally:
        stop.set()
        poller.join(15)
        ui.terminate()
        ui.wait(30)
    return Outcome(ran.rc == 0 and polls[0] > 0 and not bad,
                   f"sweep exit {ran.rc}; UI answered {polls[0]} polls, {len(bad)} failed {bad[:2]}")


CASES = [
    Case("41.5-disk-full", "results_dir on a small file system that fills", "one line naming the file, 'free space, "
         "then run the same command again'; nothing cached; the rerun computes every context", full_disk),
    Case("41.6-running-run", "a trial run left RUNNING, then a resume", "no run RUNNING after the resume", running_runs),
    Case("41.7-cut-creation", "ulimit -f 3000 while the MLflow store is created", "one line; no mlflow.db left; the "
         "next run works", cut_creation),
    Case("41.7-half-created", "an mlflow.db half-created by an older run", "one line naming it, 'move it aside'",
         half_created),
    Case("41.8-rm-rf", "rm -rf results_dir during trial #1", "one line: the results folder vanished; no trial FAIL",
         results_removed),
    Case("41.9-ledger", "optuna.db moved aside, then the same command", "the ledger holds the new study's trials only",
         ledger_moved_study),
    Case("41.10-locked-optuna", "another process holds BEGIN EXCLUSIVE on optuna.db", "one line naming the file and "
         "the holder", locked("optuna.db")),
    Case("41.10-locked-mlflow", "another process holds BEGIN EXCLUSIVE on mlflow.db", "one line naming the file and "
         "the holder", locked("mlflow.db")),
    Case("41.16-immutable", "results_dir made immutable mid-trial", "exit 1 with one line, no Bus error", immutable),
    Case("held-two-sweeps", "two identical sweeps at once", "both exit 0; one baseline, one MLflow parent",
         two_sweeps_at_once),
    Case("held-kill9-registration", "kill -9 as the baseline texts are registered, then resume", "exit 0; no "
         "duplicate prompt version; the clean run's verdict", kill_registration),
    Case("held-kill9-promotion", "kill -9 at the holdout and promotion, then resume", "exit 0; no duplicate prompt "
         "version; the clean run's verdict", kill_promotion),
    Case("held-mlflow-ui", "`mlflow ui` polled during a sweep", "the sweep exits 0; every poll answered",
         mlflow_ui_polled),
]
