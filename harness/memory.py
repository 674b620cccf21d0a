"""Persistent memory of finished runs: observations in ChromaDB (semantic) and SQLite FTS5 (keyword).

`get_context` asks both indices and merges the two rankings with reciprocal rank fusion; `compress_and_store`
has the planner-role model compress a finished run into an observation (title, narrative, key facts) and
stores it in both. SQLite is the record of truth; the Chroma collection (one per embedding name) is rebuilt
from it when it lags behind, e.g. after switching `memory.embedding`.

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
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

from harness.config import MemoryConfig
from harness.security import DataMarker
from harness.sqlite_store import ThreadLocalSQLite
from harness.text import STOPWORDS, code_marks, fts_query

log = logging.getLogger("harness.memory")

RRF_K = 60
MIN_K, MAX_K = 3, 5
TITLE_MAX, NARRATIVE_MAX, FACT_MAX, FACTS_MAX = 120, 600, 200, 5
OUTPUT_PROMPT_CHARS = 3000
FTS_MAX_TOKENS = 32

COMPRESS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": TITLE_MAX},
        "narrative": {"type": "string", "maxLength": NARRATIVE_MAX},
        "key_facts": {
            "type": "array",
            "items": {"type": "string", "maxLength": FACT_MAX},
            "maxItems": FACTS_MAX,
        },
    },
    "required": ["title", "narrative", "key_facts"],
}

COMPRESS_SYSTEM = (
    "You compress a finished research run into a memory observation for future runs. "
    "Reply with one JSON object only: "
    '{"title": "<short topic title>", "narrative": "<2-3 sentences: what was asked, what was found>", '
    '"key_facts": ["<concrete, reusable fact>", ...]} with at most 5 key_facts.'
)

_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])\s+(.+?)\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Observation:
    title: str
    narrative: str
    key_facts: tuple[str, ...]
    task: str
    run_id: str
    created: float

    def document(self) -> str:
        """The text both indices see."""
        return "\n".join([self.title, self.narrative, *self.key_facts, self.task])

    def to_dict(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "narrative": self.narrative,
            "key_facts": list(self.key_facts),
            "task": self.task,
            "run_id": self.run_id,
            "created": self.created,
        }


@dataclass(frozen=True)
class Compression:
    """How a run became an observation: which parser read the model's JSON, or why it fell back."""

    run_id: str
    parser: str  # "json" | "dirtyjson" | "fallback"
    fallback: bool
    reason: str = ""


# -- pure helpers ------------------------------------------------------------------------------------


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


def _truncate(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] if " " in text[: limit - 1] else text[: limit - 1]
    return cut.rstrip(" ,;:") + "…"


def _strip_markdown(text: str) -> str:
    text = re.sub(r"[*_`]+", "", text)
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).strip()


def list_items(markdown: str, limit: int = FACTS_MAX) -> list[str]:
    """The first bullet or numbered items of a Markdown text, markup removed."""
    items = []
    for line in markdown.splitlines():
        m = _LIST_ITEM.match(line)
        if m:
            item = _truncate(_strip_markdown(m.group(1)), FACT_MAX)
            if item:
                items.append(item)
        if len(items) >= limit:
            break
    return items


def first_sentences(markdown: str, limit: int = 400) -> str:
    """Leading prose of a Markdown text (headings, fences and list markers dropped) up to about limit chars."""
    lines = []
    for line, code in code_marks(markdown):
        if code or line.lstrip().startswith("#") or not line.strip():
            continue
        m = _LIST_ITEM.match(line)
        lines.append(m.group(1) if m else line.strip())
    prose = _strip_markdown(" ".join(lines))
    out = ""
    for sentence in _SENTENCE_END.split(prose):
        if out and len(out) + len(sentence) + 1 > limit:
            break
        out = f"{out} {sentence}".strip()
    return _truncate(out, limit)


def fallback_observation(task: str, output: str, run_id: str, created: float | None = None) -> Observation:
    """Deterministic observation when the model's reply cannot be used."""
    return Observation(
        title=_truncate(task, 80) or "untitled run",
        narrative=first_sentences(output or ""),
        key_facts=tuple(list_items(output or "")),
        task=task,
        run_id=run_id,
        created=time.time() if created is None else created,
    )


