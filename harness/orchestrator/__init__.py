"""Compound tasks (seeds 001, 003, 004): route, decompose into a step graph, run steps through the
single-focus pipeline in seed 001's order (the order --plan-preview prints; independent neighbours in parallel),
resolve #E placeholders, assemble, then the wiggum loop on the assembly.

A failing step does not abort the run: its error is substituted downstream and the run is flagged had_errors.

- _routing: when a research task is compound (`route_score`, `research_topics`, `uncovered_topics`).
- _decompose: `decide_route`, the step graph (`build_graph`, `split_compound_task`), `plan_preview`.
- _assemble: a step's outcome, the assembled context, the merged telemetry.
- _run: `Orchestrator` and `run_task`.
"""

from ._assemble import StepOutcome, assemble_context, step_telemetry
from ._decompose import (
    MODES,
    Route,
    build_graph,
    decide_route,
    drop_bad_dependencies,
    plan_preview,
    researchable,
    split_compound_task,
)
from ._routing import research_topics, route_points, route_score, uncovered_topics
from ._run import Orchestrator, graft_trace, run_task

__all__ = [
    "MODES",
    "Orchestrator",
    "Route",
    "StepOutcome",
    "assemble_context",
    "build_graph",
    "decide_route",
    "drop_bad_dependencies",
    "graft_trace",
    "plan_preview",
    "researchable",
    "research_topics",
    "route_points",
    "route_score",
    "run_task",
    "split_compound_task",
    "step_telemetry",
    "uncovered_topics",
]
