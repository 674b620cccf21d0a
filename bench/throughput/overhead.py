"""Harness overhead against a backend of fixed latency, and process start-up time of the two CLIs.

    python bench/throughput/overhead.py [--quick] [--latency-ms 50 500] [--runs 9] [--startup-runs 9] [--json]

Overhead: full harness runs (plan, research on the local corpus, synthesis, wiggum, memory store, run record and
trace) against bench.throughput.sim_llm.SimLLM, which sleeps a fixed latency per call and answers every request with
a reply of the right shape. Overhead of a run = its wall time minus the wall time spent inside backend calls; it is
reported as milliseconds per run and as a fraction of the run's wall time. Two paths:
  cli      harness.orchestrator.run_task, as `python -m harness` runs a task (a new Harness per run, so the
           memory store is reopened; routing through the orchestrator)
  reused   one Harness.run after another, as experiments drive it (memory and search opened once)
Each run gets a new task text (three task shapes, numbered), so the response cache (on, as by default) misses
and every call reaches the backend. The first run of a fresh results dir (search index and memory built) is
reported apart as "cold". A zero-latency pass then shows where the harness's own time goes, per stage.

Start-up: median wall time of `python -m harness --help` and `python -m experiments.run --help` over several
runs, `python -c pass` for the interpreter's share, and which heavy packages (mlflow, chromadb, optuna,
torch, scipy, numpy, xllamacpp) the --help path imports (from -X importtime).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.throughput.sim_llm import SimLLM  # noqa: E402

TASKS = (
    "List 5 best practices for Python asyncio and save to output.md",
    "Give best practices for reading and writing text files in Python",
    "Explain what the Python global interpreter lock is",
)
HEAVY = ("mlflow", "chromadb", "optuna", "torch", "scipy", "numpy", "xllamacpp", "pandas", "sklearn")


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), "?") if Path("/proc/cpuinfo").exists() else "?"
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return f"{os.cpu_count()} cores ({cpu}), Python {sys.version.split()[0]}, load average {load}"


def _config(results: Path):
    from harness.config import BackendConfig, HarnessConfig, OrchestratorConfig, SearchConfig

    return HarnessConfig(results_dir=str(results), backend=BackendConfig(kind="sim", cache=True),
                         search=SearchConfig(provider="local"), orchestrator=OrchestratorConfig(mode="auto"))


def _roles(sim: SimLLM, results: Path):
    from harness.config import ROLES
    from harness.inference import ResponseCache, wrap_roles

    return wrap_roles({r: sim for r in ROLES}, ResponseCache(results / "llm_cache.sqlite"))


def measure_runs(latency_s: float, runs: int, path: str, base: Path) -> dict:
    """Cold run + `runs` warm runs on one fresh results dir; per-run wall, backend time, calls, stages."""
    from harness.agent import Harness
    from evaluators import HARNESS_EVALUATOR
    from harness.orchestrator import run_task

    results = Path(tempfile.mkdtemp(prefix=f"ovh-{path}-", dir=base))
    sim = SimLLM(latency_s)
    cfg, roles = _config(results), _roles(sim, results)
    harness = Harness(cfg, roles, evaluator=HARNESS_EVALUATOR)
    rows = []
    for i in range(runs + 1):
        task = f"{TASKS[i % len(TASKS)]} (run {i})"
        sim.reset()
        t0 = time.perf_counter()
        result = run_task(task, cfg, roles, evaluator=HARNESS_EVALUATOR) if path == "cli" else harness.run(task)
        wall = time.perf_counter() - t0
        if result.status != "ok":
            raise RuntimeError(f"run {i} failed: {result.error}")
        rows.append({"wall": wall, "busy": sim.busy_s, "calls": sim.calls, "stages": dict(result.record["stage_s"]),
                     "cache": dict(result.record["cache"])})
    cold, warm = rows[0], rows[1:]
    over = [r["wall"] - r["busy"] for r in warm]
    frac = [(r["wall"] - r["busy"]) / r["wall"] for r in warm]
    return {
        "path": path, "latency_ms": latency_s * 1e3, "runs": len(warm),
        "calls": statistics.median(r["calls"] for r in warm),
        "wall_s": statistics.median(r["wall"] for r in warm),
        "backend_s": statistics.median(r["busy"] for r in warm),
        "overhead_ms": 1e3 * statistics.median(over),
        "overhead_ms_max": 1e3 * max(over),
        "fraction_pct": 100 * statistics.median(frac),
        "fraction_pooled_pct": 100 * sum(over) / sum(r["wall"] for r in warm),
        "per_call_ms": 1e3 * sum(over) / sum(r["calls"] for r in warm),
        "cold_overhead_ms": 1e3 * (cold["wall"] - cold["busy"]),
        "stages": {k: statistics.median(r["stages"].get(k, 0.0) for r in warm) for k in warm[0]["stages"]},
    }


def startup(runs: int) -> list[dict]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    out = []
    for label, args in (("python -c pass", ["-c", "pass"]), ("python -m harness --help", ["-m", "harness", "--help"]),
                        ("python -m experiments.run --help", ["-m", "experiments.run", "--help"])):
        cmd = [sys.executable, *args]
        subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=True)  # warm the page cache
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, check=True)
            times.append(time.perf_counter() - t0)
        trace = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=ROOT, env=env, capture_output=True,
                               text=True).stderr
        top = {line.rsplit("|", 1)[1].strip() for line in trace.splitlines() if line.startswith("import time:")}
        out.append({"command": label, "median_s": statistics.median(times), "min_s": min(times),
                    "max_s": max(times), "runs": runs, "heavy": sorted(m for m in HEAVY if m in top)})
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 runs per row, one latency (50 ms), 3 start-ups")
    ap.add_argument("--latency-ms", type=float, nargs="+", default=[50.0, 500.0])
    ap.add_argument("--runs", type=int, default=9, help="warm runs per row (after one cold run)")
    ap.add_argument("--startup-runs", type=int, default=9)
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    args = ap.parse_args(argv)
    if args.quick:
        args.latency_ms, args.runs, args.startup_runs = [50.0], 3, 3
    os.environ.setdefault("DDGS_DISABLED", "1")
    import logging

    logging.disable(logging.WARNING)  # the harness logs fallbacks the simulated replies may trigger
    base = Path(tempfile.mkdtemp(prefix="bench-overhead-"))
    os.environ["HARNESS_RESULTS_DIR"] = str(base)

    print("== harness overhead (simulated backend, fixed latency per call) ==")
    print(f"machine: {machine()}")
    rows = [measure_runs(ms / 1e3, args.runs, path, base) for ms in args.latency_ms for path in ("cli", "reused")]
    print(f"{'path':7s} {'latency':>8s} {'runs':>4s} {'calls':>5s} {'wall s':>7s} {'backend s':>9s} "
          f"{'overhead ms':>11s} {'max ms':>7s} {'overhead %':>10s} {'ms/call':>7s} {'cold ms':>8s}")
    for r in rows:
        print(f"{r['path']:7s} {r['latency_ms']:6.0f}ms {r['runs']:4d} {r['calls']:5.0f} {r['wall_s']:7.3f} "
              f"{r['backend_s']:9.3f} {r['overhead_ms']:11.1f} {r['overhead_ms_max']:7.1f} {r['fraction_pct']:9.2f}% "
              f"{r['per_call_ms']:7.2f} {r['cold_overhead_ms']:8.0f}")
    print("overhead % = (wall - backend) / wall, median over runs. Goal < 2%: "
          + ", ".join(f"{r['path']}@{r['latency_ms']:.0f}ms {'met' if r['fraction_pct'] < 2 else 'NOT met'}" for r in rows))
    for path in ("cli", "reused"):
        worst = max(r["overhead_ms"] for r in rows if r["path"] == path)
        calls = statistics.median(r["calls"] for r in rows if r["path"] == path)
        # overhead / (overhead + calls * latency) < 2%  <=>  latency > 49 * overhead / calls
        print(f"break-even {path}: {worst:.0f} ms overhead per run over ~{calls:.0f} calls is < 2% once a call "
              f"takes > {49 * worst / calls:.0f} ms")

    zero = measure_runs(0.0, args.runs, "reused", base)
    print(f"where the harness's own time goes (latency 0, reused path, median of {zero['runs']} runs; "
          f"includes the simulator's reply building, {zero['backend_s'] * 1e3:.1f} ms):")
    for stage, s in sorted(zero["stages"].items(), key=lambda kv: -kv[1]):
        if s >= 0.0005:
            print(f"  {stage:20s} {s * 1e3:7.1f} ms")
    print(f"  {'total wall':20s} {zero['wall_s'] * 1e3:7.1f} ms ({zero['calls']:.0f} calls)")

    print("== process start-up ==")
    ups = startup(args.startup_runs)
    for u in ups:
        print(f"{u['command']:34s} median {u['median_s']:.3f}s (min {u['min_s']:.3f}, max {u['max_s']:.3f}, "
              f"{u['runs']} runs)  heavy imports: {', '.join(u['heavy']) or 'none'}")
    figures = {"overhead": rows, "zero_latency": zero, "startup": ups, "machine": machine()}
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
