"""Reading the planner's replies: json -> dirtyjson -> regex -> safe defaults, every field cleaned and bounded,
and assembly steps filtered out of the subtasks. Nothing here raises."""

from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

from harness.text import (
    JSONParseError, extract_number_field, extract_string_field, extract_string_list, parse_json_object,
)

from ._plan import (
    MAX_FACTS,
    MAX_GAPS,
    MAX_ITEM_CHARS,
    MAX_QUERY_CHARS,
    MAX_SENTENCE_CHARS,
    MAX_SUBTASKS,
    Plan,
    PriorKnowledge,
)
from ._tasktype import (
    infer_task_type,
    normalize_complexity,
    normalize_sections,
    normalize_task_type,
    reconcile_task_type,
)

_ASSEMBLY_WORDS = re.compile(
    r"\b(synthesize|synthesise|assemble|combine|integrate|unify|merge|compile|write|create)\b",
    re.IGNORECASE,
)
_LIST_MARKER = re.compile(r"^(?:\d{1,2}[.)]|[-*•]|#+)\s+")
_EMPTYISH = {"", "none", "null", "n/a", "na", "nil", "empty", "-", "no", "nothing"}


# -- normalisation -----------------------------------------------------------------------------------


def _clean_text(value: Any, max_len: int) -> str:
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, (list, tuple)):
        value = " ".join(_clean_text(v, max_len) for v in value)
    elif isinstance(value, Mapping):
        value = " ".join(_clean_text(v, max_len) for v in value.values())
    text = " ".join(str(value).split())
    if text.lower().strip(".") in _EMPTYISH:
        return ""
    if len(text) > max_len:
        text = text[: max_len - 1].rstrip() + "…"
    return text


_ITEM_KEYS = ("query", "question", "task", "directive", "text", "title", "fact", "gap", "description")


def _clean_list(value: Any, max_items: int, max_len: int) -> tuple[str, ...]:
    """Any model value -> deduplicated tuple of clean strings (a lone string counts as a one-item list)."""
    if value is None or isinstance(value, bool):
        return ()
    if isinstance(value, (str, int, float)):
        value = [value]
    if isinstance(value, Mapping):
        value = list(value.values())
    out: list[str] = []
    seen: set[str] = set()
    for item in value if isinstance(value, (list, tuple)) else ():
        if isinstance(item, Mapping):
            item = next((item[k] for k in _ITEM_KEYS if k in item), " ".join(map(str, item.values())))
        text = _LIST_MARKER.sub("", _clean_text(item, max_len)).strip()
        key = text.lower().rstrip("?.!")
        if text and key not in seen:
            seen.add(key)
            out.append(text)
        if len(out) >= max_items:
            break
    return tuple(out)


