"""An offline local corpus for search: SQLite FTS5 / BM25 over passages of Python docs or the user's own folders.

The default corpus is documentation that exists on any Python install: docstrings of a curated set of
standard-library modules and their public classes and functions, plus the descriptions of installed
distributions. It is built once (a few seconds) and cached at <results_dir>/search_index/corpus.sqlite with a
version stamp; users point `search.local_corpus` at their own folders of .md/.txt/.rst/.py/.html files.
"""

from __future__ import annotations

import contextlib
import functools
import fcntl
import hashlib
import importlib
import inspect
import logging
import os
import sqlite3
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from harness.stores import named_faults, no_space, replacing
from harness.text import fts_query

from .._chunker import split_chunks
from ._protocol import SearchResult

log = logging.getLogger("harness.search")

CORPUS_VERSION = "3"
PASSAGE_CHARS = 800
USER_SUFFIXES = frozenset({".md", ".markdown", ".txt", ".rst", ".py", ".html", ".htm"})

STDLIB_MODULES: tuple[str, ...] = (
    "abc", "argparse", "array", "ast", "asyncio", "base64", "bisect", "bz2", "calendar", "cmath", "codecs",
    "collections", "collections.abc", "concurrent.futures", "configparser", "contextlib", "contextvars", "copy",
    "csv", "ctypes", "dataclasses", "datetime", "decimal", "difflib", "dis", "doctest", "email", "enum",
    "errno", "faulthandler", "fcntl", "filecmp", "fnmatch", "fractions", "functools", "gc", "getpass",
    "gettext", "glob", "graphlib", "gzip", "hashlib", "heapq", "hmac", "html", "html.parser", "http",
    "http.client", "http.server", "importlib", "importlib.metadata", "importlib.resources", "inspect", "io",
    "ipaddress", "itertools", "json", "keyword", "linecache", "locale", "logging", "logging.handlers", "lzma",
    "math", "mimetypes", "mmap", "multiprocessing", "numbers", "operator", "os", "os.path", "pathlib", "pdb",
    "pickle", "pkgutil", "platform", "pprint", "profile", "cProfile", "pstats", "queue", "random", "re",
    "reprlib", "resource", "sched", "secrets", "select", "selectors", "shelve", "shlex", "shutil", "signal",
    "site", "socket", "socketserver", "sqlite3", "ssl", "stat", "statistics", "string", "struct",
    "subprocess", "sys", "sysconfig", "tarfile", "tempfile", "textwrap", "threading", "time", "timeit",
    "tokenize", "tomllib", "trace", "traceback", "tracemalloc", "types", "typing", "unicodedata", "unittest",
    "unittest.mock", "urllib.parse", "urllib.request", "uuid", "venv", "warnings", "weakref", "xml.etree.ElementTree",
    "zipfile", "zlib", "zoneinfo",
)

@dataclass(frozen=True)
class _Doc:
    title: str
    url: str
    text: str


def _first_line(doc: str) -> str:
    return doc.strip().splitlines()[0][:160] if doc.strip() else ""


def _stdlib_docs(modules: Sequence[str]) -> Iterator[_Doc]:
    seen: set[int] = set()
    for modname in modules:
        try:
            with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
                mod = importlib.import_module(modname)
        except BaseException as exc:  # a module missing on this platform is skipped, never fatal
            if isinstance(exc, KeyboardInterrupt):
                raise
            continue
        doc = inspect.getdoc(mod) or ""
        if doc:
            yield _Doc(f"{modname} module", f"pydoc://{modname}", f"{modname}: {doc}")
        names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
        for name in names:
            obj = getattr(mod, name, None)
            if obj is None or id(obj) in seen:
                continue
            if not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)):
                continue
            owner = getattr(obj, "__module__", "") or ""
            if not (owner == modname or owner.startswith(modname + ".") or owner.lstrip("_") == modname.split(".")[-1]):
                continue
            seen.add(id(obj))
            text = _object_text(f"{modname}.{name}", obj)
            if text:
                yield _Doc(f"{modname}.{name}", f"pydoc://{modname}.{name}", text)


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def _object_text(qualname: str, obj: object) -> str:
    doc = inspect.getdoc(obj) or ""
    parts = [f"{qualname}{_signature(obj)}\n{doc}".strip()] if doc else []
    if inspect.isclass(obj):
        for mname, member in sorted(vars(obj).items()):
            if mname.startswith("_") or not callable(member):
                continue
            mdoc = inspect.getdoc(member) or ""
            if mdoc:
                parts.append(f"{qualname}.{mname}{_signature(member)}: {mdoc[:600]}")
    return "\n\n".join(parts)[:12000]


