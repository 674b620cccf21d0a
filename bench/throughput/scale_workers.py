"""Workers on one study: wall time of W worker processes against 1 on the same budget (sweep.n_trials), with the
study in PostgreSQL and the runs on an `mlflow server`, both started on loopback (tests/local_services.py), and
the model a stub with a fixed latency per chat request (tests/ollama_stub.py).

    python bench/throughput/scale_workers.py [--trials 9] [--latency-ms 300] [--workers 1 3] [--repeats 2] [--json]

Each worker stands for a machine: its own results folder (LLM cache, contexts, runs.jsonl, ledger) and its own
HARNESS_WORKER_HOST, and backend.concurrency=1, so the speed-up is the workers' alone. Every worker runs the same
command. Per W it prints: wall seconds from the first start to the last exit, trials finished, trials per minute,
the speed-up over W = 1, the chat requests the stub answered (each machine prepares its own task contexts: the
per-machine cache is not shared), and the trials each worker ran.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from local_services import mlflow_server, postgres_cluster, postgres_unavailable  # noqa: E402
from ollama_stub import OllamaStub  # noqa: E402
from test_reliability import MODELS, REPLY, Proc, sweep_cmd  # noqa: E402


def run_once(workers: int, trials: int, latency_s: float, storage: str, mlflow_url: str, tmp: Path, tag: str) -> dict:
    import optuna

    name = f"scale-{tag}"
    corpus = tmp / "corpus"
    corpus.mkdir(exist_ok=True)
    (corpus / "formats.md").write_text("# Data formats\nThe json module parses JSON; csv reads rows; open text files "
                                       "with encoding='utf-8'.\n")
    base_env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT), DDGS_DISABLED="1")
    base_env.pop("MLFLOW_TRACKING_URI", None)
    with OllamaStub(models=MODELS, delay_s=latency_s, default_reply=REPLY) as stub:
        cmd = sweep_cmd(stub.url, f"sweep.n_trials={trials}", "sweep.baseline_repeats=2", "backend.concurrency=1",
                        f"search.local_corpus=[{corpus}]", f"sweep.name={name}", f"sweep.storage={storage}",
                        f"mlflow.tracking_uri={mlflow_url}", "sweep.heartbeat_s=5")
        t0 = time.perf_counter()
        procs = []
        for w in range(workers):
            results = tmp / f"{tag}-machine{w}"
            results.mkdir()
            procs.append(Proc(cmd, {**base_env, "HARNESS_RESULTS_DIR": str(results),
                                    "HARNESS_WORKER_HOST": f"machine{w}"}, results))
        rcs = [p.finish(1800) for p in procs]
        wall = time.perf_counter() - t0
        chats = len(stub.chat_requests())
    if any(rcs):
        raise SystemExit(f"worker exit codes {rcs}:\n" + "\n\n".join(p.text[-3000:] for p in procs))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    done = [t for t in optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
            if t.state.name in ("COMPLETE", "PRUNED", "FAIL")]
    per_worker = collections.Counter(t.user_attrs.get("worker_host") for t in done)
    return {"workers": workers, "wall_s": round(wall, 1), "trials": len(done),
            "trials_per_min": round(60 * len(done) / wall, 2), "chat_requests": chats,
            "per_worker": dict(sorted(per_worker.items()))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=9)
    ap.add_argument("--latency-ms", type=float, default=300)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    why = postgres_unavailable()
    if why:
        raise SystemExit(f"cannot run: {why}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as d:
        tmp = Path(d)
        t0 = time.perf_counter()
        with postgres_cluster() as pg, mlflow_server(pg.url("mlflow"), tmp / "artifacts") as url:
            print(f"services up in {time.perf_counter() - t0:.0f}s: PostgreSQL 127.0.0.1:{pg.port}, MLflow {url}",
                  flush=True)
            for r in range(a.repeats):
                for w in a.workers:
                    row = run_once(w, a.trials, a.latency_ms / 1000, pg.url("optuna"), url, tmp, f"w{w}-r{r}")
                    row["repeat"] = r
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    base = statistics.median(r["wall_s"] for r in rows if r["workers"] == min(a.workers))
    print(f"\nworkers on one study: {a.trials} trials, stub latency {a.latency_ms:.0f} ms per chat request, "
          f"backend.concurrency=1 per worker, PostgreSQL storage + MLflow server")
    print(f"{'workers':>7} {'wall s (median)':>16} {'trials/min':>11} {'speed-up':>9} {'chat requests':>14}  trials by worker")
    for w in a.workers:
        mine = [r for r in rows if r["workers"] == w]
        wall = statistics.median(r["wall_s"] for r in mine)
        print(f"{w:>7} {wall:>16.1f} {statistics.median(r['trials_per_min'] for r in mine):>11.2f} "
              f"{base / wall:>9.2f} {statistics.median(r['chat_requests'] for r in mine):>14.0f}  "
              f"{mine[-1]['per_worker']}")
    if a.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
