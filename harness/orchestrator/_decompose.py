"""Whether and how a compound task splits: the route (single-focus or orchestrated), the planner's step graph
with its repairs and fallbacks (the plan's subtasks, steps read off the task text, the task itself), and the
dry run that prints them (`plan_preview`)."""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from typing import Any

from harness.agent import Harness, Prepared
from harness.config import HarnessConfig, OrchestratorConfig
from harness.inference import BackendError, Roles
from harness.planner import filter_subtasks
from harness.research import letter_words
from harness.taskgraph import GraphError, TaskGraph, graph_messages, graph_schema

from ._routing import route_points, route_score, uncovered_topics

log = logging.getLogger("harness.orchestrator")

MODES = ("off", "auto", "always")


@dataclass(frozen=True)
class Route:
    mode: str  # single | orchestrated
    reason: str
    complexity: dict[str, int]


def decide_route(task: str, plan: Any, cfg: OrchestratorConfig) -> Route:
    """off | always | auto: orchestrated when the research route score (_routing) reaches cfg.threshold
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
