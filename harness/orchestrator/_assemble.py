"""What the steps leave and how it is put together: `StepOutcome` (one step's run), the per-step telemetry
merged into the planner's, and the step outputs as the research context of the assembly synthesis."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from harness.taskgraph import TaskGraph, merge_telemetry


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


def assemble_context(graph: TaskGraph, outcomes: list[StepOutcome]) -> str:
    """The step outputs as the research context of the assembly synthesis."""
    parts = []
    if graph.objectives:
        parts.append("Objectives: " + "; ".join(graph.objectives))
    for o in outcomes:
        flag = "" if o.status == "ok" else " (FAILED: its error is substituted below)"
        parts.append(f"### Step {o.id}: {o.question}{flag}\n{o.output.strip()}")
    return "\n\n".join(parts)
