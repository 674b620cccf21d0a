"""Which searches the research stage runs, and how new their results are.

`choose_queries` picks the first round's queries and names the rule that chose them (QUERY_RULES); `auto_queries`
makes queries from the task; `content_words`, `novelty` and `memory_match` are the word-overlap measures that stop
rounds and decide whether memory already answers the task; `research_cache_key` keys the research cache on the task
and its queries.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Iterable, Sequence

from harness.text import STOPWORDS

from ._chunker import find_paths
from .search import SearchResult, normalize_query

__all__ = [
    "content_words",
    "novelty",
    "memory_match",
    "QUERY_RULES",
    "choose_queries",
    "auto_queries",
    "research_cache_key",
    "letter_words",
    "usable_query",
    "dedupe_queries",
]

COVERED = 0.7  # a result whose content words are this much already known adds nothing new

_WORD = re.compile(r"[a-z0-9][a-z0-9_\-]{2,}")
_SKILL = re.compile(r"(?:^|\s)/[a-z][\w-]*")
_SAVE = re.compile(r"\b(?:and\s+)?(?:save|write|export)\w*\b.*$", re.IGNORECASE)


def content_words(text: str) -> frozenset[str]:
    """Lower-cased words of 3+ chars minus stop words: the unit of novelty and coverage."""
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in STOPWORDS)


def novelty(results: Sequence[SearchResult], seen_urls: Iterable[str], known: frozenset[str]) -> tuple[float, list[SearchResult]]:
    """Share of results that are new: an unseen URL and content words not mostly covered by `known`."""
    seen = set(seen_urls)
    fresh: list[SearchResult] = []
    for r in results:
        if r.url in seen:
            continue
        seen.add(r.url)
        words = content_words(f"{r.title} {r.snippet}")
        if words and len(words & known) / len(words) >= COVERED:
            continue
        fresh.append(r)
    return (len(fresh) / len(results) if results else 0.0), fresh


def memory_match(task: str, recalled_tasks: Iterable[str]) -> float:
    """How closely memory matched the task: the highest Jaccard overlap of content words between the task and a
    recalled observation's task (0.0 when nothing was recalled). RRF ranks say only which recalled item is
    best, not how good it is, so the match is measured on the texts themselves."""
    words = content_words(task)
    best = 0.0
    for other in recalled_tasks:
        theirs = content_words(other or "")
        union = words | theirs
        if union:
            best = max(best, len(words & theirs) / len(union))
    return best


# Which rule chose the first round's queries (ResearchResult.query_rule, the run record's research.query_rule):
QUERY_RULES = {
    "plan_queries": "the plan's search_queries",
    "plan_gaps": "the prior-knowledge gaps (the plan gave no queries)",
    "task": "queries from the task (no plan queries, no gaps, no prior-knowledge pass)",
    "no_gaps_strong_memory": "no search: no gaps and memory recalled a strong match",
    "no_gaps_searched": "no gaps but no strong memory match: queries from the task",
    "no_gaps_unchecked": "no search: no gaps and the caller supplied no memory match",
}


def choose_queries(
    task: str, plan_queries: Sequence[str], gaps: Sequence[str], prior_ran: bool, match: float | None,
    strong_match: float,
) -> tuple[list[str], str]:
    """(first round's queries, rule). Empty gaps after the prior-knowledge pass skip the search only when memory
    recalled a strong match (match >= strong_match); match None keeps the plan's word (direct callers)."""
    if plan_queries:
        return list(plan_queries), "plan_queries"
    if prior_ran and not gaps:
        if match is None:
            return [], "no_gaps_unchecked"
        if match > 0 and match >= strong_match:
            return [], "no_gaps_strong_memory"
        return auto_queries(task), "no_gaps_searched"
    if gaps:
        return list(gaps[:3]), "plan_gaps"
    return auto_queries(task), "task"


def auto_queries(task: str, n: int = 2) -> list[str]:
    """Queries from the task itself when the planner gave none: the cleaned task, then its keywords."""
    text = _SKILL.sub(" ", task)
    for path in find_paths(text):
        text = text.replace(path, " ")
    text = _SAVE.sub("", text)
    text = " ".join(text.split()).strip(" .,:;")[:160]
    if not text:
        return []
    out = [text]
    keywords = [w for w in re.findall(r"[A-Za-z0-9][\w.+#-]*", text) if w.lower() not in STOPWORDS and len(w) > 2]
    kw = " ".join(dict.fromkeys(keywords))[:120]
    if kw and normalize_query(kw) != normalize_query(text):
        out.append(kw)
    return out[:n]


def research_cache_key(task: str, queries: Sequence[str]) -> str:
    blob = json.dumps([normalize_query(task), sorted(normalize_query(q) for q in queries)])
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


_LETTER_WORD = re.compile(r"[^\W\d_]{3,}")


def letter_words(text: str) -> int:
    """How many words of 3+ letters (no digits, no punctuation) the text holds: what tells a real query or step
    question from the small model's 'A', '1.1.1.1' or '2026-11-23'."""
    return len(_LETTER_WORD.findall(str(text or "")))


def usable_query(query: str) -> bool:
    """A query worth a search: at least one word of 3+ letters."""
    return letter_words(query) >= 1


def dedupe_queries(queries: Iterable[str]) -> list[str]:
    """The queries with whitespace collapsed (at most 200 characters each), empty ones and repeats (by their
    normalised form) dropped, in first-seen order."""
    out: list[str] = []
    seen: set[str] = set()
    for q in queries:
        q = " ".join(str(q).split())[:200]
        if q and normalize_query(q) not in seen:
            seen.add(normalize_query(q))
            out.append(q)
    return out
