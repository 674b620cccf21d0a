"""The constraint library: concrete, checkable rules for research writing that `add_constraint` draws from.

Each constraint has a topic key and a pattern that spots an instruction already saying something of the same
kind (so "Keep each item under 120 words." blocks adding "Keep each item under 80 words.").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mutators.base import normalize

__all__ = ["Constraint", "CONSTRAINTS", "constraints_for", "has_constraint", "missing_constraints"]

ALL_TYPES = frozenset({"enumerated", "best_practices", "research"})


@dataclass(frozen=True)
class Constraint:
    key: str
    text: str
    pattern: str
    task_types: frozenset[str] = ALL_TYPES

    def present_in(self, instruction: str) -> bool:
        flat = normalize(instruction).lower()
        return normalize(self.text).lower().rstrip(".") in flat or re.search(self.pattern, flat) is not None


def _c(key: str, text: str, pattern: str, *types: str) -> Constraint:
    return Constraint(key, text, pattern, frozenset(types) if types else ALL_TYPES)


CONSTRAINTS: tuple[Constraint, ...] = (
    _c("tools", "Name at least one concrete tool, library or version per item.", r"\bname .{0,30}(tool|librar)"),
    _c("code_example", "Give a one-line code example where it helps.", r"\bcode (example|snippet)"),
    _c("pitfall", "State one common pitfall per item.", r"\bpitfalls?\b"),
    _c("cite", "Cite the numbered sources [n] you rely on.", r"\bcite\b|\[n\]"),
    _c("item_length", "Keep each item under 80 words.", r"\bunder \d+ words\b|\bat most \d+ words\b"),
    _c("numbers", "Include at least one number per item: a version, a benchmark figure, a limit or a date.",
       r"\bat least one (number|figure|metric)"),
    _c("bold_name", "Start each item with its name in bold.", r"\bin bold\b|\*\*name\*\*"),
    _c("why", "Say in one sentence why each item matters.", r"\bwhy (each|it) (item )?matters\b"),
    _c("no_filler", "Avoid filler and generic advice; every sentence must carry a fact.",
       r"\bfiller\b|\bgeneric advice\b"),
    _c("uncertain", "Mark claims the sources do not support as uncertain.", r"\buncertain\b|\bunverified\b"),
    _c("tradeoff", "Name one trade-off or limitation for each recommendation.", r"\btrade-?offs?\b|\blimitations?\b"),
    _c("when_not", "Say when not to use each approach.", r"\bwhen not to\b"),
    _c("headings", "Use a Markdown heading for each major section.", r"\bheadings?\b"),
    _c("summary", "End with a two-sentence summary of the main takeaway.", r"\bsummary\b|\btakeaway\b"),
    _c("no_duplicates", "Do not repeat an item under a different name.", r"\b(do not|don't|never) repeat\b"),
    _c("exact_count", "Produce exactly the number of items the task asks for, numbered 1 to N.",
       r"\bexactly\b.{0,40}\bitems?\b|\bnumbered\b", "enumerated"),
    _c("distinct", "Make every item distinct in kind, not a variant of another item.", r"\bdistinct\b",
       "enumerated"),
    _c("steps", "Give concrete steps a practitioner can follow, in order.", r"\bsteps?\b.{0,30}\bfollow\b",
       "best_practices"),
    _c("config", "Show the relevant setting, flag or config key by its exact name.",
       r"\b(setting|flag|config key)\b", "best_practices"),
    _c("compare", "Compare at least two approaches on the same criteria.", r"\bcompare\b", "research",
       "best_practices"),
    _c("evidence", "Separate what the sources show from your own inference.", r"\binference\b|\bsources show\b",
       "research"),
    _c("open_questions", "List open questions the sources leave unanswered.", r"\bopen questions?\b", "research"),
)


def constraints_for(task_type: str) -> tuple[Constraint, ...]:
    """Constraints that fit a task type; an unknown task type gets the ones that fit every type."""
    if task_type not in ALL_TYPES:
        return tuple(c for c in CONSTRAINTS if c.task_types == ALL_TYPES)
    return tuple(c for c in CONSTRAINTS if task_type in c.task_types)


def has_constraint(instruction: str, constraint: Constraint) -> bool:
    return constraint.present_in(instruction)


def missing_constraints(instruction: str, task_type: str) -> tuple[Constraint, ...]:
    """Library constraints for task_type that the instruction does not already state, in library order."""
    return tuple(c for c in constraints_for(task_type) if not c.present_in(instruction))
