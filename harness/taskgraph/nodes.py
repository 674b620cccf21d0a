"""One step of a task graph, and the error for planner output that is not a task graph at all."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.taskgraph.placeholders import find_placeholders


class GraphError(ValueError):
    """Planner output that cannot be read as a task graph. `raw` keeps the original text for display."""

    def __init__(self, message: str, raw: Any = None) -> None:
        super().__init__(message)
        self.raw = raw if isinstance(raw, str) or raw is None else repr(raw)


@dataclass(frozen=True)
class TaskNode:
    """One step: a research question with its tools, tool affinity in [0, 1] (tool -> score), dependencies and
    completion criteria."""

    id: str
    question: str
    sub_questions: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    affinity: dict[str, float] = field(default_factory=dict)
    depends_on: tuple[str, ...] = ()
    criteria: tuple[str, ...] = ()

    def __hash__(self) -> int:
        return hash((self.id, self.question, self.depends_on))

    @property
    def placeholders(self) -> tuple[str, ...]:
        """Ids referenced by #E<n> placeholders in the question and sub-questions, in order."""
        return find_placeholders(" ".join((self.question,) + self.sub_questions))

    def tool_score(self, tool: str) -> float:
        """The planner's affinity for `tool`; a listed tool without a score counts 1, an unlisted one 0."""
        if tool in self.affinity:
            return self.affinity[tool]
        return 1.0 if tool in self.tools else 0.0

    @property
    def used_tools(self) -> tuple[str, ...]:
        """The tools this step uses: listed or scored, with a score above 0, in the order the planner gave."""
        return tuple(t for t in dict.fromkeys((*self.tools, *self.affinity)) if self.tool_score(t) > 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "question": self.question,
            "sub_questions": list(self.sub_questions),
            "tools": list(self.tools),
            "affinity": dict(self.affinity),
            "depends_on": list(self.depends_on),
            "criteria": list(self.criteria),
        }
