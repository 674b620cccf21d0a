"""The dry-run text of a task graph (--plan-preview): steps with their dependencies, tools and criteria, the
order they run in (the scheduler's own `schedule_order`, so the preview is the run), warnings and errors."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.taskgraph.nodes import GraphError

if TYPE_CHECKING:  # annotations only, never imported at run time: graph imports this module to render itself
    from harness.taskgraph.graph import TaskGraph

ORDER_PREFIX = "Order: "


def render_preview(graph: "TaskGraph") -> str:
    lines = ["Plan preview (dry run: nothing executed)"]
    if graph.objectives:
        lines.append("Objectives: " + "; ".join(graph.objectives))
    if graph.explanation:
        lines.append("Explanation: " + graph.explanation)
    for task in graph.tasks:
        deps = ", ".join(graph.dependencies(task)) or "-"
        lines.append(f"  {task.id}: {task.question}  [after: {deps}]")
        for sq in task.sub_questions:
            lines.append(f"      ? {sq}")
        if task.affinity or task.tools:
            tools = sorted(set(task.tools) | set(task.affinity))
            lines.append("      tools: " + ", ".join(f"{t}={task.tool_score(t):.2f}" for t in tools))
        if task.criteria:
            lines.append("      done when: " + "; ".join(task.criteria))
    if graph.exit_criteria:
        lines.append("Exit criteria: " + "; ".join(graph.exit_criteria))
    try:
        lines.append(ORDER_PREFIX + " -> ".join(t.id for t in graph.schedule_order()))
    except GraphError as exc:
        lines.append(f"{ORDER_PREFIX}unavailable ({exc})")
    for warning in graph.warnings:
        lines.append(f"WARNING: {warning}")
    for error in graph.validate():
        lines.append(f"ERROR: {error}")
    return "\n".join(lines)
