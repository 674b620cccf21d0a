"""Search providers: DuckDuckGo (ddgs), an offline local corpus (SQLite FTS5 / BM25), a TTL cache, a fallback.

`make_search(cfg, results_dir)` picks the stack from config:
- auto:  CachedSearch(FallbackSearch(DDGSProvider, LocalCorpusProvider))  (degrades offline in < 1 s)
- ddgs:  CachedSearch(DDGSProvider)
- local: LocalCorpusProvider  (fast already; not cached, so edits to a user corpus show at once)

The default local corpus is documentation that exists on any Python install: docstrings of a curated set of
standard-library modules and their public classes and functions, plus the descriptions of installed
distributions. It is built once (a few seconds) and cached at <results_dir>/search_index/corpus.sqlite with a
version stamp; users point `search.local_corpus` at their own folders of .md/.txt/.rst/.py/.html files.

- _protocol: `SearchResult`, the `SearchProvider` protocol, `SearchUnavailable`, `normalize_query`.
- _ddgs: `DDGSProvider`.
- _corpus: `LocalCorpusProvider` and the documents it indexes (`STDLIB_MODULES`, `PASSAGE_CHARS`).
- _cache: `CachedSearch`.
- _fallback: `FallbackSearch`, `reset_degradation`.
- _stack: `make_search`.
"""

from ._corpus import PASSAGE_CHARS, LocalCorpusProvider
from ._protocol import SearchProvider, SearchResult, SearchUnavailable, normalize_query
from ._stack import make_search

__all__ = [
    "SearchResult",
    "SearchProvider",
    "SearchUnavailable",
    "LocalCorpusProvider",
    "make_search",
    "normalize_query",
    "PASSAGE_CHARS",
]
