"""The store: observations in SQLite FTS5 (the record of truth, keyword search) and in a ChromaDB collection per
embedding name (vector search), behind one `Memory` that worker threads share. The collection is rebuilt from
SQLite when it lags behind, e.g. after switching `memory.embedding`.

Frozen memory (experiments) never writes and never creates files: reads go to a private snapshot of the
memory folder, because opening a Chroma store updates its SQLite file even for queries.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import sqlite3
import tempfile
import threading
import weakref
from pathlib import Path
from typing import Any, Iterable, Sequence

from harness.config import MemoryConfig
from harness.stores import ThreadLocalSQLite

from ._compress import Compression, compress_run
from ._observation import Observation, format_context
from ._recall import clamp_k, keyword_query, rrf_merge

log = logging.getLogger("harness.memory")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS observations (
    run_id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    narrative TEXT NOT NULL,
    key_facts TEXT NOT NULL,
    task TEXT NOT NULL,
    created REAL NOT NULL,
    source TEXT NOT NULL DEFAULT 'store'
);
CREATE VIRTUAL TABLE IF NOT EXISTS observations_fts USING fts5(
    run_id UNINDEXED, title, narrative, key_facts, task,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
"""
# bm25 column weights: run_id, title, narrative, key_facts, task
_BM25 = "bm25(observations_fts, 0.0, 3.0, 1.0, 2.0, 1.5)"