def _distribution_docs(max_chars: int = 20000) -> Iterator[_Doc]:
    from importlib import metadata

    seen: set[str] = set()
    for dist in metadata.distributions():
        try:
            meta = dist.metadata
            name = meta["Name"] or ""
        except Exception:  # broken dist-info on disk: skip it
            continue
        key = name.lower().replace("_", "-")
        if not name or key in seen:
            continue
        seen.add(key)
        summary = meta.get("Summary") or ""
        body = meta.get_payload() if hasattr(meta, "get_payload") else ""
        body = body or meta.get("Description") or ""
        text = f"{name} {dist.version}: {summary}\n\n{body}".strip()
        if len(text) > 40:
            yield _Doc(f"{name} (installed package)", f"pkg://{key}", text[:max_chars])


def _folder_docs(folders: Sequence[Path], max_file_bytes: int = 2_000_000) -> Iterator[_Doc]:
    from harness.security import html_to_text

    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.suffix.lower() not in USER_SUFFIXES or not path.is_file():
                continue
            try:
                with open(path, "r", encoding="utf-8", errors="replace") as fh:
                    raw = fh.read(max_file_bytes)
            except OSError:
                continue
            text = html_to_text(raw) if path.suffix.lower() in {".html", ".htm"} else raw
            title = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), path.name)[:120]
            yield _Doc(title or path.name, path.resolve().as_uri(), text)


