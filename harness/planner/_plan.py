"""The plan: the seven-field `Plan` of pass 2, the `PriorKnowledge` of pass 1, and the limits both keep to."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from harness.config import TASK_TYPES

COMPLEXITIES = ("low", "medium", "high")

MAX_FACTS = 5
MAX_GAPS = 3
MAX_SUBTASKS = 3
MAX_ITEM_CHARS = 160
MAX_QUERY_CHARS = 120
MAX_SENTENCE_CHARS = 240
MAX_SECTIONS = 50


@dataclass(frozen=True)
class PriorKnowledge:
    """Pass 1: what the model already knows, and what it would have to look up.

    gaps_found is True only when the reply really carried a gaps array; an empty gaps list counts as
    "memory covers the task" only then.
    """

    known_facts: tuple[str, ...] = ()
    gaps: tuple[str, ...] = ()
    parser: str = "skipped"
    errors: tuple[str, ...] = ()
    gaps_found: bool = False

    @property
    def usable(self) -> bool:
        return self.parser in ("json", "dirtyjson", "regex") and self.gaps_found


@dataclass(frozen=True)
class Plan:
    """The seven-field plan plus pass-1 results and parse provenance.

    prior_knowledge_ran is True when pass 1 ran and returned a usable gaps list; with it and a strong memory
    match, empty gaps mean the memory context already covers the task and no search runs (search_queries is
    then empty). Without a strong match, empty gaps say only what the model believes: the plan keeps its queries.
    """

    task_type: str = "research"
    complexity: str = "medium"
    expected_sections: int | None = None
    search_queries: tuple[str, ...] = ()
    prior_work_summary: str = ""
    notes: str = ""
    subtasks: tuple[str, ...] = ()
    known_facts: tuple[str, ...] = ()
    gaps: tuple[str, ...] = ()
    prior_knowledge_ran: bool = False
    memory_strong: bool = False  # memory recalled a strong match for the task (research.memory_match)
    parser: str = "defaults"
    prior_parser: str = "skipped"
    errors: tuple[str, ...] = ()
    dropped_subtasks: tuple[str, ...] = ()

    @property
    def memory_covers_task(self) -> bool:
        """Pass 1 ran, answered cleanly and found nothing to look up, and memory recalled a strong match:
        synthesize without searching."""
        return self.prior_knowledge_ran and not self.gaps and self.memory_strong

    @property
    def search_needed(self) -> bool:
        return not self.memory_covers_task

    def synthesis_context(self) -> str:
        """The block prepended to the synthesis prompt; empty parts are left out."""
        parts: list[str] = []
        if self.prior_work_summary:
            parts.append(f"**Prior work:** {self.prior_work_summary}")
        if self.notes:
            parts.append(f"**Planner note:** {self.notes}")
        if self.known_facts:
            bullets = "\n".join(f"- {fact}" for fact in self.known_facts)
            parts.append(f"**Verified facts (no search needed):**\n{bullets}")
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    """Inverse of Plan.to_dict (cached plans, run records). Unknown keys are ignored; values are validated."""
    if not isinstance(data, Mapping):
        raise TypeError(f"plan_from_dict expected a mapping, got {type(data).__name__}")
    names = {f.name: f for f in dataclasses.fields(Plan)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        if key not in names:
            continue
        if isinstance(Plan.__dataclass_fields__[key].default, tuple):
            if isinstance(value, str) or not isinstance(value, Sequence):
                raise ValueError(f"plan field {key!r} expected a list of strings, got {value!r}")
            value = tuple(str(v) for v in value)
        kwargs[key] = value
    plan = Plan(**kwargs)
    if plan.task_type not in TASK_TYPES:
        raise ValueError(f"plan task_type expected one of {TASK_TYPES}, got {plan.task_type!r}")
    if plan.complexity not in COMPLEXITIES:
        raise ValueError(f"plan complexity expected one of {COMPLEXITIES}, got {plan.complexity!r}")
    return plan
