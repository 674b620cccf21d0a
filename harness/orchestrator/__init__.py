"""Compound tasks (seeds 001, 003, 004): route, decompose into a step graph, run steps through the
single-focus pipeline in seed 001's order (the order --plan-preview prints; independent neighbours in parallel),
resolve #E placeholders, assemble, then the wiggum loop on the assembly.

A failing step does not abort the run: its error is substituted downstream and the run is flagged had_errors.
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
    "run_task",
    "split_compound_task",
    "step_telemetry",
]