def _folder_fingerprint(folders: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.suffix.lower() in USER_SUFFIXES and path.is_file():
                st = path.stat()
                h.update(f"{path}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def _default_stamp() -> str:
    """Version stamp of the default corpus: this Python and every installed distribution. Computed once per
    process (reading 150+ package metadata files costs ~125 ms, and every new Harness builds a provider)."""
    from importlib import metadata

    dists = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata["Name"])
    blob = "|".join([CORPUS_VERSION, sys.version, *STDLIB_MODULES, *dists])
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


class LocalCorpusProvider:
    """BM25 search over an FTS5 index of ~800-char passages (one best passage per document is returned).

    folders=None indexes the default Python-docs corpus; otherwise the .md/.txt/.rst/.py/.html files under
    the folders. The index is built on first search (or `build()`), reused while its version stamp matches,
    and rebuilt when the corpus changes (new package versions, edited files).
    """

    name = "local"

    def __init__(self, folders: Sequence[str | Path] | None = None, *, index_dir: str | Path | None = None) -> None:
        try:
            self.folders = [Path(f).expanduser().resolve() for f in folders] if folders else None
        except RuntimeError:  # '~user' of an unknown user
            raise ValueError(f"search.local_corpus: cannot expand '~' in {list(map(str, folders or []))}; expected "
                             f"existing directories") from None
        for folder in self.folders or []:
            if not folder.is_dir():
                raise ValueError(f"search.local_corpus: {folder} is not a folder; expected existing directories")
        base = Path(index_dir) if index_dir else Path(os.environ.get("HARNESS_RESULTS_DIR", "results")) / "search_index"
        if self.folders:
            key = hashlib.sha256("|".join(map(str, self.folders)).encode()).hexdigest()[:12]
            self.index_path = base / f"folders-{key}.sqlite"
        else:
            self.index_path = base / "corpus.sqlite"
        self.build_seconds: float | None = None
        self.passages = 0
        self._ready = False
        self._lock = threading.Lock()

    def _stamp(self) -> str:
        return _folder_fingerprint(self.folders) if self.folders else _default_stamp()

    def _documents(self) -> Iterator[_Doc]:
        if self.folders:
            yield from _folder_docs(self.folders)
        else:
            yield from _stdlib_docs(STDLIB_MODULES)
            yield from _distribution_docs()

    def _stored_stamp(self) -> str | None:
        if not self.index_path.exists():
            return None
        try:
            with contextlib.closing(sqlite3.connect(self.index_path, timeout=30)) as conn:
                row = conn.execute("SELECT value FROM meta WHERE key='stamp'").fetchone()
                count = conn.execute("SELECT value FROM meta WHERE key='passages'").fetchone()
            self.passages = int(count[0]) if count else 0
            return row[0] if row else None
        except sqlite3.Error:
            return None

    def ensure_index(self) -> Path:
        """Build the index if it is missing or stale; safe across threads and processes."""
        if self._ready:
            return self.index_path
        with self._lock:
            if self._ready:
                return self.index_path
            stamp = self._stamp()
            if self._stored_stamp() != stamp:
                self.index_path.parent.mkdir(parents=True, exist_ok=True)
                with open(self.index_path.with_suffix(".lock"), "w") as lockf:
                    fcntl.flock(lockf, fcntl.LOCK_EX)
                    if self._stored_stamp() != stamp:  # another process may have built it meanwhile
                        # a full disk stops the run (DiskFull, naming the index), never an empty search folded
                        # into research as one more search error
                        with no_space(self.index_path), named_faults(self.index_path):
                            self.build(stamp)
            self._ready = True
        return self.index_path

    def build(self, stamp: str | None = None) -> float:
        """(Re)build the index into a temp file and swap it in atomically; returns seconds taken."""
        t0 = time.perf_counter()
        stamp = stamp or self._stamp()
        count = 0
        with replacing(self.index_path) as tmp, contextlib.closing(sqlite3.connect(tmp)) as conn:
            conn.execute(
                "CREATE VIRTUAL TABLE passages USING fts5(title, body, url UNINDEXED, tokenize='porter unicode61')"
            )
            conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
            batch: list[tuple[str, str, str]] = []
            for doc in self._documents():
                for passage in split_chunks(doc.text, PASSAGE_CHARS):
                    batch.append((doc.title, passage, doc.url))
                if len(batch) >= 2000:
                    conn.executemany("INSERT INTO passages (title, body, url) VALUES (?, ?, ?)", batch)
                    count += len(batch)
                    batch = []
            conn.executemany("INSERT INTO passages (title, body, url) VALUES (?, ?, ?)", batch)
            count += len(batch)
            conn.execute("INSERT INTO passages(passages) VALUES ('optimize')")
            conn.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [("stamp", stamp), ("passages", str(count)), ("built", str(time.time())), ("version", CORPUS_VERSION)],
            )
            conn.commit()
        self.passages = count
        self.build_seconds = time.perf_counter() - t0
        log.info("local corpus index: %d passages in %.1f s -> %s", count, self.build_seconds, self.index_path)
        return self.build_seconds

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        """Passages matching every term rank first (AND), then the rest by BM25 (OR); one result per document."""
        if not fts_query(query) or max_results <= 0:
            return []
        self.ensure_index()
        out: list[SearchResult] = []
        seen: set[str] = set()
        try:
            # a URI: '#', '?' and '%' in the folder's name are quoted, or SQLite opens another (empty) file
            uri = f"file:{urllib.parse.quote(str(self.index_path.resolve()))}?mode=ro"
            with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
                for op in ("AND", "OR"):
                    rows = conn.execute(
                        "SELECT title, url, body, bm25(passages, 8.0, 1.0) AS score FROM passages "
                        "WHERE passages MATCH ? ORDER BY score LIMIT ?",
                        (fts_query(query, op=op), max_results * 8),
                    ).fetchall()
                    for title, url, body, _score in rows:
                        if url not in seen and len(out) < max_results:
                            seen.add(url)
                            out.append(SearchResult(title, url, body, self.name))
                    if len(out) >= max_results:
                        break
        except sqlite3.Error as exc:
            log.warning("local corpus query %r failed: %s", query, exc)
        return out
