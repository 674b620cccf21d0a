"""Several machines on one study, for real: PostgreSQL as the Optuna storage and an `mlflow server` (PostgreSQL
backend store, proxied artifacts) started on loopback, three worker processes running the same command, one
killed with SIGKILL mid-trial.

Each worker stands for a machine: its own results folder (LLM cache, contexts, runs.jsonl, ledger) and its own
HARNESS_WORKER_HOST, so nothing is shared but the database and the tracking server, and the killed worker's trial
can only be found by its missing heartbeat (not by its pid, which only its own host may check). The backend is
tests/ollama_stub.py with a fixed latency. Skips, with the reason, only where PostgreSQL cannot be had.
docs/SCALE.md reports what this measures.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from local_services import PASSWORD, free_port, mlflow_server, postgres_cluster, postgres_unavailable
from ollama_stub import OllamaStub
from test_reliability import MODELS, REPLY, Gate, Proc, env, figures, strict_jsonl, sweep_cmd  # noqa: F401 (env: fixture)

ROOT = Path(__file__).resolve().parents[1]
SWEEP = "synth_mutation"
N_TRIALS, REPEATS, HEARTBEAT_S = 7, 2, 1  # grace period 2 * HEARTBEAT_S


@pytest.fixture(scope="module")
def services(tmp_path_factory):
    why = postgres_unavailable()
    if why:
        pytest.skip(why)
    tmp = tmp_path_factory.mktemp("services")
    with postgres_cluster() as pg, mlflow_server(pg.url("mlflow"), tmp / "artifacts") as url:
        yield {"pg": pg, "storage": pg.url("optuna"), "mlflow": url}


def machine_env(env: dict, results: Path, host: str) -> dict:
    e = dict(env, HARNESS_RESULTS_DIR=str(results), HARNESS_WORKER_HOST=host)
    e.pop("MLFLOW_TRACKING_URI", None)  # the command names the server
    return e


def load_trials(storage: str):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.load_study(study_name=SWEEP, storage=storage).get_trials(deepcopy=False)


@pytest.mark.services
def test_three_machines_one_study_one_killed(services, env, tmp_path):
    storage, mlflow_url = services["storage"], services["mlflow"]
    gate = Gate()
    machines = [tmp_path / f"machine{i}" for i in range(3)]
    # 0.2 s a reply (was 0.02): a search trial lasts long enough to be caught RUNNING when the model is blocked
    with OllamaStub(models=MODELS, default_reply=gate, delay_s=0.2) as stub:
        cmd = sweep_cmd(stub.url, f"sweep.n_trials={N_TRIALS}", f"sweep.baseline_repeats={REPEATS}",
                        f"sweep.heartbeat_s={HEARTBEAT_S}", f"search.local_corpus=[{env['corpus']}]",
                        f"sweep.storage={storage}", f"mlflow.tracking_uri={mlflow_url}",
                        # the default is one holdout run per text (issue 36); repeats here, so that each is shown
                        # to run once across machines
                        "sweep.holdout_baseline_runs=2")
        t0 = time.monotonic()
        procs = []
        for i, results in enumerate(machines):
            results.mkdir()
            procs.append(Proc(cmd, machine_env(env["env"], results, f"machine{i}"), results))
        # once a search trial has finished (the baseline is done) and another is RUNNING in one of our workers,
        # block the model: every worker stalls at its next request, that trial mid-work. (Arming on the first
        # condition alone raced: the three workers could all be in the baseline repeat, which is no trial, or
        # waiting for its lock, and then no trial was RUNNING to kill.)
        pids = {p.p.pid for p in procs}
        deadline = time.monotonic() + 240
        while not (any(re.search(rf"\] trial \d+/{N_TRIALS} #[1-9]\d* .*\b(COMPLETE|PRUNED|FAIL)\b", p.text)
                       for p in procs)
                   and any(t.state.name == "RUNNING" and t.user_attrs.get("worker_pid") in pids
                           for t in load_trials(storage))):
            assert time.monotonic() < deadline and all(p.p.poll() is None for p in procs), \
                "\n\n".join(p.text[-3000:] for p in procs)
            time.sleep(0.1)
        gate.arm(1)
        assert gate.blocked.wait(60), "\n\n".join(p.text[-3000:] for p in procs)
        by_pid = {p.p.pid: p for p in procs}
        victim = None
        for _ in range(100):  # a trial RUNNING in one of our workers: kill that worker mid-trial
            running = [t for t in load_trials(storage) if t.state.name == "RUNNING"
                       and t.user_attrs.get("worker_pid") in by_pid]
            if running:
                victim = running[0]
                break
            time.sleep(0.1)
        assert victim is not None, "no trial RUNNING while the model was blocked" + repr([(t.number, t.state.name) for t in load_trials(storage)]) + "\n\n".join(p.text[-1500:] for p in procs)
        killed_proc = by_pid[victim.user_attrs["worker_pid"]]
        killed_proc.p.send_signal(signal.SIGKILL)
        t_kill = time.time()
        assert killed_proc.finish() == -signal.SIGKILL
        gate.block_at = None
        gate.release.set()
        rcs = {p.p.pid: p.finish(300) for p in procs if p is not killed_proc}
        wall = time.monotonic() - t0
    alive = [p for p in procs if p is not killed_proc]
    assert list(rcs.values()) == [0, 0], "\n\n".join(p.text[-4000:] for p in alive)
    killed, killed_host = victim.number, victim.user_attrs["worker_host"]

    # Optuna: every trial finished; the killed one FAILED by another worker, by heartbeat, and run again once
    trials = load_trials(storage)
    by_number = {t.number: t for t in trials}
    assert sorted(by_number) == list(range(len(trials)))
    assert [t.number for t in trials if t.state.name not in ("COMPLETE", "PRUNED", "FAIL")] == []
    assert by_number[killed].state.name == "FAIL"
    assert [t.number for t in trials if t.state.name == "FAIL"] == [killed]
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == killed]
    assert len(retries) == 1 and retries[0].state.name in ("COMPLETE", "PRUNED")
    retry = retries[0]
    assert retry.params == victim.params  # the same operator asked for again
    assert retry.user_attrs["worker_host"] != killed_host
    reaper = [p for p in alive if f"failed 1 trial(s) of a dead worker and queued each again: #{killed} " in p.text]
    assert len(reaper) == 1, "\n\n".join(p.text[-3000:] for p in alive)
    assert f"no heartbeat from {killed_host} pid {killed_proc.p.pid} within the grace period" in reaper[0].text
    failed_after_s = by_number[killed].datetime_complete.timestamp() - t_kill
    assert failed_after_s < 60  # grace 2 s, then the next time a live worker asks
    # each worker checks the count before it asks: the total may overshoot n_trials by one per live worker
    assert N_TRIALS <= len(trials) <= N_TRIALS + 2
    assert sum(t.user_attrs.get("operator") == "baseline" for t in trials) == 1

    # once per study across machines: the baseline repeats and each holdout confirmation
    import optuna

    study = optuna.load_study(study_name=SWEEP, storage=storage)
    assert sorted(study.user_attrs["baseline_runs"]) == [str(k) for k in range(1, REPEATS)]  # seeds 0+k
    holdout_keys = sorted(study.user_attrs["holdout"])
    assert holdout_keys
    # every holdout run of each text (its first, then the repeats by seed: sweep.holdout_*_runs), each once
    repeats_of = study.user_attrs.get("holdout_repeats", {})
    holdout_runs = sorted(k for k in holdout_keys for _ in range(1 + len(repeats_of.get(k, {}))))
    assert len(holdout_runs) > len(holdout_keys)
    all_runs = [r for m in machines if (m / "runs.jsonl").exists() for r in strict_jsonl(m / "runs.jsonl")]
    ids = collections.Counter(r["run_id"] for r in all_runs)
    assert [i for i, c in ids.items() if c > 1] == []  # no trial task, repeat or holdout task ran twice anywhere
    assert sum(f"-t{killed}-" in i for i in ids) < 3  # the killed trial's tasks (3 train) never all ran
    assert sum(f"-t{retry.number}-" in i for i in ids) >= 1

    # per-machine caches stayed on their machine: each has its own LLM cache and task contexts
    assert all((m / "llm_cache.sqlite").exists() and (m / SWEEP / "context").is_dir() for m in machines)

    # each live machine's ledger: one row per trial (all of them, synced at its end), the killed one a crash
    finished = sorted(t.number for t in trials)
    for m, p in zip(machines, procs):
        if p is killed_proc:
            continue
        ledger = strict_jsonl(m / SWEEP / "ledger.jsonl")
        rows = [r["trial"] for r in ledger]
        assert len(rows) == len(set(rows))
        assert set(rows) <= set(finished)
        assert next(r for r in ledger if r["trial"] == killed)["status"] == "crash"
        for r in ledger:
            assert r["state"] == by_number[r["trial"]].state.name
    union = {r["trial"] for m, p in zip(machines, procs) if p is not killed_proc
             for r in strict_jsonl(m / SWEEP / "ledger.jsonl")}
    assert sorted(union) == finished

    # MLflow (the server): one parent, one FINISHED/KILLED/FAILED run per Optuna trial, nothing left RUNNING
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_url)
    exp = client.get_experiment_by_name(SWEEP)
    assert not exp.artifact_location.startswith("file:")  # the server's artifact store, not one machine's disk
    runs = client.search_runs([exp.experiment_id], max_results=10000)
    parents = [r for r in runs if r.data.tags.get("sweep_parent") == "true"]
    trial_runs = [r for r in runs if r.data.tags.get("kind") == "trial"]
    assert len(parents) == 1
    assert collections.Counter(int(r.data.tags["trial_number"]) for r in trial_runs) == collections.Counter(finished)
    assert [r.info.run_name for r in runs if r.info.status == "RUNNING"] == []
    killed_run = next(r for r in trial_runs if int(r.data.tags["trial_number"]) == killed)
    assert killed_run.info.status == "FAILED" and "no heartbeat" in killed_run.data.tags["fail_reason"]
    for r in trial_runs:
        want = {"COMPLETE": "FINISHED", "PRUNED": "FINISHED", "FAIL": "FAILED"}[by_number[int(r.data.tags["trial_number"])].state.name]
        assert r.info.status == want
    repeats = [r for r in runs if r.data.tags.get("kind") == "baseline_repeat"]
    holdouts = [r for r in runs if r.data.tags.get("kind") == "holdout"]
    assert len(repeats) == REPEATS - 1
    assert sorted(r.data.tags["instruction_hash"] for r in holdouts) == holdout_runs
    artifacts = client.list_artifacts(parents[0].info.run_id, "config")
    assert [a.path for a in artifacts] == ["config/resolved_config.json"]

    # the database password never shows: not in any output, not in the MLflow params or the logged config
    assert not [p.p.pid for p in procs if PASSWORD in p.text]
    assert PASSWORD not in json.dumps(parents[0].data.params)
    cfg_text = (Path(client.download_artifacts(parents[0].info.run_id, "config/resolved_config.json", str(tmp_path))))
    assert PASSWORD not in cfg_text.read_text() and "postgres:***@" in cfg_text.read_text()

    by_worker = collections.Counter(t.user_attrs.get("worker_host") for t in trials)
    figures("services", trials=len(trials), complete=sum(t.state.name == "COMPLETE" for t in trials),
            pruned=sum(t.state.name == "PRUNED" for t in trials), failed=1, killed_trial=killed,
            retried_as=retry.number, failed_after_kill_s=round(failed_after_s, 1), by_worker=dict(by_worker),
            ledger_rows_union=len(union), mlflow_trial_runs=len(trial_runs), mlflow_repeat_runs=len(repeats),
            mlflow_holdout_runs=len(holdouts), runs_jsonl=len(all_runs), wall_s=round(wall, 1))


# -- refusals before any trial: a missing driver, a database or server that does not answer ----------------------


@pytest.mark.parametrize("override, fragment", [
    (f"sweep.storage=postgresql://u:{PASSWORD}@127.0.0.1:{{port}}/optuna",
     "sweep.storage=postgresql://u:***@127.0.0.1:{port}/optuna: the database does not answer ("),
    (f"sweep.storage=postgresql+pg8000://u:{PASSWORD}@127.0.0.1:{{port}}/optuna",
     "sweep.storage=postgresql+pg8000://u:***@127.0.0.1:{port}/optuna: the database driver is not installed (pg8000); "
     "pip install pg8000"),
    ("mlflow.tracking_uri=http://127.0.0.1:{port}",
     "mlflow.tracking_uri=http://127.0.0.1:{port}: the MLflow server does not answer ("),
])
def test_unusable_store_is_one_line_before_anything_runs(env, tmp_path, override, fragment):
    port = free_port()  # nothing listens there
    with OllamaStub(models=MODELS, default_reply=REPLY) as stub:
        p = subprocess.run(sweep_cmd(stub.url, "sweep.n_trials=3", override.format(port=port)),
                           env={**env["env"], "HARNESS_DEBUG": ""}, cwd=tmp_path, capture_output=True, text=True,
                           timeout=180)
        chats = len(stub.chat_requests())
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stdout[-2000:] + p.stderr[-2000:]
    assert len(err) == 1 and err[0].startswith("config error: " + fragment.format(port=port)), p.stderr
    assert PASSWORD not in p.stdout + p.stderr
    assert chats == 0  # not one model call, and no study, ledger or run written
    written = sorted(str(f.relative_to(env["results"])) for f in env["results"].rglob("*") if f.is_file())
    assert all(f.startswith("hydra/") for f in written), written  # only Hydra's job folder
    assert not (tmp_path / "mlflow.db").exists()


def test_mask_url_hides_only_the_password():
    from experiments.storage import mask_secrets, mask_url

    cases = [
        ("postgresql://alice:pw@db:5432/optuna", "postgresql://alice:***@db:5432/optuna"),
        ("postgresql+psycopg2://alice:p%40ss@db/optuna", "postgresql+psycopg2://alice:***@db/optuna"),
        ("mysql://root@db/optuna", "mysql://root@db/optuna"),
        ("sqlite:////tmp/results/optuna.db", "sqlite:////tmp/results/optuna.db"),
        ("http://u:tok@mlflow:5000", "http://u:***@mlflow:5000"),
    ]
    assert [mask_url(u) for u, _ in cases] == [w for _, w in cases]
    assert mask_secrets('{"storage": "postgresql://a:b@h/d", "x": 1}') == '{"storage": "postgresql://a:***@h/d", "x": 1}'


@pytest.mark.services
def test_shared_lock_excludes_across_processes(services, tmp_path):
    """The study's advisory lock: a second process waits while the first holds it, and gets it when the holder
    dies (SIGKILL closes its connection)."""
    storage = services["storage"]
    code = ("import sys, time; from experiments.storage import shared_lock\n"
            "with shared_lock(sys.argv[1], 'test/lock'):\n    print('held', flush=True); time.sleep(60)\n")
    e = dict(os.environ, PYTHONPATH=str(ROOT))
    holder = subprocess.Popen([sys.executable, "-c", code, storage], env=e, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    from experiments.storage import shared_lock

    t0 = time.monotonic()
    try:
        killer = __import__("threading").Timer(1.5, holder.kill)
        killer.start()
        with shared_lock(storage, "test/lock"):
            waited = time.monotonic() - t0
        with shared_lock(storage, "test/other"):  # another name is not held by anyone
            pass
    finally:
        holder.kill()
        holder.wait()
    assert 1.0 < waited < 30
