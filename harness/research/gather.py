"""Stage 5, gather_research: search rounds with a novelty stop, rolling compression, files, URL enrichment.

One call turns (task, plan) into a bounded research context string with numbered sources, plus the seed 002
research-quality record (last query, relevance, coverage, confidence, notes, strong / inconclusive):

1. RESEARCH_CACHE reuse: the same task and queries give back the stored context (experiments gather once).
2. Queries (`choose_queries`, recorded as query_rule): the planner's; else, after a prior-knowledge pass with no
   gaps, no search when memory recalled a strong match for the task (`memory_match` >= strong_memory_match) and
   queries made from the task when it did not; else the gaps; else queries made from the task.
3. Rounds (bounded by max_rounds): search, scan every result for prompt injection, measure novelty against what
   is known; a round adding less than novelty_threshold stops the loop. Each accepted round is compressed by the
   compressor model into a knowledge state with quality scores. Strong research (confidence >=
   strong_confidence) ends the rounds; weak research after max_weak_attempts rounds ends them as "research
   inconclusive". Later rounds use the compressor's suggested next query, then unused gaps.
4. File paths in the task are read through the chunker, only under the allowed roots.
5. The top novel http(s) URLs are fetched (SSRF-checked), scanned and excerpted; failures are recorded.

Query choice and the novelty measures live in _queries, the compressor call in _compress; this module runs the
stage.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from harness.config import ResearchConfig
from harness.security import (
    FetchError,
    ScanResult,
    UnsafePath,
    UnsafeURL,
    fetch_url,
    flag_record,
    safe_path,
    scan_text,
)
from harness.stores import atomic_write_json
from harness.tracing import current_tracer

from ._chunker import CONVERT_SUFFIXES, MAX_READ_BYTES, find_paths, read_file_context, select_chunks, split_chunks
from ._compress import SNIPPET_CHARS, compress_round
from ._queries import (
    QUERY_RULES,
    auto_queries,
    research_cache_key,
    choose_queries,
    content_words,
    dedupe_queries,
    novelty,
    usable_query,
)
from .search import SearchProvider, SearchResult, normalize_query

log = logging.getLogger("harness.research")

__all__ = ["ResearchQuality", "ResearchResult", "gather_research"]

PAGE_CHARS = 1200


@dataclass(frozen=True)
class ResearchQuality:
    """Seed 002: how good the research is, carried into synthesis and the run record."""

    last_query: str = ""
    relevance: float = 0.0
    coverage: float = 0.0
    confidence: float = 0.0
    notes: str = ""
    strong: bool = False
    inconclusive: bool = False


@dataclass(frozen=True)
class ResearchResult:
    context: str
    sources: tuple[SearchResult, ...]
    quality: ResearchQuality | None
    rounds: int
    search_calls: int
    from_cache: bool
    degraded_reason: str | None
    flagged: int
    stop_reason: str = ""
    files: tuple[str, ...] = ()
    enriched: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    flags: tuple[dict[str, Any], ...] = ()  # one per flagged text: patterns, source URL or path, excerpt
    query_rule: str = ""  # which rule chose the first round's queries: one of QUERY_RULES
    memory_match: float | None = None  # best recalled task's word overlap with this task (None: not supplied)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ResearchResult":
        d = dict(data)
        d["sources"] = tuple(SearchResult(**s) for s in d.get("sources", ()))
        if d.get("quality") is not None:
            d["quality"] = ResearchQuality(**d["quality"])
        for name in ("files", "enriched", "errors", "flags"):
            d[name] = tuple(d.get(name, ()))
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})



# -- the stage -------------------------------------------------------------------------------------------


@dataclass
class _State:
    sources: list[SearchResult] = field(default_factory=list)
    seen_urls: set[str] = field(default_factory=set)
    known: frozenset[str] = frozenset()
    knowledge: str = ""
    used_queries: list[str] = field(default_factory=list)
    search_calls: int = 0
    flagged: int = 0
    errors: list[str] = field(default_factory=list)
    flags: list[dict[str, Any]] = field(default_factory=list)

    def note(self, scanned: ScanResult, source: str) -> str:
        """Count and record a scanned text when it was flagged; return its neutralised text."""
        if scanned.flagged:
            self.flagged += 1
            self.flags.append(flag_record(scanned, source))
        return scanned.text


def _plan_attr(plan: Any, name: str, default: Any) -> Any:
    return getattr(plan, name, default) if plan is not None else default



def _sanitise(result: SearchResult) -> tuple[SearchResult, bool]:
    clean, flag = _scan_result(result)
    return clean, flag is not None


def _scan_result(result: SearchResult) -> tuple[SearchResult, ScanResult | None]:
    """The result with title and snippet neutralised, and the scan that flagged it (None when clean)."""
    title, snippet = scan_text(result.title), scan_text(result.snippet)
    clean = dataclasses.replace(result, title=title.text[:300], snippet=snippet.text)
    if not (title.flagged or snippet.flagged):
        return clean, None
    patterns = tuple(sorted(set(title.patterns) | set(snippet.patterns)))
    return clean, ScanResult(True, patterns, snippet.text, title.passages + snippet.passages)


def _run_queries(queries: Sequence[str], search: SearchProvider, max_results: int, st: _State) -> list[SearchResult]:
    found: list[SearchResult] = []
    for q in queries:
        st.used_queries.append(q)
        st.search_calls += 1
        try:
            results = search.search(q, max_results)
        except Exception as exc:  # a provider failure is recorded, the round goes on with other queries
            st.errors.append(f"search {q[:60]!r}: {type(exc).__name__}: {str(exc)[:160]}")
            continue
        for r in results:
            clean, scanned = _scan_result(r)
            if scanned is not None:
                st.note(scanned, r.url)
            found.append(clean)
    return found


def gather_research(
    task: str,
    plan: Any,
    *,
    search: SearchProvider,
    compressor: Any,
    cfg: ResearchConfig,
    cache_dir: Path,
    max_results: int = 5,
    fetch: Callable[[str], str] | None = None,
    memory_match: float | None = None,
) -> ResearchResult:
    """Research context for one task (see module docstring). Never raises for search/fetch/file failures.

    memory_match: how closely memory matched the task (`memory_match`; the agent passes it, 0.0 when nothing
    was recalled). It decides what empty gaps mean (`choose_queries`); None keeps the plan's word.
    """
    plan_queries = dedupe_queries(_plan_attr(plan, "search_queries", ()) or ())
    gaps = dedupe_queries(_plan_attr(plan, "gaps", ()) or ())
    prior_ran = bool(_plan_attr(plan, "prior_knowledge_ran", False))
    queries, rule = choose_queries(task, plan_queries, gaps, prior_ran, memory_match, cfg.strong_memory_match)
    # keyed on the queries chosen, so a skipped search and a searched one for the same task never share an entry
    key = research_cache_key(task, queries)
    cache_file = Path(cache_dir) / f"{key}.json"
    if cfg.reuse_cache and cache_file.exists():
        try:
            cached = ResearchResult.from_dict(json.loads(cache_file.read_text(encoding="utf-8")))
            match = None if memory_match is None else round(float(memory_match), 3)
            return dataclasses.replace(cached, from_cache=True, search_calls=0, query_rule=rule, memory_match=match)
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("research cache %s unreadable (%s); gathering afresh", cache_file, exc)

    st = _State()
    st.known = content_words(" ".join(_plan_attr(plan, "known_facts", ()) or ()))
    file_blocks, files = _file_context(task, cfg, st)

    spare = dedupe_queries([*gaps, *auto_queries(task)])

    quality: ResearchQuality | None = None
    rounds = 0
    weak = 0
    stop = f"no queries: {QUERY_RULES[rule]}" if not queries else ""
    tracer = current_tracer()
    round_queries = queries
    while round_queries and rounds < cfg.max_rounds:
        rounds += 1
        with tracer.span("research.round", cat="research", round=rounds, queries=list(round_queries)) as span:
            results = _run_queries(round_queries, search, max_results, st)
            nov, fresh = novelty(results, st.seen_urls, st.known)
            span.update(results=len(results), novelty=round(nov, 3), flagged=st.flagged)
            st.seen_urls.update(r.url for r in results)
            if not results:
                stop = f"no results in round {rounds}"
                span.update(accepted=False)
                break
            if nov < cfg.novelty_threshold:
                stop = f"novelty {nov:.2f} < {cfg.novelty_threshold:g} in round {rounds}"
                span.update(accepted=False)
                break
            st.sources.extend(fresh)
            st.known = st.known | frozenset().union(*(content_words(f"{r.title} {r.snippet}") for r in fresh))
            comp = compress_round(task, st.knowledge, fresh, compressor, cfg.compress)
            st.knowledge = comp.knowledge
            strong = comp.confidence >= cfg.strong_confidence
            quality = ResearchQuality(
                last_query=round_queries[-1],
                relevance=comp.relevance,
                coverage=comp.coverage,
                confidence=comp.confidence,
                notes=comp.notes,
                strong=strong,
            )
            span.update(accepted=True, confidence=comp.confidence, strong=strong, parser=comp.parser)
            if strong:
                stop = f"strong research (confidence {comp.confidence:.2f} >= {cfg.strong_confidence:g})"
                break
            weak += 1
            if weak >= cfg.max_weak_attempts:
                stop = f"weak research after {weak} attempts"
                break
            next_q = dedupe_queries(q for q in (comp.next_query, *spare) if usable_query(q))
            used = {normalize_query(q) for q in st.used_queries}
            round_queries = [q for q in next_q if normalize_query(q) not in used][:1]
            if not round_queries:
                stop = "no new queries"
    if not stop and queries:
        stop = f"max rounds ({cfg.max_rounds}) reached"

    if queries and (quality is None or not quality.strong):
        base = quality or ResearchQuality()
        base = dataclasses.replace(base, last_query=st.used_queries[-1] if st.used_queries else base.last_query)
        detail = f"{stop}; confidence {base.confidence:.2f} < {cfg.strong_confidence:g} after {max(rounds, 1)} round(s)"
        if st.errors and not st.sources:
            detail += f"; {st.errors[-1]}"
        notes = f"research inconclusive: {detail}" + (f" ({base.notes})" if base.notes else "")
        quality = dataclasses.replace(base, notes=notes[:400], inconclusive=True, strong=False)
    elif not queries:
        quality = ResearchQuality(notes=_NO_SEARCH_NOTES.get(rule, f"no search: {QUERY_RULES[rule]}"))

    enriched = _enrich(task, st.sources, cfg, st, fetch)
    degraded = getattr(search, "degraded_reason", None)
    context = _assemble(st, quality, file_blocks, enriched, cfg.max_context_chars)
    result = ResearchResult(
        context=context,
        sources=tuple(st.sources),
        quality=quality,
        rounds=rounds,
        search_calls=st.search_calls,
        from_cache=False,
        degraded_reason=degraded,
        flagged=st.flagged,
        stop_reason=stop,
        files=tuple(files),
        enriched=tuple(enriched),
        errors=tuple(st.errors),
        flags=tuple(st.flags),
        query_rule=rule,
        memory_match=None if memory_match is None else round(float(memory_match), 3),
    )
    _store(cache_file, result)
    return result


_NO_SEARCH_NOTES = {
    "no_gaps_unchecked": "no search: the prior-knowledge pass found no gaps",
    "no_gaps_strong_memory": "no search: the prior-knowledge pass found no gaps and memory recalled a strong match",
}


def _file_context(task: str, cfg: ResearchConfig, st: _State) -> tuple[list[str], list[str]]:
    roots = cfg.allowed_roots or [os.getcwd()]
    blocks: list[str] = []
    files: list[str] = []
    budget = max(cfg.max_context_chars // 3, 500)
    for raw in find_paths(task):
        try:
            path = safe_path(raw, roots)
        except UnsafePath as exc:
            st.errors.append(f"file {exc}")
            continue
        if not path.is_file():
            st.errors.append(f"file {raw!r}: not found")
            continue
        try:
            text = read_file_context(path, task, max_chars=budget)
        except Exception as exc:  # unreadable or unconvertible file: recorded, research continues
            st.errors.append(f"file {raw!r}: {type(exc).__name__}: {str(exc)[:160]}")
            continue
        size = path.stat().st_size
        if size > MAX_READ_BYTES and path.suffix.lower() not in CONVERT_SUFFIXES:
            st.errors.append(f"file {raw!r}: {size} bytes, only the first {MAX_READ_BYTES} were read")
        blocks.append(st.note(scan_text(text), str(path)))
        files.append(str(path))
    return blocks, files


def _enrich(
    task: str, sources: Sequence[SearchResult], cfg: ResearchConfig, st: _State, fetch: Callable[[str], str] | None
) -> dict[str, str]:
    pages: dict[str, str] = {}
    if cfg.enrich_urls <= 0:
        return pages
    fetcher = fetch or (lambda url: fetch_url(url, timeout=8.0, max_bytes=1_500_000))
    for r in sources:
        if len(pages) >= cfg.enrich_urls:
            break
        if not r.url.lower().startswith(("http://", "https://")):
            continue
        with current_tracer().span("research.enrich", cat="research", url=r.url[:200]) as span:
            try:
                text = fetcher(r.url)
            except (UnsafeURL, FetchError) as exc:
                st.errors.append(f"enrich {r.url[:100]}: {exc}"[:300])
                span.update(ok=False)
                continue
            except Exception as exc:  # a converter or socket error must not end the run
                st.errors.append(f"enrich {r.url[:100]}: {type(exc).__name__}: {str(exc)[:160]}")
                span.update(ok=False)
                continue
            scanned = scan_text(text)
            st.note(scanned, r.url)
            chosen, _ = select_chunks(split_chunks(scanned.text, 600), task, PAGE_CHARS)
            excerpt = " [...] ".join(c for _, c in chosen)
            span.update(ok=True, chars=len(excerpt), flagged=scanned.flagged)
            if excerpt:
                pages[r.url] = excerpt
    return pages


def _assemble(
    st: _State, quality: ResearchQuality | None, files: Sequence[str], pages: Mapping[str, str], limit: int
) -> str:
    parts: list[str] = []
    if quality is not None and quality.inconclusive:
        parts.append(f"Note: {quality.notes}")
    if st.knowledge:
        parts.append(f"## Research summary\n{st.knowledge}")
    if files:
        parts.append("## Files\n" + "\n\n".join(files))
    head = "\n\n".join(parts)
    if len(head) > limit * 2 // 3:
        head = head[: limit * 2 // 3] + " [...]"
    lines = [head, "## Sources"] if head else ["## Sources"]
    used = sum(len(x) + 2 for x in lines)
    for i, r in enumerate(st.sources, 1):
        entry = f"[{i}] {r.title} ({r.url})\n{r.snippet[:SNIPPET_CHARS]}"
        if r.url in pages:
            entry += f"\nPage excerpt: {pages[r.url]}"
        if used + len(entry) + 2 > limit:
            short = f"[{i}] {r.title} ({r.url})"
            if used + len(short) + 2 > limit:
                break
            entry = short
        lines.append(entry)
        used += len(entry) + 2
    if not st.sources:
        lines.pop(lines.index("## Sources"))
    return "\n\n".join(lines)[:limit]


def _store(path: Path, result: ResearchResult) -> None:
    try:
        atomic_write_json(path, result.to_dict(), ensure_ascii=False)
    except OSError as exc:
        log.warning("could not write research cache %s: %s", path, exc)
