"""Which step runs next: seed 001's deterministic scheduler, the one order both `--plan-preview` prints and the
orchestrator executes.

Seed 001 ("Planner Telemetry Contract", section "Scheduling affinity"):

    `TaskCoordinator.schedule_next` orders pending tasks by readiness, whether a preferred tool matches the
    planner's affinity map, highest affinity score, dependency depth, pending dependency count, then task
    identifier. The deterministic ordering keeps scheduler behaviour reproducible while respecting the
    planner's intent about which tools should lead execution.

Here the preferred tools are the tools of the step scheduled just before (a step that uses the same tool as its
predecessor goes next: tool affinity with the previous step); before the first step they are the caller's
`first_tools` (none by default). `schedule_key` is that ranking, field for field; `schedule_order` applies it
one step at a time until every step is placed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Collection, Iterable, Mapping, Sequence

from harness.taskgraph.ids import natural_key
from harness.taskgraph.nodes import TaskNode

if TYPE_CHECKING:  # annotations only, never imported at run time: graph imports this module to order itself
    from harness.taskgraph.graph import TaskGraph


def schedule_key(
    task: TaskNode,
    done: Collection[str],
    preferred_tools: Sequence[str],
    edges: Mapping[str, Sequence[str]],
    depths: Mapping[str, int],
) -> tuple:
    """Seed 001's ranking of one pending step, smallest first:

    1. readiness: every dependency done (ready steps first);
    2. whether one of the preferred tools matches the step's affinity map (score above 0);
    3. highest affinity score: for the matched preferred tools, else the step's own best score;
    4. dependency depth (shallower first);
    5. pending dependency count (fewer first);
    6. task id (natural order: E2 before E10).
    """
    pending = [d for d in edges.get(task.id, ()) if d not in done]
    matched = [t for t in preferred_tools if task.tool_score(t) > 0]
    scored = matched or list(task.used_tools)
    affinity = max((task.tool_score(t) for t in scored), default=0.0)
    return (bool(pending), not matched, -affinity, depths[task.id], len(pending), natural_key(task.id))


def ready(graph: "TaskGraph", done: Iterable[str] = (), preferred_tools: Sequence[str] = ()) -> list[TaskNode]:
    """Steps not done whose dependencies are all done, best first by `schedule_key`."""
    done_set = set(done)
    edges, depths = graph.edges(), graph.depths()
    steps = [t for t in graph.unique_tasks() if t.id not in done_set and all(d in done_set for d in edges[t.id])]
    return sorted(steps, key=lambda t: schedule_key(t, done_set, preferred_tools, edges, depths))


def schedule_order(graph: "TaskGraph", first_tools: Sequence[str] = ()) -> list[TaskNode]:
    """The order the steps run in (and `--plan-preview` prints): repeatedly the best step by `schedule_key`,
    preferring the tools of the step placed before it. Deterministic; GraphError on a cycle."""
    edges, depths = graph.edges(), graph.depths()
    remaining = list(graph.unique_tasks())
    done: set[str] = set()
    preferred: Sequence[str] = tuple(first_tools)
    out: list[TaskNode] = []
    while remaining:
        best = min(remaining, key=lambda t: schedule_key(t, done, preferred, edges, depths))
        out.append(best)
        done.add(best.id)
        remaining.remove(best)
        preferred = best.used_tools
    return out
