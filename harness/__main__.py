"""`python -m harness "<task>"`: run one task through the harness and print a summary block.

Exceptions become one-line messages here, at the CLI edge, and a non-zero exit status.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
import time

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness",
        description="Plan, research, synthesize and evaluate one task with the local research harness.",
    )
    p.add_argument("task", help='the task, e.g. "List 5 best practices for Python asyncio and save to output.md"')
    p.add_argument("--backend", default=None, help="auto (default) | embedded | ollama | openai")
    p.add_argument("--host", default=None, help="Ollama host (default OLLAMA_HOST or http://127.0.0.1:11434)")
    p.add_argument("--base-url", default=None, help="OpenAI-compatible base URL (vLLM, llama.cpp server, LM Studio)")
    p.add_argument("--model", default=None, help="use this model for every role")
    p.add_argument("--results-dir", default=None, help="where runs.jsonl, traces/, outputs/, caches live (default results)")
    p.add_argument("--skip-prior-knowledge", action="store_true", help="same as HARNESS_SKIP_PRIOR_KNOWLEDGE=1")
    p.add_argument("--search", default=None, choices=["auto", "ddgs", "local"], help="search provider")
    p.add_argument("--rounds", type=int, default=None, help="wiggum rounds (default 3)")
    p.add_argument("--panel", action="store_true", help="run the persona panel after the wiggum loop")
    p.add_argument("--no-memory", action="store_true", help="neither recall nor store observations")
    p.add_argument("--no-cache", action="store_true", help="bypass the LLM response cache")
    p.add_argument("--plan-preview", action="store_true", help="show the plan graph and its order; execute nothing")
    p.add_argument("--mode", default=None, choices=["off", "auto", "always"], help="orchestrator plan-first mode")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def config_from_args(args: argparse.Namespace):
    from harness.config import HarnessConfig, apply_env

    cfg = apply_env(HarnessConfig())
    b = cfg.backend
    if args.backend:
        b = dataclasses.replace(b, kind=args.backend)
    if args.host:
        b = dataclasses.replace(b, host=args.host)
    if args.base_url:
        b = dataclasses.replace(b, base_url=args.base_url)
    if args.model:
        b = dataclasses.replace(b, planner_model=args.model, producer_model=args.model,
                                evaluator_model=args.model, compressor_model=args.model)
    if args.no_cache:
        b = dataclasses.replace(b, cache=False)
    cfg.backend = b
    if args.results_dir:
        cfg.results_dir = args.results_dir
    if args.skip_prior_knowledge:
        cfg.planner = dataclasses.replace(cfg.planner, skip_prior_knowledge=True)
    if args.search:
        cfg.search = dataclasses.replace(cfg.search, provider=args.search)
    if args.rounds is not None:
        cfg.wiggum = dataclasses.replace(cfg.wiggum, max_rounds=args.rounds)
    if args.panel:
        cfg.panel = dataclasses.replace(cfg.panel, enabled=True)
    if args.no_memory:
        cfg.memory = dataclasses.replace(cfg.memory, enabled=False)
    if args.mode:
        cfg.orchestrator = dataclasses.replace(cfg.orchestrator, mode=args.mode)
    return cfg


def summary_block(result) -> str:
    rec = result.record
    llm = rec.get("llm", {})
    calls = sum(int(u.get("calls", 0)) for u in llm.values())
    tokens = sum(int(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)) for u in llm.values())
    scores = rec.get("scores") or {}
    wig = rec.get("wiggum") or {}
    quality = (rec.get("research") or {}).get("quality") or {}
    steps = rec.get("steps") or []
    parallel = rec.get("parallel") or {}
    stage_s = rec.get("stage_s") or {}
    # parallel step spans overlap: count their wall time once, not their sum
    wall = sum(v for k, v in stage_s.items() if not k.startswith("subtask ")) + float(parallel.get("steps_wall_s") or 0)
    lines = [
        "== harness run ==",
        f"run_id:      {result.run_id}",
        f"status:      {result.status}" + (f" ({result.error})" if result.error else ""),
        f"backend:     {', '.join(f'{k}={v}' for k, v in (rec.get('backend') or {}).items())}",
        f"task_type:   {(rec.get('plan') or {}).get('task_type')}",
    ]
    if rec.get("mode"):
        lines.append(f"mode:        {rec['mode']} ({(rec.get('route') or {}).get('reason')})")
    if steps:
        done = ", ".join(f"{s['id']} {s['status']} {s['wall_s']:.1f}s" for s in steps)
        lines.append(f"steps:       {done}; had_errors={rec.get('had_errors')}")
        lines.append(f"parallel:    wall={parallel.get('steps_wall_s')}s sum={parallel.get('steps_sum_s')}s"
                     f" speedup={parallel.get('speedup')} max_parallel={parallel.get('max_parallel')}")
    steps_llm = rec.get("llm_steps") or {}
    step_calls = sum(int(u.get("calls", 0)) for u in steps_llm.values())
    step_tokens = sum(int(u.get("prompt_tokens", 0) + u.get("completion_tokens", 0)) for u in steps_llm.values())
    lines += [
        f"research:    rounds={rec.get('research', {}).get('rounds')} searches={rec.get('research', {}).get('search_calls')}"
        f" confidence={quality.get('confidence')} degraded={rec.get('research', {}).get('degraded_reason')}",
        f"score:       {scores.get('composite')}  wiggum={'PASS' if wig.get('passed') else 'FAIL'}"
        f" rounds={len(wig.get('rounds', []))}",
        f"llm:         calls={calls} tokens={tokens} cache={rec.get('cache')}"
        + (f" (+ steps: calls={step_calls} tokens={step_tokens})" if steps_llm else ""),
        f"output:      {result.output_path}",
        f"trace:       {result.trace_path}",
        f"wall_s:      {wall:.1f} (stages)",
    ]
    lines += [f"WARNING:     {w}" for w in rec.get("graph_warnings") or []]
    if result.smoke:
        from harness.inference import SMOKE_LABEL

        lines.append(f"NOTE:        {rec.get('smoke_label') or SMOKE_LABEL}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if not args.task.strip():
        print("error: task is empty: give the task as the first argument", file=sys.stderr)
        return EXIT_USAGE
    from harness.skills import parse_skills

    if not parse_skills(args.task)[0].strip():
        print(f"error: task is empty after the skill tokens {args.task.strip()!r}: add the task after them", file=sys.stderr)
        return EXIT_USAGE
    try:
        cfg = config_from_args(args)
        from harness.backends import preflight

        preflight(cfg.backend)  # server down / model missing: one line now, not retries and a failed run later
        if args.plan_preview:
            from harness.orchestrator import plan_preview

            print(plan_preview(args.task, cfg))
            return EXIT_OK
        from harness.orchestrator import run_task

        t0 = time.perf_counter()
        result = run_task(args.task, cfg)
        print(summary_block(result))
        print(f"elapsed_s:   {time.perf_counter() - t0:.1f}")
        return EXIT_OK if result.status == "ok" else EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # the CLI edge: one line, non-zero exit
        if args.verbose:
            raise
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
