"""The planner's prompts and bounded JSON schemas, one pair per pass."""

from __future__ import annotations

from typing import Any, Sequence

from harness.security import DataMarker

from ._plan import (
    COMPLEXITIES,
    MAX_FACTS,
    MAX_GAPS,
    MAX_ITEM_CHARS,
    MAX_QUERY_CHARS,
    MAX_SECTIONS,
    MAX_SENTENCE_CHARS,
    MAX_SUBTASKS,
    TASK_TYPES,
    PriorKnowledge,
)


def _string_array(max_items: int, max_len: int) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string", "maxLength": max_len}, "maxItems": max_items}


def prior_knowledge_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "known_facts": _string_array(MAX_FACTS, MAX_ITEM_CHARS),
            "gaps": _string_array(MAX_GAPS, MAX_ITEM_CHARS),
        },
        "required": ["known_facts", "gaps"],
        "additionalProperties": False,
    }


def plan_schema(max_queries: int = 3, *, allow_queries: bool = True) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "task_type": {"type": "string", "enum": list(TASK_TYPES)},
            "complexity": {"type": "string", "enum": list(COMPLEXITIES)},
            "expected_sections": {
                "anyOf": [{"type": "integer", "minimum": 1, "maximum": MAX_SECTIONS}, {"type": "null"}]
            },
            "search_queries": _string_array(max(max_queries, 0) if allow_queries else 0, MAX_QUERY_CHARS),
            "prior_work_summary": {"type": "string", "maxLength": MAX_SENTENCE_CHARS},
            "notes": {"type": "string", "maxLength": MAX_SENTENCE_CHARS},
            "subtasks": _string_array(MAX_SUBTASKS, MAX_ITEM_CHARS),
        },
        "required": [
            "task_type",
            "complexity",
            "expected_sections",
            "search_queries",
            "prior_work_summary",
            "notes",
            "subtasks",
        ],
        "additionalProperties": False,
    }


PRIOR_SYSTEM = (
    "You assess what you already know before any web search is run. Reply with one JSON object and nothing "
    'else: {"known_facts": [...], "gaps": [...]}. known_facts: at most 5 short facts about the task that you '
    "are confident are true. gaps: at most 3 specific things you would need to look up to answer well. "
    "If the memory context already covers the task, return an empty gaps array: []."
)

PLAN_SYSTEM = (
    "You plan a research task before any search runs. Reply with one JSON object and nothing else, with "
    "exactly these keys:\n"
    '- "task_type": "enumerated" if the task states how many items it wants (a number: "List 5 ...", '
    '"7 mistakes", "top 10"); else "best_practices" if it asks for best practices, guidelines, recommended '
    "practices or do's and don'ts; else \"research\" (explain, compare, investigate, survey, summarize, how or "
    "why questions, reports, guides)\n"
    '- "complexity": "low", "medium" or "high"\n'
    '- "expected_sections": the number of items or sections the answer needs, or null\n'
    '- "search_queries": at most {max_queries} short web search queries{query_rule}\n'
    '- "prior_work_summary": one sentence on relevant past runs from the memory context, or ""\n'
    '- "notes": one actionable sentence for the writer (e.g. "include concrete tool names and versions")\n'
    '- "subtasks": [] unless the task explicitly spans several distinct domains (one topic stays [] however '
    "many items or sections it asks for); then 2-3 self-contained web research directives, one per domain. "
    "Never list synthesize, assemble, combine or write steps: assembly is done elsewhere."
)


def _bullets(items: Sequence[str]) -> str:
    return "\n".join(f"- {item}" for item in items) if items else "(none)"


def memory_block(task: str, memory_context: str, marker: DataMarker | None = None) -> str:
    """"Memory context:" and the observations of earlier runs in a data block (they were distilled from answers
    written from untrusted sources), or "(none)"; the marker defaults to the one derived from the task."""
    memory = (memory_context or "").strip()
    if not memory:
        return "Memory context:\n(none)"
    marker = marker if marker is not None else DataMarker.for_run(task)
    notice = f"{marker.notice()}\n\n" if marker.enabled else ""
    return f"{notice}Memory context:\n{marker.wrap(memory, 'memory')}"


def prior_knowledge_messages(task: str, memory_context: str = "", marker: DataMarker | None = None) -> list[dict[str, str]]:
    user = f"Task: {task}\n\n{memory_block(task, memory_context, marker)}"
    return [{"role": "system", "content": PRIOR_SYSTEM}, {"role": "user", "content": user}]


def plan_messages(
    task: str,
    memory_context: str = "",
    prior: PriorKnowledge | None = None,
    max_queries: int = 3,
    marker: DataMarker | None = None,
    *,
    covered: bool = False,
) -> list[dict[str, str]]:
    """covered: memory recalled a strong match and pass 1 found no gaps (ask for no queries)."""
    if covered:
        rule = ". Memory and prior knowledge already cover this task: return an empty array []"
    elif prior is not None and prior.gaps:
        rule = " that each target one of the knowledge gaps listed below"
    else:
        rule = " that would find the facts the answer needs"
    system = PLAN_SYSTEM.replace("{max_queries}", str(max_queries)).replace("{query_rule}", rule)
    user = [f"Task: {task}", memory_block(task, memory_context, marker)]
    if prior is not None and prior.parser != "skipped":
        user.append(f"Known facts:\n{_bullets(prior.known_facts)}")
        user.append(f"Knowledge gaps:\n{_bullets(prior.gaps)}")
    return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(user)}]
