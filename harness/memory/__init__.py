"""Persistent memory of finished runs: observations in ChromaDB (semantic) and SQLite FTS5 (keyword).

`get_context` asks both indices and merges the two rankings with reciprocal rank fusion; `compress_and_store`
has the planner-role model compress a finished run into an observation (title, narrative, key facts) and
stores it in both. SQLite is the record of truth; the Chroma collection (one per embedding name) is rebuilt
from it when it lags behind, e.g. after switching `memory.embedding`.

Frozen memory (experiments) never writes and never creates files: reads go to a private snapshot of the
memory folder, because opening a Chroma store updates its SQLite file even for queries.

- _observation: `Observation`, read from the model's JSON or built from the output, and `format_context`.
- _compress: `compress_run`, the model call that turns a run into an observation, and its `Compression` record.
- _recall: `keyword_query`, `clamp_k` and `rrf_merge`, the parts of a recall that need no store.
- _store: `Memory`, the two indices on disk.
- embeddings: the embedding functions of the Chroma collection (`make_embedding_function`, the hashing one,
  MiniLM). A public module, not on this face: it imports chromadb, which `Memory` imports only when it opens.
"""

from ._observation import Observation
from ._recall import rrf_merge
from ._store import Memory

__all__ = [
    "Observation",
    "rrf_merge",
    "Memory",
]