def filter_subtasks(subtasks: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Seed 000's assembly-verb filter -> (kept research directives, dropped assembly steps)."""
    kept = tuple(s for s in subtasks if not _ASSEMBLY_WORDS.search(s))
    dropped = tuple(s for s in subtasks if _ASSEMBLY_WORDS.search(s))
    return kept, dropped


# -- parsing -----------------------------------------------------------------------------------------


def _unwrap(obj: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """{"plan": {...}} -> {...} when the outer object has none of the expected keys."""
    if any(k in obj for k in keys):
        return obj
    inner = [v for v in obj.values() if isinstance(v, dict) and any(k in v for k in keys)]
    return inner[0] if len(inner) == 1 else obj


def parse_prior_knowledge(text: str) -> PriorKnowledge:
    """Pass-1 reply -> PriorKnowledge; never raises (parser "defaults" when nothing could be read)."""
    errors: list[str] = []
    try:
        obj, parser = parse_json_object(text)
        obj = _unwrap(obj, ("known_facts", "gaps"))
        gaps_found = isinstance(obj.get("gaps"), (list, tuple, str))
        if not gaps_found:
            errors.append(f"prior knowledge: 'gaps' missing or not a list (got {obj.get('gaps')!r})")
        return PriorKnowledge(
            known_facts=_clean_list(obj.get("known_facts"), MAX_FACTS, MAX_ITEM_CHARS),
            gaps=_clean_list(obj.get("gaps"), MAX_GAPS, MAX_ITEM_CHARS),
            parser=parser,
            errors=tuple(errors),
            gaps_found=gaps_found,
        )
    except JSONParseError as exc:
        errors.append(f"prior knowledge: {exc}")
    text = text if isinstance(text, str) else ""
    gaps_found = re.search(r"""["']?gaps["']?\s*:\s*\[""", text) is not None
    facts = extract_string_list(text, "known_facts")
    gaps = extract_string_list(text, "gaps")
    if not (facts or gaps or gaps_found):
        return PriorKnowledge(parser="defaults", errors=tuple(errors))
    return PriorKnowledge(
        known_facts=_clean_list(facts, MAX_FACTS, MAX_ITEM_CHARS),
        gaps=_clean_list(gaps, MAX_GAPS, MAX_ITEM_CHARS),
        parser="regex",
        errors=tuple(errors),
        gaps_found=gaps_found and re.search(r"""["']?gaps["']?\s*:\s*\[[^\]]*\]""", text) is not None,
    )


_PLAN_KEYS = ("task_type", "complexity", "expected_sections", "search_queries", "prior_work_summary", "notes", "subtasks")


def _regex_fields(text: str) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for key in ("task_type", "complexity", "prior_work_summary", "notes"):
        value = extract_string_field(text, key)
        if value is not None:
            fields[key] = value
    for key in ("search_queries", "subtasks"):
        values = extract_string_list(text, key)
        if values:
            fields[key] = values
    number = extract_number_field(text, "expected_sections")
    if number is not None:
        fields["expected_sections"] = number
    return fields


def parse_plan(text: str, *, task: str = "", max_queries: int = 3) -> Plan:
    """Pass-2 reply -> normalised Plan; never raises. `task` feeds the task_type heuristic."""
    errors: list[str] = []
    try:
        obj, parser = parse_json_object(text)
        obj = _unwrap(obj, _PLAN_KEYS)
        if not any(k in obj for k in _PLAN_KEYS):
            errors.append(f"plan: JSON object has none of the plan keys (got keys {sorted(obj)[:8]})")
    except JSONParseError as exc:
        errors.append(f"plan: {exc}")
        obj = _regex_fields(text if isinstance(text, str) else "")
        parser = "regex" if obj else "defaults"
    return _build_plan(obj, parser, errors, task=task, max_queries=max_queries)


def _build_plan(obj: Mapping[str, Any], parser: str, errors: list[str], *, task: str, max_queries: int) -> Plan:
    if parser == "defaults":
        return Plan(task_type=infer_task_type(task), parser="defaults", errors=tuple(errors))
    task_type, note = normalize_task_type(obj.get("task_type"), task)
    task_type, count_note = reconcile_task_type(task_type, task)
    errors += [n for n in (note, count_note) if n]
    complexity, note = normalize_complexity(obj.get("complexity"))
    if note and "complexity" in obj:
        errors.append(note)
    subtasks, dropped = filter_subtasks(_clean_list(obj.get("subtasks"), 2 * MAX_SUBTASKS, MAX_ITEM_CHARS))
    return Plan(
        task_type=task_type,
        complexity=complexity,
        expected_sections=normalize_sections(obj.get("expected_sections")),
        search_queries=_clean_list(obj.get("search_queries"), max(max_queries, 0), MAX_QUERY_CHARS),
        prior_work_summary=_clean_text(obj.get("prior_work_summary"), MAX_SENTENCE_CHARS),
        notes=_clean_text(obj.get("notes"), MAX_SENTENCE_CHARS),
        subtasks=subtasks[:MAX_SUBTASKS],
        parser=parser,
        errors=tuple(errors),
        dropped_subtasks=dropped,
    )
