"""Compound tasks (seeds 001, 003, 004): route, decompose into a step graph, run steps through the
single-focus pipeline in seed 001's order (the order --plan-preview prints; independent neighbours in parallel),
resolve #E placeholders, assemble, then the wiggum loop on the assembly.

A failing step does not abort the run: its error is substituted downstream and the run is flagged had_errors.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from harness.agent import Harness, Prepared, RunResult
from harness.config import HarnessConfig, OrchestratorConfig
from harness.inference import BackendError, Roles
from harness.logger import Tracer, current_tracer, new_run_id, use_tracer
from harness.planner import filter_subtasks
from harness.research import ResearchQuality, ResearchResult, letter_words
from harness.routing import route_points, route_score, uncovered_topics
from harness.security import flag_record, scan_text
from harness.taskgraph import (
    GraphError,
    TaskGraph,
    graph_messages,
    graph_schema,
    merge_telemetry,
    resolve_placeholders_detailed,
)

log = logging.getLogger("harness.orchestrator")

MODES = ("off", "auto", "always")


@dataclass(frozen=True)
class Route:
    mode: str  # single | orchestrated
    reason: str
    complexity: dict[str, int]


def decide_route(task: str, plan: Any, cfg: OrchestratorConfig) -> Route:
    """off | always | auto: orchestrated when the research route score (harness.routing) reaches cfg.threshold
    and the task spans at least cfg.min_topics topics; the planner's researchable subtasks count unless the
    planner rated the task low complexity."""
    if cfg.mode not in MODES:
        raise ValueError(f"orchestrator.mode must be one of {', '.join(MODES)}, got {cfg.mode!r}")
    subtasks = [s for s in (getattr(plan, "subtasks", ()) or ()) if researchable(s)]
    low = getattr(plan, "complexity", "medium") == "low"
    breakdown = route_score(task, () if low else subtasks)
    if cfg.mode == "off":
        return Route("single", "orchestrator.mode=off", breakdown)
    if cfg.mode == "always":
        return Route("orchestrated", "orchestrator.mode=always", breakdown)
    score, topics = breakdown["score"], breakdown["topics"]
    facts = f"complexity {score} {{}} threshold {cfg.threshold}, topics {topics}, subtasks {len(subtasks)}" + (
        " (ignored: the planner rated the task low complexity)" if low and len(subtasks) >= 2 else "")
    if score >= cfg.threshold and topics >= cfg.min_topics:
        return Route("orchestrated", facts.format(">="), breakdown)
    return Route("single", facts.format("<" if score < cfg.threshold else ">=") +
                 (f" (a compound spans {cfg.min_topics}+)" if topics < cfg.min_topics else ""), breakdown)


def researchable(question: str) -> bool:
    """A step question worth a research run: at least two words of three or more letters (not '2026-11-23')."""
    return letter_words(question) >= 2


def drop_bad_dependencies(graph: TaskGraph) -> tuple[TaskGraph, list[str]]:
    """Remove declared dependencies on unknown, later or the same step (a small planner's usual slip) -> (graph,
    what was removed). Placeholders are left alone: a graph that quotes an undeclared step stays invalid."""
    position = {t.id: i for i, t in enumerate(graph.tasks)}
    notes: list[str] = []
    tasks = []
    for i, t in enumerate(graph.tasks):
        keep = tuple(d for d in t.depends_on if d in position and position[d] < i)
        if keep != t.depends_on:
            notes.append(f"{t.id}: dropped depends_on {[d for d in t.depends_on if d not in keep]}")
            t = dataclasses.replace(t, depends_on=keep)
        tasks.append(t)
    return dataclasses.replace(graph, tasks=tuple(tasks)), notes


_SEQUENCE_SPLIT = re.compile(r"\s*(?:;|,?\s*\b(?:and then|then|after that|afterwards|finally|next)\b,?)\s*", re.I)
_RESEARCH_LEAD = re.compile(
    r"^(research|investigate|explain|find|study|survey|look up|analy[sz]e|review|summari[sz]e|describe|explore)\s+(.+)$",
    re.I,
)
_CONJUNCTION = re.compile(r"\s*(?:,\s*and\s+|,\s*|\s+and\s+)\s*", re.I)


def split_compound_task(task: str, max_steps: int = 4) -> list[str]:
    """Research steps read off the task text when the planner gives no usable graph or subtasks:
    "Research A and B, then write a guide" -> ["Research A", "Research B"]. Clauses are cut at sequencers,
    assembly clauses dropped (seed 000's filter), and a research verb's object split at "and"/commas only when
    every part is researchable on its own. [] unless at least two steps come out."""
    steps: list[str] = []
    for clause in _SEQUENCE_SPLIT.split(task or ""):
        clause = clause.strip(" .,:")
        if not clause or filter_subtasks([clause])[1]:
            continue
        m = _RESEARCH_LEAD.match(clause)
        parts = _CONJUNCTION.split(m.group(2)) if m else []
        if len(parts) >= 2 and all(researchable(p) for p in parts):
            steps += [f"{m.group(1)[0].upper()}{m.group(1)[1:]} {p.strip()}" for p in parts]
        elif researchable(clause):
            steps.append(clause[0].upper() + clause[1:])
    return steps[:max_steps] if len(steps) >= 2 else []


def build_graph(task: str, prepared: Prepared, roles: Roles, cfg: OrchestratorConfig) -> tuple[TaskGraph, list[str]]:
    """Ask the planner for a step graph. Assembly steps and steps with no researchable question are dropped and
    bad dependencies removed, each with a warning; a graph still invalid or empty is rejected with a warning and
    the raw reply, falling back to the plan's subtasks (two or more, as independent steps), then to steps read off
    the task text, else to the task itself as one step. Every warning is logged (stderr) and returned for the run
    record: never swallowed."""
    warnings: list[str] = []
    graph = _planned_graph(task, prepared, roles, cfg, warnings)
    if graph is not None and len(graph.tasks) < 2:
        warnings.append(f"planner step graph has {len(graph.tasks)} research step: a compound task needs 2+")
        graph = None
    missed = uncovered_topics(prepared.clean_task, [t.question for t in graph.tasks]) if graph is not None else []
    if missed:
        warnings.append(f"planner step graph leaves out the task's topics {missed}")
        graph = None
    if graph is None:
        subtasks = [s for s in prepared.plan.subtasks if researchable(s)]
        split = split_compound_task(prepared.clean_task, cfg.max_steps)
        if len(subtasks) >= 2:
            warnings.append(f"fell back to the planner's {len(subtasks)} subtasks as independent steps")
            graph = TaskGraph.from_subtasks(subtasks, objective=task)
        elif split:
            warnings.append(f"fell back to {len(split)} steps read off the task text: {split}")
            graph = TaskGraph.from_subtasks(split, objective=task)
        else:
            why = "the plan has no subtasks" if not prepared.plan.subtasks else (
                f"the plan's subtasks {list(prepared.plan.subtasks)} are fewer than two researchable questions")
            warnings.append(f"fell back to the task itself as one step ({why})")
            graph = TaskGraph.from_subtasks([prepared.clean_task], objective=task)
    for warning in warnings:
        log.warning("%s", warning)
    return graph, warnings


def _planned_graph(task: str, prepared: Prepared, roles: Roles, cfg: OrchestratorConfig,
                   warnings: list[str]) -> TaskGraph | None:
    try:
        reply = roles.planner.chat(
            graph_messages(task, prepared.memory_context, cfg.max_steps),
            schema=graph_schema(cfg.max_steps),
            temperature=0.1,
            max_tokens=500,
        )
    except BackendError as exc:
        warnings.append(f"step-graph planner call failed: {exc}")
        return None
    raw = f"raw: {reply.text[:300]!r}"
    try:
        graph = TaskGraph.from_planner_output(reply.text)
    except GraphError as exc:
        warnings.append(f"malformed step graph: {exc}; raw: {str(exc.raw)[:300]!r}")
        return None
    warnings.extend(graph.warnings)
    kept, dropped = filter_subtasks([t.question for t in graph.tasks])
    if dropped:
        warnings.append(f"dropped assembly steps: {list(dropped)}")
    junk = [t.question for t in graph.tasks if t.question in kept and not researchable(t.question)]
    if junk:
        warnings.append(f"dropped steps with no researchable question: {[q[:60] for q in junk]}")
    if dropped or junk:
        graph = dataclasses.replace(graph, tasks=tuple(t for t in graph.tasks if t.question in kept and researchable(t.question)))
    errors = graph.validate()
    if errors and graph.tasks:
        repaired, notes = drop_bad_dependencies(graph)
        if notes and not repaired.validate():
            warnings.append(f"planner step graph repaired ({'; '.join(notes)}) after: {errors}; {raw}")
            return repaired
    if errors or not graph.tasks:
        warnings.append(f"planner step graph rejected: {errors or ['no steps']}; {raw}")
        return None
    return graph


@dataclass(frozen=True)
class StepOutcome:
    id: str
    question: str
    status: str
    output: str
    error: str | None
    run_id: str | None
    start_s: float
    wall_s: float
    llm_calls: int
    placeholder_problems: tuple[str, ...] = ()
    sources: tuple = ()
    search_calls: int = 0
    usage: dict = dataclasses.field(default_factory=dict)  # role -> calls/tokens of the step's own run
    confidence: float | None = None  # the step's research confidence (seed 002)
    degraded_reason: str | None = None  # why the step's search degraded (e.g. ddgs offline -> local)
    flags: tuple = ()  # injection patterns found in the step's output (removed before any later prompt sees it)


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
            self._sub = Harness(sub_cfg, self.harness.roles, memory=self.harness.memory, search=self.harness.search)
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


def step_telemetry(graph: TaskGraph, outcomes: list[StepOutcome]) -> dict[str, Any]:
    """Per-step telemetry: what the plan said (rank in the run order, tools, affinity, dependencies), then what
    each step did (status, confidence, timing, run id), merged step by step with merge_telemetry so a step's
    fields join its planned ones and no step's entry replaces another's."""
    telemetry: dict[str, Any] = {"order": [o.id for o in outcomes]}
    planned = {t.id: t for t in graph.unique_tasks()}
    for rank, o in enumerate(outcomes, 1):
        node = planned[o.id]
        telemetry = merge_telemetry(telemetry, {"steps": {o.id: {
            "rank": rank, "tools": list(node.used_tools), "affinity": dict(node.affinity),
            "depends_on": list(graph.edges()[o.id])}}})
    for o in outcomes:
        telemetry = merge_telemetry(telemetry, {"steps": {o.id: {
            "status": o.status, "confidence": o.confidence, "start_s": o.start_s, "wall_s": o.wall_s,
            "run_id": o.run_id}}})
    return telemetry


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


def assemble_context(graph: TaskGraph, outcomes: list[StepOutcome]) -> str:
    """The step outputs as the research context of the assembly synthesis."""
    parts = []
    if graph.objectives:
        parts.append("Objectives: " + "; ".join(graph.objectives))
    for o in outcomes:
        flag = "" if o.status == "ok" else " (FAILED: its error is substituted below)"
        parts.append(f"### Step {o.id}: {o.question}{flag}\n{o.output.strip()}")
    return "\n\n".join(parts)


def run_task(task: str, cfg: HarnessConfig, roles: Roles | None = None, *,
             extra_record: dict[str, Any] | None = None) -> RunResult:
    """The CLI's entry: route single-focus vs orchestrated per cfg.orchestrator.mode; extra_record's fields
    (e.g. the CLI's config_overrides) go into the run record."""
    harness = Harness(cfg, roles)
    if cfg.orchestrator.mode == "off":
        return harness.run(task, extra_record=extra_record)
    return Orchestrator(harness).run(task, extra_record=extra_record)


def plan_preview(task: str, cfg: HarnessConfig, roles: Roles | None = None) -> str:
    """Dry run: plan, route, step graph and order. Calls the planner; runs no research, synthesis or step."""
    harness = Harness(cfg, roles)
    prepared = harness.prepare(task, with_research=False)
    plan = prepared.plan
    route = decide_route(prepared.clean_task, plan, cfg.orchestrator)
    lines = [
        f"Task: {prepared.clean_task}",
        f"Skills: {', '.join(prepared.skills) or '-'}",
        f"Plan: task_type={plan.task_type} complexity={plan.complexity} expected_sections={plan.expected_sections}"
        f" parser={plan.parser}",
        f"Search queries: {list(plan.search_queries)}",
        f"Gaps: {list(plan.gaps)}",
        f"Subtasks: {list(plan.subtasks)}",
        f"Complexity score: {route.complexity['score']} ({route_points(route.complexity)})",
        f"Route: {route.mode} ({route.reason})",
    ]
    if plan.errors:
        lines.append(f"WARNING: planner fell back ({plan.parser}): {list(plan.errors)}")
    if route.mode == "orchestrated":
        graph, warnings = build_graph(prepared.clean_task, prepared, harness.roles, cfg.orchestrator)
        lines.append(graph.preview())
        lines += [f"WARNING: {w}" for w in warnings]
    else:
        lines.append("Plan preview (dry run: nothing executed): single-focus pipeline")
    return "\n".join(lines)