def observation_from_model(data: dict[str, Any], task: str, run_id: str, created: float | None = None) -> Observation:
    """Validate the model's JSON object; raises ValueError saying what was expected and what arrived."""
    title = data.get("title")
    narrative = data.get("narrative", "")
    facts = data.get("key_facts", [])
    if not isinstance(title, str) or not title.strip():
        raise ValueError(f"expected a non-empty string 'title', got {title!r:.80}")
    if not isinstance(narrative, str):
        raise ValueError(f"expected a string 'narrative', got {type(narrative).__name__}")
    if isinstance(facts, str):
        facts = [facts]
    if not isinstance(facts, list):
        raise ValueError(f"expected a list 'key_facts', got {type(facts).__name__}")
    clean = [_truncate(str(f), FACT_MAX) for f in facts if isinstance(f, (str, int, float)) and str(f).strip()]
    return Observation(
        title=_truncate(title, TITLE_MAX),
        narrative=_truncate(narrative, NARRATIVE_MAX),
        key_facts=tuple(clean[:FACTS_MAX]),
        task=task,
        run_id=run_id,
        created=time.time() if created is None else created,
    )


def compress_messages(task: str, output: str, plan: Any = None) -> list[dict[str, str]]:
    parts = [f"Task: {task}"]
    task_type = getattr(plan, "task_type", None)
    if task_type:
        parts.append(f"Task type: {task_type}")
    summary = getattr(plan, "prior_work_summary", "")
    if summary:
        parts.append(f"Prior work: {summary}")
    # the output was written from untrusted sources: a data block, so an instruction planted there is not obeyed
    # (and not carried into memory, where every later run would read it)
    marker = DataMarker.for_run(task)
    parts.append(marker.notice())
    parts.append("Output of the run:\n" + marker.wrap((output or "")[:OUTPUT_PROMPT_CHARS], "output"))
    parts.append("Return the JSON observation now.")
    return [{"role": "system", "content": COMPRESS_SYSTEM}, {"role": "user", "content": "\n\n".join(parts)}]


def compress_run(task: str, output: str, plan: Any, llm: Any, run_id: str) -> tuple[Observation, Compression]:
    """Ask the model for an observation; never raises: any model or parse trouble gives the fallback."""
    from harness.jsonparse import JSONParseError, parse_json_object

    created = time.time()
    try:
        reply = llm.chat(
            compress_messages(task, output, plan), schema=COMPRESS_SCHEMA, temperature=0.1, max_tokens=320, seed=0
        )
        data, parser = parse_json_object(reply.text)
        obs = observation_from_model(data, task, run_id, created)
        return obs, Compression(run_id, parser, False)
    except JSONParseError as exc:
        reason = f"unparseable reply: {exc}"
    except ValueError as exc:
        reason = f"invalid observation: {exc}"
    except Exception as exc:  # noqa: BLE001 - model trouble of any kind becomes the fallback
        reason = f"model call failed: {type(exc).__name__}: {exc}"
    log.info("compress_and_store fell back for %s: %s", run_id, reason)
    return fallback_observation(task, output, run_id, created), Compression(run_id, "fallback", True, reason[:300])


def format_context(observations: Iterable[Observation]) -> str:
    """Compact Markdown block of past observations for the planning and synthesis prompts ("" when none)."""
    obs = list(observations)
    if not obs:
        return ""
    lines = [f"## Memory: {len(obs)} related past run{'s' if len(obs) != 1 else ''}"]
    for i, o in enumerate(obs, start=1):
        day = time.strftime("%Y-%m-%d", time.gmtime(o.created))
        lines.append(f"### {i}. {o.title} ({day})")
        if o.narrative:
            lines.append(_truncate(o.narrative, 400))
        lines.extend(f"- {_truncate(f, FACT_MAX)}" for f in o.key_facts[:FACTS_MAX])
    return "\n".join(lines)


# -- the store ---------------------------------------------------------------------------------------

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
            from harness.embeddings import make_embedding_function

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

                from harness.embeddings import make_embedding_function

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
        from harness.logger import current_tracer

        with current_tracer().span("memory.compress", cat="memory") as span:
            obs, info = compress_run(task, output, plan, llm, run_id)
            self.last_compression = info
            self.store(obs, source=info.parser)
            span.update(parser=info.parser, fallback=info.fallback, reason=info.reason, facts=len(obs.key_facts))
        return obs
