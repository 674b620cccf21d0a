"""Grounding: how many of an answer's claims the gathered sources back, by shared distinctive words or a
cited source URL."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from harness.text import (
    ANY_LIST as _ANY_LIST, HEADING as _HEADING, LINE_PREFIX as _LINE_PREFIX, STOPWORDS, URL as _URL,
    lines_outside_code as _lines_outside_code,
)


# Grounding compares the content words of a claim with the sources. Besides the stop words, the filler of advice
# prose makes no claim of its own ("an effective approach to consider"); a query may still want these words, so
# they are this score's own addition, not part of harness.text.STOPWORDS.
_CLAIM_FILLER = frozenset(
    """able allow allows approach approaches based better common commonly consider considering different effective
    effectively ensure example examples following good great help helps important include includes including key
    large new overall practice practices provide provided provides right several small specific useful
    various""".split()
)
_NOT_CONTENT = STOPWORDS | _CLAIM_FILLER


def _normalise(word: str) -> str:
    word = word.lower().strip(".-_+")
    if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word


def _content_words(text: str) -> set[str]:
    """Lower-cased content words of 4+ letters, a plural's "s" dropped; a stopword is checked before and after
    the drop ("always" must not survive as "alway")."""
    out = set()
    for raw in re.findall(r"[A-Za-z][A-Za-z0-9_.+-]*", text):
        if raw.lower().strip(".-_+") in _NOT_CONTENT:
            continue
        word = _normalise(raw)
        if len(word) >= 4 and word not in _NOT_CONTENT:
            out.add(word)
    return out


def source_text(source: Any) -> str:
    """Text of one gathered source: a string, a mapping, or an object with title/snippet/url/content."""
    if isinstance(source, str):
        return source
    fields = ("title", "snippet", "url", "content", "text", "body")
    if isinstance(source, Mapping):
        return " ".join(str(source.get(f) or "") for f in fields)
    return " ".join(str(getattr(source, f, "") or "") for f in fields)


def _claims(output: str) -> list[str]:
    claims: list[str] = []
    for line in _lines_outside_code(output):
        if not line.strip() or _HEADING.match(line):
            continue
        if _ANY_LIST.match(line):
            claims.append(_LINE_PREFIX.sub("", line))
            continue
        claims.extend(s for s in re.split(r"(?<=[.!?])\s+", line.strip()) if s)
    return claims


def grounding_score(output: str, sources: Iterable[Any], *, task: str = "") -> float | None:
    """Share of claims (list items, prose sentences) sharing at least two distinctive content words with the
    gathered sources (words of the task itself do not count), or citing a source URL; 0-10. None without sources."""
    if isinstance(sources, str):
        sources = [sources]
    texts = [source_text(s) for s in sources]
    texts = [t for t in texts if t.strip()]
    if not texts:
        return None
    if not isinstance(output, str) or not output.strip():
        return 0.0
    joined = "\n".join(texts)
    distinctive = _content_words(joined) - _content_words(task)
    urls = set(_URL.findall(joined))
    claims = [c for c in _claims(output) if len(_content_words(c)) >= 3 or _URL.search(c)]
    if not claims:
        return 0.0
    grounded = 0
    for claim in claims:
        if any(u.rstrip(").,") in claim for u in urls):
            grounded += 1
        elif len(_content_words(claim) & distinctive) >= 2:
            grounded += 1
    return round(10.0 * grounded / len(claims), 3)
