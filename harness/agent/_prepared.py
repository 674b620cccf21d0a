"""What `prepare` makes of a task, independent of the synthesis instruction: `Prepared`, its dict form (a
sweep caches it per task), and the empty context a run that failed before synthesis is recorded with."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from harness.planner import Plan, plan_from_dict
from harness.research import ResearchResult


@dataclass(frozen=True)
class Prepared:
    """Planning and research context of one task: independent of the synthesis instruction."""

    task: str
    clean_task: str
    skills: tuple[str, ...]
    unknown_skills: tuple[str, ...]
    memory_context: str
    memory_titles: tuple[str, ...]
    plan: Plan
    research: ResearchResult
    timings: dict[str, float] = field(default_factory=dict)
    llm_calls: int = 0
    memory_match: float = 0.0  # best recalled task's word overlap with this task (research.memory_match)
    # the Chrome trace of the stages that made this context, when they ran apart from the run that finishes it
    # (a sweep prepares each task once and reuses it): an MLflow trace of that run shows them before synthesis
    trace_path: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "clean_task": self.clean_task,
            "skills": list(self.skills),
            "unknown_skills": list(self.unknown_skills),
            "memory_context": self.memory_context,
            "memory_titles": list(self.memory_titles),
            "plan": self.plan.to_dict(),
            "research": self.research.to_dict(),
            "timings": dict(self.timings),
            "llm_calls": self.llm_calls,
            "memory_match": self.memory_match,
            "trace_path": self.trace_path,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Prepared":
        return cls(
            task=d["task"],
            clean_task=d["clean_task"],
            skills=tuple(d.get("skills", ())),
            unknown_skills=tuple(d.get("unknown_skills", ())),
            memory_context=d.get("memory_context", ""),
            memory_titles=tuple(d.get("memory_titles", ())),
            plan=plan_from_dict(d["plan"]),
            research=ResearchResult.from_dict(d["research"]),
            timings=dict(d.get("timings", {})),
            llm_calls=int(d.get("llm_calls", 0)),
            memory_match=float(d.get("memory_match", 0.0)),
            trace_path=d.get("trace_path"),
        )


_NO_RESEARCH = ResearchResult(
    context="", sources=(), quality=None, rounds=0, search_calls=0, from_cache=False, degraded_reason=None, flagged=0
)


def _empty_prepared(task: str) -> Prepared:
    return Prepared(
        task=task, clean_task=task, skills=(), unknown_skills=(), memory_context="", memory_titles=(),
        plan=Plan(), research=_NO_RESEARCH,
    )
