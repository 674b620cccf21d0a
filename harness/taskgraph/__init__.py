"""Compound planning, the pure parts (seeds 001 and 004), one room per job:

- ids: canonical step ids (1 -> E1) and the natural order ties are broken by.
- placeholders: ReWOO #E1, #E1.summary, #E1.head=N, #E1.last=N resolved from earlier outputs.
- nodes: `TaskNode` (one step) and `GraphError`.
- parse: lenient reading of planner output (fences, prose, aliases, affinity clamped) into steps.
- order: graphlib topological order, cycle detection, dependency depth.
- schedule: seed 001's scheduler, the order the orchestrator runs and --plan-preview prints.
- graph: `TaskGraph`: lookups, dependency edges, validation, and the views above as methods.
- preview: the dry-run text of a graph.
- complexity: seed 004's 0-10 score of when a step graph pays off.
- telemetry: `merge_telemetry`, merged and never overwritten.
- prompt: the step-graph planner's messages and bounded schema.
"""

from harness.taskgraph.graph import TaskGraph
from harness.taskgraph.nodes import GraphError
from harness.taskgraph.placeholders import resolve_placeholders_detailed
from harness.taskgraph.prompt import graph_messages, graph_schema
from harness.taskgraph.telemetry import merge_telemetry

__all__ = [
    "GraphError",
    "TaskGraph",
    "resolve_placeholders_detailed",
    "merge_telemetry",
    "graph_schema",
    "graph_messages",
]
