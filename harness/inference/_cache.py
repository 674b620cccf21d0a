"""The response cache: replies stored in SQLite keyed on the request, and the LLM wrapper that reads it first."""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.stores import ThreadLocalSQLite

from ._protocol import LLM, ChatResult, Message

log = logging.getLogger("harness.inference")


def reply_options(llm: Any) -> Mapping[str, Any] | None:
    """What besides the request decides a backend's reply (EmbeddedLLM.reply_options, else its sampling)."""
    options = getattr(llm, "reply_options", None)
    return options if options is not None else getattr(llm, "sampling", None)


def cache_key(backend: str, model: str, messages: Sequence[Message], schema, temperature, max_tokens, seed,
              sampling: Mapping[str, Any] | None = None) -> str:
    """sampling: what besides the request decides the reply (reply_options); absent, the key is as before."""
    data = {
        "backend": backend,
        "model": model,
        "messages": [dict(m) for m in messages],
        "schema": schema,
        "temperature": round(float(temperature), 4),
        "max_tokens": int(max_tokens),
        "seed": seed,
    }
    if sampling:
        data["sampling"] = dict(sampling)
    blob = json.dumps(data, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


_REPLY_FIELDS = {"text": str, "prompt_tokens": int, "completion_tokens": int, "latency_s": (int, float), "model": str,
                 "backend": str}


def decode_reply(blob: Any) -> tuple[ChatResult | None, str]:
    """A stored reply -> (ChatResult marked cached, "") or (None, why it does not read back). The fields with a
    default (finish_reason, thinking_tokens) may be absent: rows written before they existed lack them."""
    from dataclasses import fields as dataclass_fields

    optional = {f.name: type(f.default) for f in dataclass_fields(ChatResult) if f.name not in _REPLY_FIELDS}
    optional.pop("cached", None)
    try:
        data = json.loads(blob)
    except (TypeError, ValueError) as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__}, not an object"
    missing = sorted(set(_REPLY_FIELDS) - set(data))
    unknown = sorted(set(data) - set(_REPLY_FIELDS) - set(optional))
    if missing or unknown:
        return None, f"fields missing {missing}, unknown {unknown}"
    for name, value in data.items():
        want = _REPLY_FIELDS.get(name) or optional[name]
        if isinstance(value, bool) or not isinstance(value, want) or (isinstance(value, int) and value < 0):
            return None, f"field {name}={value!r:.40} has the wrong type or sign"
    if not data["text"].strip():
        return None, "empty text"  # never cached on purpose (CachedLLM), so never a reply to reuse
    return replace(ChatResult(**data), cached=True, latency_s=0.0), ""


class ResponseCache:
    """SQLite (WAL) store of replies keyed on backend, model, messages, schema and sampling options.

    Safe for several processes: each call opens a short transaction; busy_timeout absorbs contention. Safe for
    several threads: each has its own connection, and the hit/miss counters change under a lock (worker threads
    of one sweep share one cache, and `+=` on an attribute is a read-modify-write).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self._stats_lock = threading.Lock()
        self._db = ThreadLocalSQLite(self.path)
        self._conn().execute(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, result TEXT NOT NULL, created REAL NOT NULL)"
        )

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

    def get(self, key: str) -> ChatResult | None:
        """The stored reply, or None (a miss). An entry that does not read back as a reply (bad JSON, missing or
        unknown fields, wrong types, empty text) is a miss too, logged with the file: the caller asks the model
        again and `put` overwrites it. A file SQLite cannot read raises StoreError (harness.stores)."""
        row = self._conn().execute("SELECT result FROM replies WHERE key=?", (key,)).fetchone()
        result, why = (None, "") if row is None else decode_reply(row[0])
        if why:
            log.warning("response cache %s: entry %s does not read back (%s); asking the model again",
                        self.path, key[:12], why)
        with self._stats_lock:
            if result is None:
                self.misses += 1
            else:
                self.hits += 1
        return result

    def put(self, key: str, result: ChatResult) -> None:
        data = {k: v for k, v in result.__dict__.items() if k != "cached"}
        self._conn().execute(
            "INSERT OR REPLACE INTO replies (key, result, created) VALUES (?, ?, ?)",
            (key, json.dumps(data), time.time()),
        )

    def stats(self) -> dict[str, int]:
        with self._stats_lock:
            return {"hits": self.hits, "misses": self.misses}


class CachedLLM:
    """Wraps an LLM with the response cache.

    Empty replies are not cached (asking again may do better). Replies cut at max_tokens are cached like any
    other (finish_reason "length" is kept), so a resumed run re-issues no call it already made.
    """

    def __init__(self, inner: LLM, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self.backend = inner.backend
        self.model = inner.model

    def chat(self, messages, *, schema=None, temperature=0.7, max_tokens=512, seed=None) -> ChatResult:
        key = cache_key(self.backend, self.model, messages, schema, temperature, max_tokens, seed,
                        reply_options(self.inner))
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        result = self.inner.chat(messages, schema=schema, temperature=temperature, max_tokens=max_tokens, seed=seed)
        if result.text.strip():
            self.cache.put(key, result)
        return result
