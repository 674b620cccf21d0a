"""The orchestrated run: `Orchestrator` routes a task, runs its steps through the single-focus pipeline in
seed 001's order (independent neighbours in parallel, #E placeholders resolved, each output scanned), grafts
their traces, and finishes on the assembly; `run_task` is the CLI's entry."""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

from harness.agent import Harness, RunResult
from harness.config import HarnessConfig
from harness.inference import Roles
from harness.research import ResearchQuality, ResearchResult
from harness.review import Evaluator
from harness.security import flag_record, scan_text
from harness.taskgraph import TaskGraph, merge_telemetry, resolve_placeholders_detailed
from harness.tracing import Tracer, current_tracer, new_run_id, use_tracer

from ._assemble import StepOutcome, assemble_context, step_telemetry
from ._decompose import build_graph, decide_route


class Orchestrator:
    def __init__(self, harness: Harness) -> None:
        self.harness = harness
        self._sub: Harness | None = None

    @property
    def sub_harness(self) -> Harness:
        """The harness each step runs through, built on first use from the parent's memory and search (opened
        then), so steps share backends, memory and search with the parent; only the loop length differs (and no verify
        re-score: a step's score is not an objective)."""
        if self._sub is None:
            cfg = self.harness.cfg
            sub_cfg = dataclasses.replace(
                cfg,
                wiggum=dataclasses.replace(cfg.wiggum, max_rounds=cfg.orchestrator.subtask_wiggum_rounds),
                orchestrator=dataclasses.replace(cfg.orchestrator, mode="off"),
                # a step's score is no objective (nothing reads it): no verify re-score call per step
                evaluator=dataclasses.replace(cfg.evaluator, rescore=False),
            )
            self._sub = Harness(sub_cfg, self.harness.roles, evaluator=self.harness.evaluator,
                                memory=self.harness.memory, search=self.harness.search)
        return self._sub

    def run(self, task: str, *, extra_record: dict[str, Any] | None = None) -> RunResult:
        """Route, then run single-focus or orchestrated; extra_record's fields go into the run record too."""
        run_id = new_run_id()
        tracer = Tracer(run_id)
        with use_tracer(tracer):
            try:
                prepared = self.harness.prepare(task, with_research=False)
                route = decide_route(prepared.clean_task, prepared.plan, self.harness.cfg.orchestrator)
                if route.mode == "single":
                    prepared = self.harness.complete_research(prepared)
                    extra = {**(extra_record or {}), "mode": "single", "route": dataclasses.asdict(route)}
                    return self.harness.finish(prepared, run_id=run_id, tracer=tracer, extra_record=extra)
                with tracer.stage("decompose"):
                    graph, warnings = build_graph(prepared.clean_task, prepared, self.harness.roles, self.harness.cfg.orchestrator)
                outcomes = self.execute(graph)
            except ValueError:
                raise
            except Exception as exc:
                return self.harness.record_failure(task, run_id, tracer, exc)
        assembled = assemble_context(graph, outcomes)
        sources = tuple({s.url: s for o in outcomes for s in o.sources}.values())
        confidences = [o.confidence for o in outcomes if o.confidence is not None]
        quality = ResearchQuality(
            confidence=round(sum(confidences) / len(confidences), 4) if confidences else 0.0,
            notes=f"assembled from {len(outcomes)} steps ({sum(o.status == 'ok' for o in outcomes)} ok)",
        )
        research = ResearchResult(
            context=assembled,
            sources=sources,
            quality=quality,
            rounds=len(outcomes),
            search_calls=sum(o.search_calls for o in outcomes),
            from_cache=False,
            degraded_reason=next((o.degraded_reason for o in outcomes if o.degraded_reason), None),
            flagged=sum(len(o.flags) for o in outcomes),
            flags=tuple(f for o in outcomes for f in o.flags),
        )
        prepared = dataclasses.replace(prepared, research=research)
        had_errors = any(o.status != "ok" for o in outcomes)
        sum_steps = sum(o.wall_s for o in outcomes)
        span = (max((o.start_s + o.wall_s for o in outcomes), default=0.0) - min((o.start_s for o in outcomes), default=0.0))
        step_usage: dict[str, dict[str, float]] = {}
        for o in outcomes:
            for role, u in o.usage.items():
                acc = step_usage.setdefault(role, {})
                for k, v in u.items():
                    acc[k] = round(acc.get(k, 0) + v, 4)
        extra = {
            **(extra_record or {}),
            "mode": "orchestrated",
            "route": dataclasses.asdict(route),
            "graph": graph.to_dict(),
            "graph_warnings": warnings,
            "had_errors": had_errors,
            "steps": [dataclasses.asdict(dataclasses.replace(o, sources=(), output=o.output[:500])) for o in outcomes],
            "llm_steps": step_usage,
            "parallel": {"steps_wall_s": round(span, 3), "steps_sum_s": round(sum_steps, 3),
                         "speedup": round(sum_steps / span, 3) if span > 0 else None,
                         "max_parallel": self.harness.cfg.orchestrator.max_parallel},
            "planner_telemetry": merge_telemetry(
                merge_telemetry(
                    {"plan": {"complexity": prepared.plan.complexity, "subtasks": len(prepared.plan.subtasks),
                              "parser": prepared.plan.parser, "errors": list(prepared.plan.errors)}},
                    {"graph": {**graph.telemetry(), "planner_warning_count": len(warnings)}},
                ),
                step_telemetry(graph, outcomes),
            ),
        }
        return self.harness.finish(prepared, run_id=run_id, tracer=tracer, extra_record=extra)

    def execute(self, graph: TaskGraph) -> list[StepOutcome]:
        """Run the steps in seed 001's order, `graph.schedule_order()`: the very function --plan-preview prints.

        Steps start one after another in that order, each once its dependencies have finished and a worker
        (orchestrator.max_parallel) is free; a step never starts ahead of one before it in the order, so the
        trace's step start order is the preview's order. Independent steps next to each other in the order run
        in parallel. Returns the outcomes in that order."""
        tracer = current_tracer()
        order = graph.schedule_order()
        edges = graph.edges()
        outputs: dict[str, str] = {}
        outcomes: dict[str, StepOutcome] = {}
        t0 = time.perf_counter()
        workers = max(1, self.harness.cfg.orchestrator.max_parallel)
        _ = self.sub_harness  # open memory and search here, once, not racing in the workers
        running: dict[Future, str] = {}

        def collect() -> None:  # at least one running step's outcome
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                tid = running.pop(future)
                outcomes[tid] = future.result()
                outputs[tid] = outcomes[tid].output

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="step") as pool:
            for node in order:
                while len(running) >= workers or any(d not in outcomes for d in edges[node.id]):
                    collect()  # a dependency not finished is running: order is topological
                started = threading.Event()
                running[pool.submit(self._run_step, node, dict(outputs), tracer, t0, started)] = node.id
                started.wait()  # its span is open: the next step's span starts after this one's
            while running:
                collect()
        return [outcomes[t.id] for t in order]

    def _run_step(self, node, outputs: dict[str, str], tracer: Tracer, t0: float,
                  started: threading.Event | None = None) -> StepOutcome:
        try:
            return self._step(node, outputs, tracer, t0, started)
        finally:
            if started is not None:
                started.set()  # also when the step failed before its span opened: the dispatcher never hangs

    def _step(self, node, outputs: dict[str, str], tracer: Tracer, t0: float,
              started: threading.Event | None) -> StepOutcome:
        question, problems = resolve_placeholders_detailed(node.question, outputs)
        start = time.perf_counter()
        child = Tracer(f"{tracer.run_id}.{node.id}")  # the step's own run: its own record and trace file
        with use_tracer(tracer), tracer.stage(f"subtask {node.id}", question=question[:200]) as span:
            if started is not None:
                started.set()
            try:
                result = self.sub_harness.run(
                    question, tracer=child, extra_record={"parent_run_id": tracer.run_id, "step_id": node.id}
                )
                error = result.error
                status = result.status
                output = result.output_text if status == "ok" else f"[step {node.id} failed: {error}]"
                research = result.record.get("research") or {}
                calls = sum(int(u.get("calls", 0)) for u in (result.record.get("llm") or {}).values())
                run_id = result.run_id
                search_calls = int(research.get("search_calls") or 0)
                confidence = (research.get("quality") or {}).get("confidence")
                degraded = research.get("degraded_reason")
                sources = _sources_of(result)
            except Exception as exc:  # a failing step never aborts the run
                status, error, run_id, calls, search_calls, sources = "failed", f"{type(exc).__name__}: {exc}", None, 0, 0, ()
                confidence, degraded = None, None
                output = f"[step {node.id} failed: {error}]"
            # an earlier step's output goes into later step questions (#E placeholders) and the assembly's research
            # context: an instruction planted in a source and echoed by the model stops here
            scanned = scan_text(output)
            output = scanned.text
            flags = (flag_record(scanned, f"step {node.id} output (run {run_id})"),) if scanned.flagged else ()
            span.update(status=status, run_id=run_id, flagged=bool(flags))
        graft_trace(tracer, child, tid=span.tid, step=node.id)
        return StepOutcome(
            id=node.id, question=question, status=status, output=output, error=error, run_id=run_id,
            start_s=round(start - t0, 4), wall_s=round(time.perf_counter() - start, 4), llm_calls=calls,
            placeholder_problems=problems, sources=sources, search_calls=search_calls,
            usage={role: dict(u) for role, u in child.usage.items()}, confidence=confidence,
            degraded_reason=degraded,
            flags=flags,
        )


