"""The planner: two fast structured calls before any search (seed 000).

Pass 1 (prior knowledge) asks the planner model what it already knows and what it would have to look up.
Pass 2 (plan) turns task, memory context, known facts and gaps into a seven-field plan. Both calls run at
cfg.temperature with bounded JSON schemas; replies are parsed json -> dirtyjson -> regex -> safe defaults.
`make_plan` never raises: backend and parse failures are recorded in `Plan.errors` and defaults returned.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from harness.config import PlannerConfig, apply_env, HarnessConfig
from harness.jsonparse import (
    JSONParseError,
    extract_number_field,
    extract_string_field,
    extract_string_list,
    parse_json_object,
)
from harness.security import DataMarker

TASK_TYPES = ("enumerated", "best_practices", "research")
COMPLEXITIES = ("low", "medium", "high")

MAX_FACTS = 5
MAX_GAPS = 3
MAX_SUBTASKS = 3
MAX_ITEM_CHARS = 160
MAX_QUERY_CHARS = 120
MAX_SENTENCE_CHARS = 240
MAX_SECTIONS = 50

_ASSEMBLY_WORDS = re.compile(
    r"\b(synthesize|synthesise|assemble|combine|integrate|unify|merge|compile|write|create)\b",
    re.IGNORECASE,
)
_LIST_MARKER = re.compile(r"^(?:\d{1,2}[.)]|[-*•]|#+)\s+")
_EMPTYISH = {"", "none", "null", "n/a", "na", "nil", "empty", "-", "no", "nothing"}
_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_TASK_TYPE_ALIASES = {
    "enumerated": "enumerated",
    "enumeration": "enumerated",
    "enumerate": "enumerated",
    "list": "enumerated",
    "listicle": "enumerated",
    "count": "enumerated",
    "numbered_list": "enumerated",
    "top_n": "enumerated",
    "best_practices": "best_practices",
    "best_practice": "best_practices",
    "bestpractices": "best_practices",
    "practices": "best_practices",
    "guidelines": "best_practices",
    "recommendations": "best_practices",
    "research": "research",
    "analysis": "research",
    "explanation": "research",
    "explain": "research",
    "report": "research",
    "overview": "research",
    "comparison": "research",
    "technical": "research",
}
_COMPLEXITY_ALIASES = {
    "low": "low",
    "simple": "low",
    "easy": "low",
    "trivial": "low",
    "basic": "low",
    "medium": "medium",
    "moderate": "medium",
    "mid": "medium",
    "normal": "medium",
    "average": "medium",
    "high": "high",
    "complex": "high",
    "hard": "high",
    "difficult": "high",
    "very_high": "high",
}
_ENUMERATED_TASK = re.compile(
    r"\b(?:list|top|name|give(?:\s+me)?|enumerate|provide|suggest|recommend)\s+(?:the\s+)?(?:\d+|"
    + "|".join(_NUMBER_WORDS)
    + r")\b|\b(?:\d+|"
    + "|".join(list(_NUMBER_WORDS)[2:])
    + r")\s+(?:\w+\s+){0,2}(?:ways|tips|tools|reasons|examples|ideas|steps|mistakes|patterns|practices|"
    r"libraries|techniques|strategies|methods|items|things|questions)\b",
    re.IGNORECASE,
)
_BEST_PRACTICES_TASK = re.compile(r"\bbest[\s-]+practices?\b|\bguidelines\b|\bdo'?s and don'?ts\b", re.IGNORECASE)


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


# -- schemas and prompts -----------------------------------------------------------------------------


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


def infer_task_type(task: str) -> str:
    """Task-text heuristic used when the model's task_type is missing or unknown."""
    if _ENUMERATED_TASK.search(task or ""):
        return "enumerated"
    if _BEST_PRACTICES_TASK.search(task or ""):
        return "best_practices"
    return "research"


def normalize_task_type(value: Any, task: str = "") -> tuple[str, str | None]:
    """-> (task_type, note); note explains a fallback to the heuristic."""
    key = re.sub(r"[\s\-/]+", "_", str(value or "").strip().lower())
    if key in _TASK_TYPE_ALIASES:
        return _TASK_TYPE_ALIASES[key], None
    guess = infer_task_type(task)
    return guess, f"task_type {value!r} unknown; inferred {guess!r} from the task text"


def reconcile_task_type(task_type: str, task: str) -> tuple[str, str | None]:
    """"enumerated" means the task states a count: a task that states one is enumerated whatever the model said,
    and "enumerated" without one becomes the text's reading (best_practices or research). -> (type, note)."""
    counted = bool(_ENUMERATED_TASK.search(task or ""))
    if counted and task_type != "enumerated":
        return "enumerated", f"task_type {task_type!r}, but the task states a count: 'enumerated'"
    if not counted and task_type == "enumerated" and task:
        guess = infer_task_type(task)
        return guess, f"task_type 'enumerated', but the task states no count: {guess!r}"
    return task_type, None


