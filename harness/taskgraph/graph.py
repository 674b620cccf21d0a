"""The task graph: steps plus the plan's objectives, exit criteria and explanation; lookups, the dependency
edges (declared plus #E placeholders), validation, and the views other rooms compute on it (order, schedule,
telemetry, preview)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from harness.taskgraph import order, schedule
from harness.taskgraph.ids import canonical_id
from harness.taskgraph.nodes import GraphError, TaskNode
from harness.taskgraph.parse import parse_planner_output
from harness.taskgraph.preview import render_preview


@dataclass(frozen=True)
class TaskGraph:
    tasks: tuple[TaskNode, ...] = ()
    objectives: tuple[str, ...] = ()
    exit_criteria: tuple[str, ...] = ()
    explanation: str = ""
    warnings: tuple[str, ...] = ()

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def from_planner_output(cls, data: Any) -> "TaskGraph":
        """JSON text (fences/prose tolerated), a mapping (tasks under tasks/steps/plan) or a list of steps.

        Raises GraphError (with the raw input kept) only when no list of steps can be found at all;
        structural problems are reported by `validate()`.
        """
        return cls(*parse_planner_output(data))

    @classmethod
    def from_subtasks(cls, subtasks: Iterable[str], *, objective: str = "") -> "TaskGraph":
        """Independent steps E1..En from a planner's subtask list."""
        tasks = tuple(TaskNode(id=f"E{i + 1}", question=q) for i, q in enumerate(s for s in subtasks if s.strip()))
        return cls(tasks=tasks, objectives=(objective,) if objective else ())

    # -- lookups -----------------------------------------------------------------------------------

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(t.id for t in self.tasks)

    def get(self, task_id: str) -> TaskNode:
        tid = canonical_id(task_id)
        for task in self.tasks:
            if task.id == tid:
                return task
        raise KeyError(f"no task {task_id!r}; declared ids: {', '.join(self.ids) or '(none)'}")

    def unique_tasks(self) -> list[TaskNode]:
        """The steps, the first of each id only (duplicates are a validation error)."""
        seen: set[str] = set()
        out = []
        for t in self.tasks:
            if t.id not in seen:
                seen.add(t.id)
                out.append(t)
        return out

    def dependencies(self, task: TaskNode) -> tuple[str, ...]:
        """Declared dependencies plus ids referenced by placeholders (a step needs what it quotes)."""
        declared = set(self.ids)
        extra = [p for p in task.placeholders if p in declared and p != task.id and p not in task.depends_on]
        return task.depends_on + tuple(dict.fromkeys(extra))

    def edges(self) -> dict[str, tuple[str, ...]]:
        """id -> the declared ids it depends on (self-references and unknown ids left out)."""
        declared = set(self.ids)
        return {t.id: tuple(d for d in self.dependencies(t) if d in declared and d != t.id) for t in self.unique_tasks()}

    # -- validation --------------------------------------------------------------------------------

    def validate(self) -> list[str]:
        """Every structural problem, as messages; [] when the graph is runnable as planned."""
        errors: list[str] = []
        if not self.tasks:
            errors.append("plan has no steps")
        position: dict[str, int] = {}
        for i, task in enumerate(self.tasks):
            if task.id in position:
                errors.append(f"duplicate task id {task.id!r} (steps {position[task.id] + 1} and {i + 1})")
            else:
                position[task.id] = i
            if not task.question.strip():
                errors.append(f"task {task.id} has no question")
        for i, task in enumerate(self.tasks):
            for dep in task.depends_on:
                if dep == task.id:
                    errors.append(f"task {task.id} depends on itself")
                elif dep not in position:
                    errors.append(f"task {task.id} depends on unknown id {dep!r}")
                elif position[dep] >= i:
                    errors.append(f"task {task.id} depends on {dep}, which is not an earlier step")
            for ref in dict.fromkeys(task.placeholders):
                if ref not in position:
                    errors.append(f"task {task.id} references #{ref}, which is not a declared id")
                elif position[ref] >= i:
                    errors.append(f"task {task.id} references #{ref}, which is not an earlier step")
        cycle = order.find_cycle(self.edges())
        if cycle:
            errors.append("dependency cycle: " + " -> ".join(cycle))
        return errors

    # -- order and schedule ------------------------------------------------------------------------

    def topological_order(self) -> list[TaskNode]:
        """Every step after its dependencies, smallest id first among ready steps. GraphError on a cycle."""
        nodes = {t.id: t for t in self.unique_tasks()}
        return [nodes[tid] for tid in order.topological_order(self.edges())]

    def depths(self) -> dict[str, int]:
        """Longest dependency chain above each step (roots 0). GraphError on a cycle."""
        return order.depths(self.edges())

    def schedule_key(self, task: TaskNode, done: Iterable[str] = (), preferred_tools: Sequence[str] = ()) -> tuple:
        """Seed 001's ranking of `task` (see harness.taskgraph.schedule.schedule_key)."""
        return schedule.schedule_key(task, set(done), tuple(preferred_tools), self.edges(), self.depths())

    def ready(self, done: Iterable[str] = (), preferred_tools: Sequence[str] = ()) -> list[TaskNode]:
        """Steps not done whose dependencies are all done, best first."""
        return schedule.ready(self, done, preferred_tools)

    def schedule_order(self, first_tools: Sequence[str] = ()) -> list[TaskNode]:
        """The order the orchestrator runs the steps in and --plan-preview prints (seed 001)."""
        return schedule.schedule_order(self, first_tools)

    # -- reporting ---------------------------------------------------------------------------------

    def telemetry(self) -> dict[str, Any]:
        edges = self.edges()
        scores = [s for t in self.tasks for s in t.affinity.values()]
        try:
            max_depth = max(self.depths().values(), default=-1) + 1
        except GraphError:
            max_depth = None
        return {
            "task_count": len(self.tasks),
            "edge_count": sum(len(d) for d in edges.values()),
            "max_depth": max_depth,
            "root_count": sum(1 for d in edges.values() if not d),
            "mean_affinity": round(sum(scores) / len(scores), 4) if scores else None,
            "tools": sorted({tool for t in self.tasks for tool in (*t.tools, *t.affinity)}),
            "objective_count": len(self.objectives),
            "exit_criteria_count": len(self.exit_criteria),
            "error_count": len(self.validate()),
            "warning_count": len(self.warnings),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": [t.to_dict() for t in self.tasks],
            "objectives": list(self.objectives),
            "exit_criteria": list(self.exit_criteria),
            "explanation": self.explanation,
            "warnings": list(self.warnings),
        }

    def preview(self) -> str:
        """Human-readable plan for --plan-preview: steps, the order they run in, warnings and errors."""
        return render_preview(self)
