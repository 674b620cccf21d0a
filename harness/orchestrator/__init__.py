"""Compound tasks (seeds 001, 003, 004): route, decompose into a step graph, run steps through the
single-focus pipeline in seed 001's order (the order --plan-preview prints; independent neighbours in parallel),
resolve #E placeholders, assemble, then the wiggum loop on the assembly.

A failing step does not abort the run: its error is substituted downstream and the run is flagged had_errors.

- _routing: when a research task is compound (`route_score`, `research_topics`, `uncovered_topics`).
- _decompose: `decide_route`, the step graph (`build_graph`, `split_compound_task`), `plan_preview`.
- _assemble: a step's outcome, the assembled context, the merged telemetry.
- _run: `Orchestrator` and `run_task`.
"""

from ._decompose import build_graph, decide_route, plan_preview
from ._run import run_task

__all__ = [
    "build_graph",
    "decide_route",
    "plan_preview",
    "run_task",
]