def _remove_tree(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


class Memory:
    """Observation store over ChromaDB and SQLite FTS5 under `cfg.path` or `<root>/memory`.

    One instance serves several worker threads: each thread has its own SQLite connection (and its own
    `last_compression`); writes and the Chroma collection's opening happen under one lock.
    """

    def __init__(self, cfg: MemoryConfig, root: str | Path = "results") -> None:
        self.cfg = cfg
        self.dir = Path(cfg.path) if cfg.path else Path(root) / "memory"
        self.embedding = (cfg.embedding or "hashing").strip().lower()
        self.frozen = bool(cfg.frozen) or not cfg.enabled
        self.vector_error: str | None = None
        self._lock = threading.RLock()
        self._local = threading.local()
        self._read_dir: Path | None = None
        self._db: ThreadLocalSQLite | None = None  # on the folder reads go to, once that is known
        self._collection: Any = None
        self._opened = False
        if not self.frozen:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._read_dir = self.dir
            self._db = ThreadLocalSQLite(self.sqlite_path)
            self._conn().executescript(_SCHEMA)
            from .embeddings import make_embedding_function

            make_embedding_function(self.embedding)  # fail early on an unknown or missing embedding

    @property
    def last_compression(self) -> Compression | None:
        """How this thread's last compress_and_store went: worker threads share one Memory, and each run must
        read its own compression, not the one another run finished meanwhile."""
        return getattr(self._local, "compression", None)

    @last_compression.setter
    def last_compression(self, info: Compression | None) -> None:
        self._local.compression = info

    # -- connections ---------------------------------------------------------------------------------

    @property
    def sqlite_path(self) -> Path:
        return self.dir / "memory.sqlite"

    @property
    def chroma_path(self) -> Path:
        return self.dir / "chroma"

    @property
    def collection_name(self) -> str:
        return f"observations_{re.sub(r'[^a-z0-9]+', '_', self.embedding)}"

    def _source_dir(self) -> Path | None:
        """Where reads go: the memory folder, or for frozen memory a snapshot taken on first use."""
        if self._read_dir is not None or not self.frozen:
            return self._read_dir
        with self._lock:
            if self._read_dir is None and self.cfg.enabled and (self.dir / "memory.sqlite").is_file():
                snap = tempfile.mkdtemp(prefix="harness-memory-frozen-")
                for name in ("memory.sqlite", "memory.sqlite-wal"):
                    if (self.dir / name).is_file():
                        shutil.copy2(self.dir / name, Path(snap) / name)
                if self.chroma_path.is_dir():
                    shutil.copytree(self.chroma_path, Path(snap) / "chroma")
                weakref.finalize(self, _remove_tree, snap)
                self._db = ThreadLocalSQLite(Path(snap) / "memory.sqlite")
                self._read_dir = Path(snap)
            return self._read_dir

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection to the SQLite file reads and writes go to (callers check _source_dir first)."""
        self._source_dir()
        assert self._db is not None
        return self._db.conn()

    def _chroma(self) -> Any:
        """The Chroma collection for this embedding, or None (frozen without one, or Chroma failed)."""
        with self._lock:
            if self._opened:
                return self._collection
            self._opened = True
            src = self._source_dir()
            if src is None:
                return None
            try:
                import chromadb
                from chromadb.config import Settings

                from .embeddings import make_embedding_function

                client = chromadb.PersistentClient(
                    path=str(src / "chroma"), settings=Settings(anonymized_telemetry=False)
                )
                ef = make_embedding_function(self.embedding)
                if self.frozen:
                    names = {getattr(c, "name", c) for c in client.list_collections()}
                    if self.collection_name not in names:
                        self.vector_error = f"frozen memory has no collection {self.collection_name}"
                        return None
                    self._collection = client.get_collection(self.collection_name, embedding_function=ef)
                else:
                    self._collection = client.get_or_create_collection(
                        self.collection_name, embedding_function=ef, metadata={"hnsw:space": "cosine"}
                    )
                    self._backfill()
            except Exception as exc:  # noqa: BLE001 - a broken vector side degrades to keyword search
                self.vector_error = f"{type(exc).__name__}: {exc}"
                log.warning("memory: ChromaDB unavailable, keyword search only (%s)", self.vector_error)
                self._collection = None
            return self._collection

    def _backfill(self) -> None:
        """Embed observations that SQLite has and this collection lacks (new embedding, crash between writes)."""
        col = self._collection
        rows = self._conn().execute("SELECT run_id FROM observations").fetchall()
        have = set(col.get(include=[])["ids"]) if col.count() else set()
        missing = [r[0] for r in rows if r[0] not in have]
        for start in range(0, len(missing), 64):
            obs = self._load(missing[start : start + 64])
            self._upsert_vectors([obs[i] for i in missing[start : start + 64] if i in obs])

    def _upsert_vectors(self, observations: Sequence[Observation]) -> None:
        if observations:
            self._collection.upsert(
                ids=[o.run_id for o in observations],
                documents=[o.document() for o in observations],
                metadatas=[{"title": o.title[:200], "created": o.created} for o in observations],
            )

    # -- reads ---------------------------------------------------------------------------------------

    def count(self) -> int:
        if self._source_dir() is None:
            return 0
        try:
            return int(self._conn().execute("SELECT count(*) FROM observations").fetchone()[0])
        except sqlite3.Error:
            return 0

    def _load(self, run_ids: Sequence[str]) -> dict[str, Observation]:
        if not run_ids:
            return {}
        marks = ",".join("?" * len(run_ids))
        rows = self._conn().execute(
            f"SELECT run_id, title, narrative, key_facts, task, created FROM observations WHERE run_id IN ({marks})",
            list(run_ids),
        ).fetchall()
        return {
            r[0]: Observation(r[1], r[2], tuple(json.loads(r[3])), r[4], r[0], float(r[5])) for r in rows
        }

    def keyword_search(self, query: str, n: int = 20) -> list[str]:
        """run_ids ranked by FTS5 bm25; [] for queries with no searchable words. Never raises on user text."""
        expr = keyword_query(query)
        if not expr or self._source_dir() is None:
            return []
        try:
            rows = self._conn().execute(
                f"SELECT run_id FROM observations_fts WHERE observations_fts MATCH ? ORDER BY {_BM25} LIMIT ?",
                (expr, n),
            ).fetchall()
        except sqlite3.Error as exc:
            log.warning("memory: FTS5 query failed for %r: %s", query[:80], exc)
            return []
        return [r[0] for r in rows]

    def vector_search(self, query: str, n: int = 20) -> list[str]:
        """run_ids ranked by embedding similarity; [] when the vector side is unavailable."""
        col = self._chroma()
        if col is None or not (query or "").strip():
            return []
        try:
            total = col.count()
            if total == 0:
                return []
            res = col.query(query_texts=[query], n_results=min(n, total), include=["distances"])
            return list(res["ids"][0])
        except Exception as exc:  # noqa: BLE001
            self.vector_error = f"{type(exc).__name__}: {exc}"
            log.warning("memory: vector query failed: %s", self.vector_error)
            return []

    def get_context(self, query: str, k: int | None = None) -> list[Observation]:
        """3-5 observations (cfg.k clamped) ranked by reciprocal rank fusion of vector and keyword search."""
        if not self.cfg.enabled:
            return []
        want = clamp_k(k, self.cfg.k)
        pool = max(4 * want, 20)
        merged = rrf_merge([self.vector_search(query, pool), self.keyword_search(query, pool)])
        found = self._load(merged[: want * 2])
        return [found[i] for i in merged if i in found][:want]

    def format_context(self, observations: Iterable[Observation]) -> str:
        return format_context(observations)

    # -- writes --------------------------------------------------------------------------------------

    def store(self, obs: Observation, *, source: str = "store") -> bool:
        """Write to both indices (upsert on run_id). False, and nothing written, when memory is frozen."""
        if self.frozen:
            return False
        if not isinstance(obs, Observation):
            raise TypeError(f"expected an Observation, got {type(obs).__name__}")
        if not obs.run_id:
            raise ValueError("expected an Observation with a non-empty run_id")
        facts = json.dumps(list(obs.key_facts), ensure_ascii=False)
        with self._lock:
            conn = self._conn()
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO observations (run_id, title, narrative, key_facts, task, created, source)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (obs.run_id, obs.title, obs.narrative, facts, obs.task, obs.created, source),
                )
                conn.execute("DELETE FROM observations_fts WHERE run_id = ?", (obs.run_id,))
                conn.execute(
                    "INSERT INTO observations_fts (run_id, title, narrative, key_facts, task) VALUES (?, ?, ?, ?, ?)",
                    (obs.run_id, obs.title, obs.narrative, "\n".join(obs.key_facts), obs.task),
                )
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            if self._chroma() is not None:
                try:
                    self._upsert_vectors([obs])
                except Exception as exc:  # noqa: BLE001 - SQLite has it; the next open backfills
                    self.vector_error = f"{type(exc).__name__}: {exc}"
                    log.warning("memory: vector upsert failed for %s: %s", obs.run_id, self.vector_error)
        return True

    def compress_and_store(self, task: str, output: str, plan: Any, llm: Any, run_id: str) -> Observation | None:
        """Compress a finished run with the planner-role model and store it; None when memory is frozen.

        Never raises on model trouble: `last_compression` records the parser used or why it fell back.
        """
        if self.frozen:
            return None
        from harness.tracing import current_tracer

        with current_tracer().span("memory.compress", cat="memory") as span:
            obs, info = compress_run(task, output, plan, llm, run_id)
            self.last_compression = info
            self.store(obs, source=info.parser)
            span.update(parser=info.parser, fallback=info.fallback, reason=info.reason, facts=len(obs.key_facts))
        return obs
