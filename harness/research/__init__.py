"""Stage 5, research with search: (task, plan) -> a bounded research context with numbered sources and the seed
002 research-quality record. Search rounds with a novelty stop and rolling compression, files named in the task,
URL enrichment; the search providers are the subpackage `search`.

- gather: `gather_research`, `ResearchResult`, `ResearchQuality`: the stage itself (a public module: the
  injection benchmark, bench/security/injection.py, runs it with its scan_text swapped for a pass-through).
- _queries: which queries a round asks (`choose_queries`, `QUERY_RULES`), novelty, `memory_match`, the cache key.
- _compress: the compressor-model call that folds a round into the knowledge state (`COMPRESS_SCHEMA`).
- _chunker: files named in a task, read, split into chunks and ranked (`find_paths`, `read_file_context` ...).
- search: the providers (DuckDuckGo, the local corpus, the cache, the fallback) and `make_search`.
"""

from ._chunker import split_chunks
from ._queries import choose_queries, letter_words, memory_match
from .gather import ResearchQuality, ResearchResult, gather_research

__all__ = [
    "ResearchQuality",
    "ResearchResult",
    "gather_research",
    "choose_queries",
    "letter_words",
    "memory_match",
    "split_chunks",
]
