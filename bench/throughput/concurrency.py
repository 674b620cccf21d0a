"""Concurrency: a compound task's steps run in parallel (orchestrator.max_parallel) against a backend that
serves C requests at once with a fixed latency; throughput against the number of parallel steps N.

    python bench/throughput/concurrency.py [--quick] [--steps 8] [--latency-ms 100] [--capacity 4 0] [--repeats 2] [--json]

The sweep has no option to run trials in parallel (its loop asks, evaluates and tells one trial at a time), so this
measures the project's real parallel path: harness.orchestrator._run.Orchestrator, which runs the steps of one level
of the step graph in a thread pool of orchestrator.max_parallel workers, each step a full single-focus run (plan,
research, synthesis, one wiggum round, memory store) sharing the backend, memory and search. The simulated server
(bench.throughput.sim_llm.SimLLM) answers the step graph with `--steps` independent steps, holds each call for the
latency, and has C slots (capacity 0 = unbounded); further calls wait for a slot. Its step questions name the task's
two topics in turn (asyncio error handling; comparing with threads), as the harness asks of a planned graph: one
that leaves out a topic the task names falls back to the steps read off the task text (2 here). A run whose graph is
not the planned `--steps` steps, or that logged a graph warning, stops the bench.

Reported per (C, N): wall seconds of the steps phase (from the run record), steps per second, speedup over
N = 1, efficiency (speedup / min(N, C)), the most calls the server saw in flight at once, and failed steps.
The response cache is off so every call reaches the server.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.throughput.sim_llm import SimLLM  # noqa: E402

TASK = "Research asyncio error handling, compare it with threads, then write a unified guide"
TOPICS = ("asyncio.gather", "asyncio.TaskGroup", "asyncio.timeout", "asyncio.Queue", "asyncio.Semaphore",
          "threading.Lock", "concurrent.futures", "contextvars", "the GIL", "multiprocessing.Pool")


class StepSim(SimLLM):
    """SimLLM whose step graph covers TASK's topics (harness.orchestrator._routing.research_topics: 'asyncio error handling',
    'compare it with threads'): step i researches the first with one of TOPICS, or compares one with threads,
    alternately, so any 2+ steps cover both."""

    def _shape(self, kind: str, obj: dict, task: str, rng) -> None:
        super()._shape(kind, obj, task, rng)
        if kind == "step_graph":
            for i, step in enumerate(obj["tasks"], 1):
                topic = TOPICS[(i - 1) % len(TOPICS)]
                step["question"] = (f"Research asyncio error handling with {topic} (part {i})" if i % 2 else
                                    f"Compare {topic} with threads (part {i})")


def run_once(n: int, capacity: int, steps: int, latency_s: float, results: Path) -> dict:
    from harness.config import ROLES, BackendConfig, HarnessConfig, OrchestratorConfig, SearchConfig
    from harness.inference import wrap_roles
    from evaluators import HARNESS_EVALUATOR
    from harness.orchestrator import run_task

    warm = results.parent / "warm" / "search_index"
    if warm.is_dir() and not (results / "search_index").exists():  # the local-corpus index, built once
        shutil.copytree(warm, results / "search_index")
    sim = StepSim(latency_s, capacity=capacity or None, steps=steps)
    cfg = HarnessConfig(results_dir=str(results), backend=BackendConfig(kind="sim", cache=False),
                        search=SearchConfig(provider="local"),
                        orchestrator=OrchestratorConfig(mode="always", max_parallel=n, max_steps=steps))
    t0 = time.perf_counter()
    result = run_task(TASK, cfg, wrap_roles({r: sim for r in ROLES}), evaluator=HARNESS_EVALUATOR)
    wall = time.perf_counter() - t0
    rec = result.record
    par = rec.get("parallel") or {}
    run_steps = rec.get("steps") or []
    warnings = rec.get("graph_warnings") or []
    if result.status != "ok" or len(run_steps) != steps or warnings:
        raise RuntimeError(f"N={n} C={capacity}: status {result.status} ({result.error}); {len(run_steps)} of "
                           f"{steps} steps; graph warnings {warnings}")
    return {"steps_wall_s": float(par["steps_wall_s"]), "steps_sum_s": float(par["steps_sum_s"]),
            "failed": sum(s["status"] != "ok" for s in run_steps), "max_in_flight": sim.max_in_flight,
            "calls": sim.calls, "run_wall_s": wall,
            "step_calls": statistics.mean(s["llm_calls"] for s in run_steps)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="50 ms latency, capacity 4 only, one repeat")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--latency-ms", type=float, default=100.0)
    ap.add_argument("--capacity", type=int, nargs="+", default=[4, 0], help="server slots; 0 = unbounded")
    ap.add_argument("--parallel", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--repeats", type=int, default=2, help="runs per cell; the median steps-phase wall is used")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.latency_ms, args.capacity, args.repeats = 50.0, [4], 1
    os.environ["DDGS_DISABLED"] = "1"
    logging.disable(logging.WARNING)
    base = Path(tempfile.mkdtemp(prefix="bench-conc-"))
    os.environ["HARNESS_RESULTS_DIR"] = str(base)
    latency = args.latency_ms / 1e3
    run_once(1, 0, 2, 0.0, base / "warm")  # imports and the search index (copied into each cell), not measured

    print("== concurrency: orchestrator steps in parallel against a C-slot server ==")
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"{args.steps} independent steps per run, latency {args.latency_ms:.0f} ms per call, "
          f"{args.repeats} run(s) per cell")
    print(f"{'C':>4s} {'N':>3s} {'steps wall s':>12s} {'steps/s':>8s} {'speedup':>8s} {'ideal':>6s} "
          f"{'efficiency':>10s} {'in flight':>9s} {'calls/step':>10s} {'failed':>6s}")
    rows = []
    for cap in args.capacity:
        first = None
        for n in args.parallel:
            runs = [run_once(n, cap, args.steps, latency, base / f"c{cap}-n{n}-r{i}") for i in range(args.repeats)]
            wall = statistics.median(r["steps_wall_s"] for r in runs)
            first = first or wall
            ideal = min(n, cap) if cap else n
            row = {"capacity": cap, "parallel": n, "steps_wall_s": wall, "steps_per_s": args.steps / wall,
                   "speedup": first / wall, "ideal": ideal, "efficiency": first / wall / ideal,
                   "max_in_flight": max(r["max_in_flight"] for r in runs),
                   "calls_per_step": statistics.mean(r["step_calls"] for r in runs),
                   "failed": sum(r["failed"] for r in runs)}
            rows.append(row)
            print(f"{cap or 'inf':>4} {n:3d} {wall:12.2f} {row['steps_per_s']:8.2f} {row['speedup']:7.2f}x "
                  f"{ideal:5d}x {row['efficiency']:9.0%} {row['max_in_flight']:9d} {row['calls_per_step']:10.1f} "
                  f"{row['failed']:6d}")
    print("speedup = steps wall at N=1 / steps wall at N; ideal = min(N, C); efficiency = speedup / ideal. "
          "Goal: near-linear until the server saturates (efficiency near 100% up to N = C, flat after).")
    shutil.rmtree(base, ignore_errors=True)  # ~90 MB of run records, memory and search indexes per full run
    figures = {"rows": rows, "steps": args.steps, "latency_ms": args.latency_ms}
    if args.json:
        print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
