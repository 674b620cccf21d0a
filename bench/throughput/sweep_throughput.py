"""Sweep throughput: the tasks of one trial run N at once (experiments.runs.RunPool) against a backend that
serves C requests at once with a fixed latency; trial wall time, backend utilisation and speed-up against N.

    python bench/throughput/sweep_throughput.py [--quick] [--capacity 4] [--latency-ms 100] [--tasks 8] [--workers 1 2 4 8] [--json]
    python bench/throughput/sweep_throughput.py --gate 3 --capacity 2 --workers 1 2   # a gated trial: one queue vs two phases

What runs is the sweep's real evaluation path: experiments.runs.evaluate_candidate over `--tasks` tasks (the train
tasks of conf/benchmark/asyncio_practices.yaml, then its holdout tasks, then numbered variants if more are asked
for) with pool=RunPool(N), each task a HarnessRunner.finish -> harness.agent.Harness.finish (synthesis, wiggum
rounds, the judge and the independent re-score) sharing one Harness, its roles, memory and search. The backend is
bench.throughput.sim_llm.SimLLM with C slots (further calls wait for a slot) and a fixed latency per call; the
response cache is off, so every call reaches it. Memory is frozen (read-only, in a temporary results dir) and search
is the offline local corpus. Task contexts (plan + research) are prepared once, as a sweep with sweep.reuse_context
does, and one untimed warm-up task at zero latency loads what finish imports lazily.

Per N, one trial (the same candidate: the baseline instructions, the same seed):
  wall s        wall time of evaluate_candidate
  speedup       wall at N=1 / wall at N; goal 0.9 x min(C, tasks, N) (N < C cannot beat N; the brief's headline
                goal 0.9 x min(C, tasks) is checked too, and can only be met for N >= C)
  busy %        fraction of the wall time with at least one call inside the backend (a thread-safe wrapper
                around SimLLM records the busy intervals)
  in chat / C   SimLLM busy_s / wall / C: mean calls inside chat (queued for a slot included) per slot
  slot util     calls x latency / (wall x C): the fraction of slot time actually serving a call
  max in flight the most calls served at once (SimLLM.max_in_flight; at most C)
  bound         the best speed-up the task mix allows at zero harness overhead: each task is a chain of its
                calls (a run cannot be split), started as RunPool starts them (a task starts as soon as any
                running task ends) on C first-come-first-served slots. Tasks of unequal length cap the
                speed-up below min(C, N).
Accounting checks, per N: HarnessRunner.llm_calls() (updated from worker threads) equals the calls the server
served, calls per task equal N=1's, and runs.jsonl holds one intact record per task run.
Per-task scores at every N are compared with N=1 (IDENTICAL or DIFFERENT): SimLLM's replies depend only on
the request, so concurrency must not change a score.

--gate K: a proposal trial as the sweep runs it, its first K tasks the minibatch gate. Per N and per gate
outcome (passed: the rest runs; gated out: it does not), two ways: "two phases" (the gate's tasks, the
decision, then the rest: as the sweep once ran it) and "one queue" (evaluate_candidate's checkpoint: the rest
starts while the gate's last tasks run, and a gated-out trial finishes and drops what started). Wall time,
against the trial at N=1, and the task runs dropped.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.throughput.sim_llm import SimLLM  # noqa: E402

BENCHMARK = ROOT / "conf" / "benchmark" / "asyncio_practices.yaml"


class BusyMeter:
    """SimLLM behind a thread-safe meter of the intervals during which at least one call is in flight.

    Keeps the backend as `.inner` (harness.inference.base_llm unwraps it) and forwards model/backend."""

    def __init__(self, inner: SimLLM) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self.reset()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def reset(self) -> None:
        with self._lock:
            self._n = 0
            self._since = 0.0
            self.busy_union_s = 0.0
            self.max_in_chat = 0

    def chat(self, messages, **kw):
        with self._lock:
            if self._n == 0:
                self._since = time.perf_counter()
            self._n += 1
            self.max_in_chat = max(self.max_in_chat, self._n)
        try:
            return self.inner.chat(messages, **kw)
        finally:
            with self._lock:
                self._n -= 1
                if self._n == 0:
                    self.busy_union_s += time.perf_counter() - self._since

    def busy_s(self) -> float:
        """Union of the busy intervals so far (an interval still open counts up to now)."""
        with self._lock:
            return self.busy_union_s + (time.perf_counter() - self._since if self._n else 0.0)


def load_tasks(n: int):
    """n benchmark tasks: train, then holdout, then numbered variants of them (new texts, new contexts)."""
    import yaml

    from experiments.config import task_from_spec

    specs = yaml.safe_load(BENCHMARK.read_text())["tasks"]
    base = [task_from_spec(s) for s in specs if s.get("split", "train") == "train"]
    base += [task_from_spec(s) for s in specs if s.get("split") == "holdout"]
    tasks = list(base[:n])
    k = 1
    while len(tasks) < n:
        for t in base:
            if len(tasks) >= n:
                break
            tasks.append(task_from_spec({"id": f"{t.id}-v{k}", "task": f"{t.task.rstrip('.')} (variant {k}).",
                                         "task_type": t.task_type, "expected_count": t.expected_count,
                                         "required_terms": list(t.required_terms), "split": "train"}))
        k += 1
    return tasks


def build(results: Path, sim: SimLLM):
    from harness.config import ROLES, BackendConfig, HarnessConfig, MemoryConfig, SearchConfig
    from harness.inference import wrap_roles

    from experiments.runs import HarnessRunner

    meter = BusyMeter(sim)
    cfg = HarnessConfig(results_dir=str(results), backend=BackendConfig(kind="sim", cache=False),
                        search=SearchConfig(provider="local"), memory=MemoryConfig(frozen=True))
    roles = wrap_roles({r: meter for r in ROLES})  # no ResponseCache: every call reaches the server
    return HarnessRunner(cfg, roles), meter


def schedule(chains: list[int], workers: int, capacity: int) -> int:
    """Makespan, in call latencies, of tasks that are chains of `chains[i]` calls, with zero harness overhead:
    at most `workers` tasks at once, started as RunPool starts them (as soon as any running task ends), on a
    server of `capacity` slots serving calls first come first served."""
    todo = list(range(len(chains)))
    window: list[int] = []  # running, in start order
    left = {}  # task -> calls still to make
    queue: list[int] = []  # tasks waiting for a slot, FIFO
    serving: list[int] = []  # tasks with a call being served (ends at t + 1)
    t = 0
    while True:
        for i in serving:  # calls that ended at t
            left[i] -= 1
        serving = []
        window = [i for i in window if left[i] > 0]
        while todo and len(window) < workers:
            window.append(todo.pop(0))
            left[window[-1]] = chains[window[-1]]
        if not window and not todo:
            return t
        for i in window:
            if left[i] > 0 and i not in queue:
                queue.append(i)
        serving, queue = queue[:capacity], queue[capacity:]
        t += 1


def run_records(path: Path, prefix: str) -> dict:
    """Lines of runs.jsonl whose run_id starts with prefix, and lines anywhere in it that do not parse."""
    lines = bad = 0
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                bad += 1
                continue
            lines += str(rec.get("run_id", "")).startswith(prefix)
    return {"lines": lines, "bad": bad}


def machine() -> dict:
    cpu = "?"
    if Path("/proc/cpuinfo").exists():
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "?")
    return {"cores": os.cpu_count(), "cpu": cpu, "python": sys.version.split()[0]}


def fmt_load(load: tuple[float, ...]) -> str:
    return " ".join(f"{x:.2f}" for x in load)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 tasks, workers 1 2 4, latency 50 ms")
    ap.add_argument("--capacity", type=int, default=4, help="server slots C")
    ap.add_argument("--latency-ms", type=float, default=100.0, help="fixed latency per call")
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--gate", type=int, default=0, metavar="K",
                    help="time a gated trial (gate of K tasks, passed and gated out): one queue vs two phases")
    ap.add_argument("--json", action="store_true", help="also print the figures as one JSON object")
    args = ap.parse_args(argv)
    if args.quick:
        args.tasks, args.workers, args.latency_ms = 4, [1, 2, 4], 50.0
    if args.capacity < 1 or args.tasks < 1:
        ap.error("--capacity and --tasks must be >= 1")
    if not 0 <= args.gate < args.tasks:
        ap.error(f"--gate must leave tasks after it: 0 <= K < --tasks ({args.tasks}), got {args.gate}")
    workers = sorted(set(args.workers))
    if workers[0] != 1:
        workers = [1, *workers]  # the reference for speed-up and scores

    os.environ["DDGS_DISABLED"] = "1"
    logging.disable(logging.WARNING)  # the harness logs fallbacks the simulated replies may trigger
    base = Path(tempfile.mkdtemp(prefix="bench-sweep-tp-"))
    os.environ["HARNESS_RESULTS_DIR"] = str(base)
    load0 = os.getloadavg()
    mach = machine()

    from experiments.runs import evaluate_candidate
    from experiments.runs import RunPool

    latency = args.latency_ms / 1e3
    C = args.capacity
    tasks = load_tasks(args.tasks)
    sim = SimLLM(latency, capacity=C)
    runner, meter = build(base / "results", sim)
    instructions = baseline_instructions_for(tasks)

    print("== sweep throughput: the tasks of one trial N at once against a C-slot server ==")
    print(f"machine: {mach['cores']} cores ({mach['cpu']}), Python {mach['python']}, "
          f"load average at start {fmt_load(load0)}")
    print(f"C = {C} slots, latency {args.latency_ms:.0f} ms per call, {len(tasks)} tasks "
          f"({', '.join(t.id for t in tasks)}), response cache off, memory frozen, local search corpus")

    # contexts once (plan + research), untimed; then one warm-up finish at zero latency (lazy imports)
    t0 = time.perf_counter()
    sim.latency_s = 0.0
    contexts = {t.id: runner.prepare(t.task) for t in tasks}
    evaluate_candidate(instructions, tasks[:1], runner, contexts=contexts, seed=0, run_prefix="warmup")
    sim.latency_s = latency
    print(f"contexts prepared and warm-up done in {time.perf_counter() - t0:.1f} s (untimed, zero latency)")

    if args.gate:
        return gated_trials(args, runner, sim, tasks, contexts, instructions, workers, mach, load0)

    goal_x = 0.9 * min(C, len(tasks))
    rows: list[dict] = []
    ref_scores: list[tuple[str, float]] | None = None
    ref_wall = None
    for n in workers:
        sim.reset()
        meter.reset()
        calls0 = runner.llm_calls()
        t0 = time.perf_counter()
        ev = evaluate_candidate(instructions, tasks, runner, contexts=contexts, seed=0, run_prefix=f"w{n}",
                                pool=RunPool(n))
        wall = time.perf_counter() - t0
        busy_union = meter.busy_s()
        runner_calls = runner.llm_calls() - calls0
        scores = [(s.task_id, s.score) for s in ev.scores]
        records = run_records(runner.cfg.runs_jsonl, f"w{n}-")
        chains = [int(s.llm_calls) for s in ev.scores]
        if ref_scores is None:
            ref_scores, ref_wall, ref_chains = scores, wall, chains
        same = scores == ref_scores
        speedup = ref_wall / wall
        ideal = min(C, len(tasks), n)
        serial = sum(chains)
        bound = serial / max(schedule(chains, n, C), 1)
        row = {
            "workers": n, "wall_s": wall, "speedup": speedup, "ideal": ideal,
            "goal_own": 0.9 * ideal, "met_own": speedup >= 0.9 * ideal,
            "goal": goal_x, "met": speedup >= goal_x, "bound": bound,
            "calls_by_task": chains, "calls_by_task_same": chains == ref_chains,
            "runner_llm_calls": runner_calls, "run_records": records,
            "busy_frac": busy_union / wall, "in_chat_per_slot": sim.busy_s / wall / C,
            "slot_util": sim.calls * latency / (wall * C),
            "calls": sim.calls, "calls_per_task": sim.calls / len(tasks), "max_in_flight": sim.max_in_flight,
            "max_in_chat": meter.max_in_chat, "mean": ev.mean,
            "scores": dict(scores), "identical": same,
        }
        rows.append(row)
    load1 = os.getloadavg()

    print(f"{'N':>3s} {'wall s':>7s} {'tasks/min':>9s} {'speedup':>8s} {'ideal':>6s} {'goal(N)':>8s} {'met':>4s} "
          f"{'goal(C)':>8s} {'met':>4s} {'bound':>6s} {'busy %':>7s} {'in chat/C':>9s} {'slot util':>9s} {'calls':>6s} "
          f"{'max in flight':>13s} {'scores':>10s}")
    for r in rows:
        print(f"{r['workers']:3d} {r['wall_s']:7.2f} {60 * len(tasks) / r['wall_s']:9.1f} {r['speedup']:7.2f}x "
              f"{r['ideal']:5d}x {r['goal_own']:7.2f}x {'yes' if r['met_own'] else 'NO':>4s} "
              f"{r['goal']:7.2f}x {'yes' if r['met'] else 'NO':>4s} {r['bound']:5.2f}x "
              f"{100 * r['busy_frac']:6.1f}% "
              f"{r['in_chat_per_slot']:9.2f} {100 * r['slot_util']:8.1f}% {r['calls']:6d} "
              f"{r['max_in_flight']:13d} {'IDENTICAL' if r['identical'] else 'DIFFERENT':>10s}")
    print(f"speedup = wall at N=1 / wall at N. goal(C) = 0.9 x min(C, tasks) = {goal_x:.2f}x (reachable only when "
          f"N >= C); goal(N) = 0.9 x min(C, tasks, N). busy % = wall time with >= 1 call in the backend; "
          f"in chat/C = SimLLM busy_s / wall / C (queueing for a slot included); slot util = calls x latency / "
          f"(wall x C).")
    print(f"bound = the best speed-up the task mix allows at zero harness overhead (each task a chain of its calls: "
          f"{rows[0]['calls_by_task']}), a task starting whenever one ends, as RunPool does.")
    checks = []
    for r in rows:
        if r["runner_llm_calls"] != r["calls"]:
            checks.append(f"N={r['workers']}: HarnessRunner.llm_calls() counted {r['runner_llm_calls']} calls, "
                          f"the server served {r['calls']}")
        if not r["calls_by_task_same"]:
            checks.append(f"N={r['workers']}: calls per task {r['calls_by_task']} != N=1's {rows[0]['calls_by_task']}")
        if r["run_records"] != {"lines": len(tasks), "bad": 0}:
            checks.append(f"N={r['workers']}: runs.jsonl has {r['run_records']} for {len(tasks)} task runs")
    print("accounting: " + ("; ".join(checks) if checks else
                            "HarnessRunner.llm_calls() = server calls, calls per task = N=1's, one intact run record "
                            "per task run, at every N"))
    all_same = all(r["identical"] for r in rows)
    print(f"per-task scores vs N=1: {'IDENTICAL' if all_same else 'DIFFERENT'} at every N "
          f"(mean {rows[0]['mean']:.4f})" if all_same else
          "per-task scores vs N=1: DIFFERENT at N = " + ", ".join(str(r["workers"]) for r in rows if not r["identical"]))
    if not all_same:
        for r in rows:
            if not r["identical"]:
                diff = {k: (rows[0]["scores"].get(k), v) for k, v in r["scores"].items() if rows[0]["scores"].get(k) != v}
                print(f"  N={r['workers']}: {diff}")
    print(f"machine: {mach['cores']} cores, load average at start {fmt_load(load0)}, at end {fmt_load(load1)}")

    figures = {"machine": {**mach, "load_start": list(load0), "load_end": list(load1)},
               "capacity": C, "latency_ms": args.latency_ms, "tasks": [t.id for t in tasks],
               "goal_speedup": goal_x, "scores_identical": all_same,
               "accounting_problems": checks, "rows": rows}
    if args.json:
        print(json.dumps(figures))
    if not all_same:
        raise SystemExit(1)
    return figures


def gated_trials(args, runner, sim, tasks, contexts, instructions, workers, mach, load0) -> dict:
    """--gate K: per N and gate outcome, a trial's wall time as two phases and as one queue (module docstring)."""
    from experiments.runs import CandidateEval, evaluate_candidate
    from experiments.runs import RunPool

    k = args.gate
    print(f"gated trial: the first {k} of {len(tasks)} tasks are the gate; wall s (x the same trial at N=1), "
          f"task runs dropped")
    rows = []
    for passed in (True, False):
        ref = None
        for n in workers:
            row = {"passed": passed, "workers": n}
            for way in ("two phases", "one queue"):
                sim.reset()
                t0 = time.perf_counter()
                prefix = f"g{int(passed)}-{way[:3]}-w{n}"
                if way == "two phases":
                    ev = evaluate_candidate(instructions, tasks, runner, contexts=contexts, run_prefix=prefix,
                                            pool=RunPool(n), order=range(k), prune=False)
                    if passed:
                        rest = evaluate_candidate(instructions, tasks, runner, contexts=contexts, run_prefix=prefix,
                                                  pool=RunPool(n), order=range(k, len(tasks)))
                        ev = CandidateEval(ev.scores + rest.scores)
                else:
                    ev = evaluate_candidate(instructions, tasks, runner, contexts=contexts, run_prefix=prefix,
                                            pool=RunPool(n), checkpoint=(k, lambda scores: passed))
                wall = time.perf_counter() - t0
                ref = ref or wall
                row[way] = {"wall_s": wall, "vs_n1": wall / ref, "dropped": ev.abandoned,
                            "scores": [round(s.score, 6) for s in ev.scores]}
            row["identical"] = row["two phases"]["scores"] == row["one queue"]["scores"]
            rows.append(row)
    print(f"{'gate':>10s} {'N':>3s} {'two phases s':>13s} {'x N=1':>6s} {'one queue s':>12s} {'x N=1':>6s} "
          f"{'dropped':>8s} {'scores':>10s}")
    for r in rows:
        a, b = r["two phases"], r["one queue"]
        print(f"{'passed' if r['passed'] else 'gated out':>10s} {r['workers']:3d} {a['wall_s']:13.2f} "
              f"{a['vs_n1']:6.2f} {b['wall_s']:12.2f} {b['vs_n1']:6.2f} {b['dropped']:8d} "
              f"{'IDENTICAL' if r['identical'] else 'DIFFERENT':>10s}")
    load1 = os.getloadavg()
    print(f"x N=1 = wall / the two-phase trial's wall at N=1 (the same work one task at a time). "
          f"machine: {mach['cores']} cores, load average at start {fmt_load(load0)}, at end {fmt_load(load1)}")
    figures = {"machine": {**mach, "load_start": list(load0), "load_end": list(load1)}, "capacity": args.capacity,
               "latency_ms": args.latency_ms, "gate": k, "tasks": [t.id for t in tasks], "gated_rows": rows}
    if args.json:
        print(json.dumps(figures))
    if not all(r["identical"] for r in rows):
        raise SystemExit(1)
    return figures


def baseline_instructions_for(tasks) -> dict[str, str]:
    """The baseline synthesis instruction per task type (harness.synthesis.DEFAULT_INSTRUCTIONS)."""
    from harness.synthesis import DEFAULT_INSTRUCTIONS

    return {tt: DEFAULT_INSTRUCTIONS[tt] for tt in sorted({t.task_type for t in tasks})}


if __name__ == "__main__":
    main()