def graft_trace(parent: Tracer, child: Tracer, *, tid: int, step: str) -> None:
    """Copy a step run's spans into the parent trace, on the worker's row and on the parent's clock, so one
    trace shows the steps' stages and model calls side by side. The parent's stage timings are not touched."""
    offset_us = (child.t0 - parent.t0) * 1e6
    grafted = [
        {**e, "ts": round(e["ts"] + offset_us, 1), "tid": tid, "args": {**e.get("args", {}), "step": step}}
        for e in list(child.events)
    ]
    parent.events.extend(grafted)  # one list.extend: atomic with respect to the other workers


def _sources_of(result: RunResult) -> tuple:
    return tuple(getattr(result, "sources", ()) or ())


def run_task(task: str, cfg: HarnessConfig, roles: Roles | None = None, *, evaluator: Evaluator | None = None,
             extra_record: dict[str, Any] | None = None) -> RunResult:
    """The CLI's entry: route single-focus vs orchestrated per cfg.orchestrator.mode, scoring with `evaluator`;
    extra_record's fields (e.g. the CLI's config_overrides) go into the run record."""
    harness = Harness(cfg, roles, evaluator=evaluator)
    if cfg.orchestrator.mode == "off":
        return harness.run(task, extra_record=extra_record)
    return Orchestrator(harness).run(task, extra_record=extra_record)
