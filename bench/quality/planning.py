"""How well does the planner read a task? task_type, route single|orchestrated and research, on a real model.

    python bench/quality/planning.py --label smollm2 --out results/planning_smollm2.json   # the packaged SmolLM2
    HARNESS_EMBEDDED_MODEL=/path/to/model.gguf python bench/quality/planning.py --label qwen15 --out ...

Each task below runs through exactly what `python -m harness --plan-preview "<task>"` runs before the step graph:
`Harness.prepare(task, with_research=False)` (skills, memory, the two planner passes) and
`orchestrator.decide_route`; then `research.choose_queries` tells whether the pipeline would search. The tasks and
their expectations were written before any run: single-focus and compound research tasks over the three task
types, each with the expected task_type, the expected route, and whether it needs research (every task here does:
the memory is empty, and seed 000 skips the search only when memory already covers the task).

Printed: task_type accuracy, route accuracy with its 2x2 confusion matrix, the share of runs whose plan gives no
queries and no gaps and the share the pipeline would run without a search, one row per task, wall time and the
model file (name, sha256 prefix). `--graph` also builds the step graph of every task routed orchestrated (one
more planner call each) and counts its steps.

The planner's replies go through the harness's response cache in <work-dir>/llm_cache.sqlite (default
results/bench_planning/<model file stem>): keyed on model, messages, schema and sampling, so a rerun with the
same prompts reuses the replies and a changed prompt misses. Greedy enough to repeat: the planner's temperature
and the fixed seed 0 of the shipped config.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.security.injection import model_line  # noqa: E402  (model file name and sha256 prefix)


@dataclass(frozen=True)
class Case:
    id: str
    task: str
    task_type: str  # enumerated | best_practices | research
    route: str  # single | orchestrated
    research: bool = True  # the answer needs a search (an empty memory covers nothing)


S, O = "single", "orchestrated"
E, B, R = "enumerated", "best_practices", "research"

CASES = (
    # -- single-focus: enumerated (the task asks for N items)
    Case("asyncio-5", "List 5 best practices for asyncio, save to output.md", E, S),
    Case("pandas-csv-4", "List 4 ways to reduce memory use when loading CSV files with pandas", E, S),
    Case("type-hints-3", "Give 3 reasons to use type hints in Python", E, S),
    Case("vector-db-6", "Name 6 open-source vector databases and one strength of each", E, S),
    Case("mem-profilers-5", "Suggest 5 tools for profiling Python memory usage", E, S),
    Case("sql-migrations-7", "What are 7 common mistakes when writing SQL migrations? Save to mistakes.md", E, S),
    Case("linux-net-10", "Top 10 Linux commands for debugging network problems", E, S),
    # -- single-focus: best practices
    Case("gha-secrets", "Best practices for handling secrets in GitHub Actions workflows", B, S),
    Case("fastapi-layout", "Write guidelines for structuring a FastAPI project", B, S),
    Case("http-retries", "What are the best practices for retrying failed HTTP requests in Python?", B, S),
    Case("dockerfiles", "Describe best practices for writing Dockerfiles for Python applications, save to docker.md", B, S),
    Case("db-naming", "Recommended practices for naming database tables and columns", B, S),
    Case("prod-logging", "Do's and don'ts of logging in production services", B, S),
    # -- single-focus: research (one topic, even with a research verb, a comparison or a sequencer)
    Case("gil", "Explain how Python's GIL affects multithreaded programs", R, S),
    Case("raft-leader", "How does the Raft consensus algorithm elect a leader?", R, S),
    Case("wasm-gc", "Research the current state of WebAssembly support for garbage-collected languages", R, S),
    Case("cap-dynamo", "Summarize what the CAP theorem says and how it applies to DynamoDB", R, S),
    Case("sqlite-wal", "Compare SQLite WAL mode with rollback journal mode", R, S),
    Case("proc-threads", "Explain the difference between processes and threads in Linux, save to notes.md", R, S),
    Case("hnsw-recall", "Investigate why HNSW indexes trade recall for speed", R, S),
    Case("taskgroup-guide", "Research Python's asyncio.TaskGroup and then write a short guide to it saved to taskgroup.md", R, S),
    Case("pandas-polars", "Compare pandas and Polars for reading large CSV files", R, S),
    Case("py312-notes", "Write a summary of the Python 3.12 release notes, save to py312.md", R, S),
    # -- compound: several distinct domains, then an assembly step
    Case("seed003-guide", "Research agent failure modes and context engineering, then synthesize into a unified guide "
         "saved to guide.md", R, O),
    Case("vdb-prompt-cache", "Research vector database indexing and LLM prompt caching, then combine the findings into "
         "one report saved to report.md", R, O),
    Case("rust-go-async", "Survey Rust async runtimes and Go's goroutine scheduler, then write a comparison of their "
         "concurrency models", R, O),
    Case("scaling-web", "Investigate Kubernetes autoscaling, Postgres connection pooling and CDN caching, then "
         "synthesize a guide to scaling a web app", R, O),
    Case("history-energy", "Research the history of the transformer architecture, then research its energy costs, and "
         "finally write a report that connects both", R, O),
    Case("render-crawl", "Study how browsers render pages and how search engines crawl them; synthesize into an SEO "
         "performance guide saved to seo.md", R, O),
    Case("rag-tools-memory", "Survey retrieval-augmented generation, tool use in LLM agents and agent memory systems, "
         "and produce a unified overview", R, O),
    Case("iot-telemetry", "Research time-series databases and stream processing frameworks, then combine both into an "
         "architecture recommendation for IoT telemetry", R, O),
    Case("packaging-ci", "Compile best practices for Python packaging and for CI pipelines on GitHub Actions, then "
         "merge them into one checklist saved to release.md", B, O),
    Case("api-db-hardening", "Best practices for securing REST APIs and for protecting a PostgreSQL database, combined "
         "into a unified hardening guide", B, O),
    Case("halluc-rag-eval", "List 5 techniques for reducing LLM hallucinations and 5 methods for evaluating RAG "
         "pipelines, then assemble both into one document", E, O),
    Case("rlhf-cai", "Give 4 key ideas from reinforcement learning from human feedback and 4 from constitutional AI, "
         "then compare them in a summary table", E, O),
)

QUICK = ("asyncio-5", "gha-secrets", "gil", "seed003-guide")


def run_case(harness: Any, case: Case, graph: bool) -> dict[str, Any]:
    """One task through the --plan-preview path: prepare (no research), decide_route, choose_queries."""
    from harness.tracing import Tracer, new_run_id, use_tracer
    from harness.orchestrator import build_graph, decide_route
    from harness.research import choose_queries

    cfg = harness.cfg
    t0 = time.perf_counter()
    with use_tracer(Tracer(new_run_id())):
        prepared = harness.prepare(case.task, with_research=False)
        plan = prepared.plan
        route = decide_route(prepared.clean_task, plan, cfg.orchestrator)
        queries, rule = choose_queries(prepared.clean_task, plan.search_queries, plan.gaps, plan.prior_knowledge_ran,
                                       prepared.memory_match, cfg.research.strong_memory_match)
        steps = None
        if graph and route.mode == "orchestrated":
            built, _ = build_graph(prepared.clean_task, prepared, harness.roles, cfg.orchestrator)
            steps = [t.question for t in built.tasks]
    return {
        **asdict(case),
        "got_task_type": plan.task_type,
        "got_route": route.mode,
        "route_reason": route.reason,
        "complexity": route.complexity,
        "plan_complexity": plan.complexity,
        "subtasks": list(plan.subtasks),
        "search_queries": list(plan.search_queries),
        "gaps": list(plan.gaps),
        "plan_skips": not plan.search_queries and not plan.gaps,
        "pipeline_skips": not queries,
        "query_rule": rule,
        "steps": steps,
        "planner_errors": list(plan.errors),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    confusion = {f"{want}->{got}": sum(r["route"] == want and r["got_route"] == got for r in rows)
                 for want in (S, O) for got in (S, O)}
    by_type = {t: {"tasks": sum(r["task_type"] == t for r in rows),
                   "right": sum(r["task_type"] == t == r["got_task_type"] for r in rows)} for t in (E, B, R)}
    return {
        "tasks": n,
        "task_type_accuracy": sum(r["task_type"] == r["got_task_type"] for r in rows) / n,
        "route_accuracy": sum(r["route"] == r["got_route"] for r in rows) / n,
        "route_confusion": confusion,
        "task_type_by_expected": by_type,
        "plan_skip_share": sum(r["plan_skips"] for r in rows) / n,
        "pipeline_skip_share": sum(r["pipeline_skips"] for r in rows) / n,
        "research_agreement": sum(r["research"] == (not r["pipeline_skips"]) for r in rows) / n,
        "seed003_route": next((r["got_route"] for r in rows if r["id"] == "seed003-guide"), None),
    }


def report(summary: dict[str, Any], rows: list[dict[str, Any]], header: str) -> str:
    c = summary["route_confusion"]
    lines = [header, "",
             "| id | task_type want/got | route want/got | score | subtasks | queries | gaps | pipeline search |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        tt = r["got_task_type"] + ("" if r["got_task_type"] == r["task_type"] else f" (want {r['task_type']})")
        rt = r["got_route"] + ("" if r["got_route"] == r["route"] else f" (want {r['route']})")
        steps = "" if r["steps"] is None else f", {len(r['steps'])} steps"
        lines.append(f"| {r['id']} | {tt} | {rt}{steps} | {r['complexity']['score']} | {len(r['subtasks'])} | "
                     f"{len(r['search_queries'])} | {len(r['gaps'])} | {'no' if r['pipeline_skips'] else 'yes'} "
                     f"({r['query_rule']}) |")
    per_type = ", ".join(f"{t} {v['right']}/{v['tasks']}" for t, v in summary["task_type_by_expected"].items())
    lines += [
        "",
        f"task_type accuracy: {summary['task_type_accuracy']:.0%} ({per_type})",
        f"route accuracy:     {summary['route_accuracy']:.0%}",
        "route confusion (rows: expected, columns: got):",
        "|  | single | orchestrated |", "|---|---|---|",
        f"| single | {c['single->single']} | {c['single->orchestrated']} |",
        f"| orchestrated | {c['orchestrated->single']} | {c['orchestrated->orchestrated']} |",
        f"plan gives no queries and no gaps: {summary['plan_skip_share']:.0%} of runs",
        f"pipeline would skip the search:   {summary['pipeline_skip_share']:.0%} of runs "
        f"(research agreement {summary['research_agreement']:.0%})",
        f"seed 003 example routes: {summary['seed003_route']}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", default="", help="a name for this run, printed and stored")
    ap.add_argument("--out", type=Path, help="write rows and summary as JSON here (e.g. results/planning_<label>.json)")
    ap.add_argument("--work-dir", type=Path, help="results dir for the response cache and the (empty) memory")
    ap.add_argument("--jobs", type=int, default=2, help="tasks planned at once (the embedded backend has 2 slots)")
    ap.add_argument("--only", nargs="*", help="case ids to run (default: all)")
    ap.add_argument("--quick", action="store_true", help="a fast check: one task of each kind (4 tasks)")
    ap.add_argument("--graph", action="store_true", help="also build the step graph of tasks routed orchestrated")
    args = ap.parse_args(argv)

    from harness.__main__ import compose_harness_config
    from harness.agent import Harness
    from harness.backends.embedded import embedded_threads, locate_gguf

    path = locate_gguf(os.environ.get("HARNESS_EMBEDDED_MODEL") or None)
    work = args.work_dir or Path("results") / "bench_planning" / path.stem
    cfg = compose_harness_config(["backend=embedded", f"results_dir={work}"])
    only = args.only or (QUICK if args.quick else None)
    cases = [c for c in CASES if not only or c.id in only]
    model = model_line(path)
    print(f"{model}; threads {embedded_threads()}; {len(cases)} tasks; work dir {work}", flush=True)
    harness = Harness(cfg)
    t0 = time.perf_counter()
    done: list[dict[str, Any]] = []

    def one(case: Case) -> dict[str, Any]:
        row = run_case(harness, case, args.graph)
        done.append(row)
        print(f"  [{len(done)}/{len(cases)} {time.perf_counter() - t0:.0f}s] {case.id}: {row['got_task_type']}, "
              f"{row['got_route']} ({row['route_reason']}), {len(row['search_queries'])} queries", flush=True)
        return row

    with ThreadPoolExecutor(max(args.jobs, 1)) as pool:
        rows = list(pool.map(one, cases))
    wall = time.perf_counter() - t0
    summary = summarise(rows)
    cache = harness.roles.cache_stats()
    header = f"planning benchmark {args.label}: {model}; {len(rows)} tasks in {wall:.0f}s wall"
    print("\n" + report(summary, rows, header))
    print(f"response cache: {cache['hits']} hits, {cache['misses']} misses")
    result = {"label": args.label, "model": model, "wall_s": round(wall, 1), "cache": cache, "summary": summary,
              "rows": rows}
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