def normalize_complexity(value: Any) -> tuple[str, str | None]:
    key = re.sub(r"[\s\-]+", "_", str(value or "").strip().lower())
    if key in _COMPLEXITY_ALIASES:
        return _COMPLEXITY_ALIASES[key], None
    return "medium", f"complexity {value!r} unknown; using 'medium'"


def normalize_sections(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        text = value.strip().lower()
        m = re.search(r"\d+", text)
        value = int(m.group(0)) if m else _NUMBER_WORDS.get(text)
    if isinstance(value, int) and 1 <= value <= MAX_SECTIONS:
        return value
    return None


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


# -- the two passes ----------------------------------------------------------------------------------


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def _span(name: str):
    try:
        from harness.logger import current_tracer

        return current_tracer().span(name, cat="planner")
    except Exception:  # noqa: BLE001 - tracing must never break planning
        import contextlib

        return contextlib.nullcontext()


def assess_prior_knowledge(
    task: str, llm: Any, *, memory_context: str = "", cfg: PlannerConfig, seed: int | None = None
) -> PriorKnowledge:
    """Pass 1. Backend errors become a PriorKnowledge with parser "error"."""
    try:
        with _span("planner.prior_knowledge"):
            result = llm.chat(
                prior_knowledge_messages(task, memory_context),
                schema=prior_knowledge_schema(),
                temperature=cfg.temperature,
                max_tokens=cfg.max_tokens,
                seed=seed,
            )
    except Exception as exc:  # noqa: BLE001 - the planner never raises
        return PriorKnowledge(parser="error", errors=(f"prior knowledge call failed: {_describe(exc)}",))
    prior = parse_prior_knowledge(result.text)
    if getattr(result, "finish_reason", "stop") == "length":
        prior = dataclasses.replace(prior, errors=prior.errors + ("prior knowledge reply cut at max_tokens",))
    return prior


def make_plan(
    task: str,
    llm: Any,
    *,
    memory_context: str = "",
    cfg: PlannerConfig | None = None,
    seed: int | None = None,
    memory_strong: bool = False,
) -> Plan:
    """Run pass 1 (unless disabled) and pass 2; never raises.

    cfg=None uses PlannerConfig defaults with the environment folded in (HARNESS_SKIP_PRIOR_KNOWLEDGE).
    memory_strong: memory recalled a strong match for the task; only then do empty gaps drop the queries.
    """
    try:
        return _make_plan(task, llm, memory_context=memory_context, cfg=cfg, seed=seed, memory_strong=memory_strong)
    except Exception as exc:  # noqa: BLE001 - last line of defence for the never-raises contract
        return Plan(task_type=infer_task_type(task if isinstance(task, str) else ""), errors=(f"planner failed: {_describe(exc)}",))


def _make_plan(task: str, llm: Any, *, memory_context: str, cfg: PlannerConfig | None, seed: int | None,
               memory_strong: bool) -> Plan:
    cfg = cfg if cfg is not None else apply_env(HarnessConfig()).planner
    task = task or ""
    memory_context = memory_context or ""
    max_queries = max(int(cfg.max_queries), 0)
    prior: PriorKnowledge | None = None
    if cfg.prior_knowledge_enabled:
        prior = assess_prior_knowledge(task, llm, memory_context=memory_context, cfg=cfg, seed=seed)
    no_gaps = prior is not None and prior.usable and not prior.gaps
    covered = no_gaps and memory_strong
    errors: list[str] = list(prior.errors) if prior else []
    if no_gaps and not memory_strong:
        errors.append("prior knowledge found no gaps but memory recalled no strong match: the plan keeps its queries")

    try:
        with _span("planner.plan"):
            result = llm.chat(
                plan_messages(task, memory_context, prior, max_queries, covered=covered),
                schema=plan_schema(max_queries, allow_queries=not covered),
                temperature=cfg.temperature,
                max_tokens=cfg.max_tokens,
                seed=seed,
            )
        plan = parse_plan(result.text, task=task, max_queries=max_queries)
        if getattr(result, "finish_reason", "stop") == "length":
            errors.append("plan reply cut at max_tokens")
    except Exception as exc:  # noqa: BLE001 - the planner never raises
        plan = Plan(task_type=infer_task_type(task))
        errors.append(f"plan call failed: {_describe(exc)}")
    errors.extend(plan.errors)

    queries = plan.search_queries
    if covered:
        if queries:
            errors.append(f"prior knowledge found no gaps; dropped {len(queries)} search queries")
        queries = ()
    elif prior is not None and prior.gaps and not queries:
        queries = _clean_list(list(prior.gaps), max_queries, MAX_QUERY_CHARS)

    return dataclasses.replace(
        plan,
        search_queries=queries,
        known_facts=prior.known_facts if prior else (),
        gaps=prior.gaps if prior else (),
        prior_knowledge_ran=bool(prior and prior.usable),
        memory_strong=memory_strong,
        prior_parser=prior.parser if prior else "skipped",
        errors=tuple(errors),
    )
