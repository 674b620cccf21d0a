"""Recall: the keyword query FTS5 runs, the k a caller may ask for, and reciprocal rank fusion of the vector and
keyword rankings."""

from __future__ import annotations

from typing import Sequence

from harness.text import STOPWORDS, fts_query

RRF_K = 60
MIN_K, MAX_K = 3, 5
FTS_MAX_TOKENS = 32


def clamp_k(k: int | None, default: int) -> int:
    """Requested k (or the config's) clamped to 3..5."""
    value = default if k is None else k
    return max(MIN_K, min(MAX_K, int(value)))


def rrf_merge(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> list[str]:
    """Reciprocal rank fusion: score(d) = sum over lists of 1 / (k + rank), rank from 1.

    Ties go to the id with the better best rank, then to the order of first appearance.
    """
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    first: dict[str, int] = {}
    seen = 0
    for ranking in rankings:
        for rank, doc in enumerate(dict.fromkeys(ranking), start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (k + rank)
            best[doc] = min(best.get(doc, rank), rank)
            if doc not in first:
                first[doc] = seen
                seen += 1
    return sorted(scores, key=lambda d: (-scores[d], best[d], first[d]))


def keyword_query(text: str) -> str:
    """The FTS5 expression keyword search runs for text: its words OR-ed, stop words left out (kept when there
    is nothing else), snake_case split, at most FTS_MAX_TOKENS; "" when nothing is searchable. bm25 ranks rows
    matching more of the words higher."""
    return fts_query(text, max_terms=FTS_MAX_TOKENS, stopwords=STOPWORDS, split_underscores=True)
