"""A TTL cache (SQLite, WAL) in front of a search provider."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Callable

from harness.stores import ThreadLocalSQLite

from ._protocol import SearchProvider, SearchResult, normalize_query

class CachedSearch:
    """A TTL cache (SQLite, WAL) in front of a provider, keyed on provider + normalised query + max_results.

    Empty answers and answers served by a degraded fallback are not stored, so the cache never pins a
    temporary outage for ttl_hours. `clock` is injectable for tests. One instance serves several worker threads:
    each has its own connection and the hit/miss counters change under a lock.
    """

    def __init__(
        self,
        inner: SearchProvider,
        path: str | Path,
        ttl_hours: float = 24.0,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.path = Path(path)
        self.ttl_s = ttl_hours * 3600.0
        self.clock = clock
        self.hits = 0
        self.misses = 0
        self._stats_lock = threading.Lock()
        self._db = ThreadLocalSQLite(self.path)
        self._conn().execute(
            "CREATE TABLE IF NOT EXISTS search_cache (key TEXT PRIMARY KEY, provider TEXT, query TEXT, "
            "results TEXT NOT NULL, created REAL NOT NULL)"
        )

    @property
    def degraded_reason(self) -> str | None:
        return getattr(self.inner, "degraded_reason", None)

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

    def key(self, query: str, max_results: int) -> str:
        blob = json.dumps([self.inner.name, normalize_query(query), int(max_results)])
        return hashlib.sha256(blob.encode()).hexdigest()

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        key = self.key(query, max_results)
        row = self._conn().execute("SELECT results, created FROM search_cache WHERE key=?", (key,)).fetchone()
        hit = row is not None and self.clock() - row[1] < self.ttl_s
        with self._stats_lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1
        if hit:
            return [SearchResult(**r) for r in json.loads(row[0])]
        results = self.inner.search(query, max_results)
        if results and not getattr(self.inner, "last_degraded", False):
            self._conn().execute(
                "INSERT OR REPLACE INTO search_cache (key, provider, query, results, created) VALUES (?, ?, ?, ?, ?)",
                (key, self.inner.name, normalize_query(query), json.dumps([r.to_dict() for r in results]), self.clock()),
            )
        return results

    def purge_expired(self) -> int:
        cur = self._conn().execute("DELETE FROM search_cache WHERE created < ?", (self.clock() - self.ttl_s,))
        return cur.rowcount

    def stats(self) -> dict[str, int]:
        with self._stats_lock:
            return {"hits": self.hits, "misses": self.misses}
