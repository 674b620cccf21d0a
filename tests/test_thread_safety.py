"""Thread safety of the harness objects that concurrent runs share (experiments.runs.RunPool workers): cache
counters, SQLite stores opened at once, trace files of one run id, per-thread state of shared search and memory
objects, and the embedded backend's bounded prompt cache."""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from harness.config import BackendConfig, MemoryConfig
from harness.inference import ChatResult, ResponseCache, make_llm
from harness.inference._fake import FakeLLM
from harness.memory import Memory, Observation
from harness.research.search import SearchResult
from harness.research.search._cache import CachedSearch
from harness.research.search._fallback import FallbackSearch, reset_degradation
from harness.stores._sqlite import set_wal
from harness.tracing import Tracer, current_tracer

THREADS = 16


@pytest.fixture(autouse=True)
def _fresh_degradation():
    reset_degradation()
    yield
    reset_degradation()


def _together(n: int, work: Callable[[int], Any], timeout: float = 60.0) -> list[BaseException]:
    """Run work(i) on n threads released at once by a barrier; the exceptions they raised."""
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        try:
            barrier.wait()
            work(i)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted on the test's thread
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    return errors


class _YieldingInt(int):
    """An int whose addition hands the GIL to other threads half-way through `x += 1`: an unguarded counter then
    loses updates every time, where a plain int loses them only rarely (or, without a GIL, often)."""

    def __add__(self, other: object) -> "_YieldingInt":
        value = int(self) + int(other)  # type: ignore[call-overload]
        time.sleep(0.0005)
        return _YieldingInt(value)

    __radd__ = __add__


def _result(text: str = "reply") -> ChatResult:
    return ChatResult(text, 3, 1, 0.1, "m", "fake")


class _Scripted:
    """A search provider answering every query with one result; `answers` overrides per query."""

    def __init__(self, name: str = "scripted", answers: dict[str, list[SearchResult]] | None = None) -> None:
        self.name = name
        self.answers = answers
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        with self._lock:
            self.calls.append(query)
        if self.answers is not None:
            return list(self.answers.get(query, []))
        return [SearchResult(query, f"https://example.org/{query}", "s", self.name)]


# -- 1. cache counters ------------------------------------------------------------------------------


def test_response_cache_counters_exact_under_threads(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    for i in range(5):
        cache.put(f"hit-{i}", _result())
    per_thread = 40

    def work(t: int) -> None:
        for i in range(per_thread):
            assert cache.get(f"hit-{i % 5}") is not None
            assert cache.get(f"miss-{t}-{i}") is None

    assert _together(THREADS, work) == []
    assert cache.stats() == {"hits": THREADS * per_thread, "misses": THREADS * per_thread}


def test_response_cache_counter_increment_is_atomic(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    cache.put("k", _result())
    cache.hits, cache.misses = _YieldingInt(0), _YieldingInt(0)

    def work(t: int) -> None:
        for _ in range(5):
            cache.get("k")
            cache.get(f"none-{t}")

    assert _together(8, work) == []
    assert (cache.hits, cache.misses) == (40, 40)


def test_search_cache_counters_exact_under_threads(tmp_path):
    inner = _Scripted()
    cache = CachedSearch(inner, tmp_path / "s.sqlite")
    for i in range(5):
        cache.search(f"warm {i}")
    warm_misses = cache.misses
    per_thread = 30

    def work(t: int) -> None:
        for i in range(per_thread):
            cache.search(f"warm {i % 5}")
            cache.search(f"cold {t} {i}")

    assert _together(THREADS, work) == []
    assert cache.stats() == {"hits": THREADS * per_thread, "misses": warm_misses + THREADS * per_thread}
    assert len(inner.calls) == cache.misses  # every miss asked the provider once, every hit did not


def test_search_cache_counter_increment_is_atomic(tmp_path):
    cache = CachedSearch(_Scripted(), tmp_path / "s.sqlite")
    cache.search("warm")
    cache.hits, cache.misses = _YieldingInt(0), _YieldingInt(0)

    def work(t: int) -> None:
        for i in range(5):
            cache.search("warm")
            cache.search(f"cold {t} {i}")

    assert _together(8, work) == []
    assert (cache.hits, cache.misses) == (40, 40)


def test_fallback_call_counter_is_atomic():
    fb = FallbackSearch(_Scripted("web", answers={}), _Scripted("local"))
    fb.fallback_calls = _YieldingInt(0)
    assert _together(8, lambda t: [fb.search(f"q {t} {i}") for i in range(5)]) == []
    assert fb.fallback_calls == 40


# -- 2. WAL switch retried everywhere (the helper itself: tests/test_sqlite_store.py) -----------------------------


def _open_response_cache(path: Path, i: int) -> None:
    cache = ResponseCache(path)
    cache.put(f"k{i}", _result())
    assert cache.get(f"k{i}") is not None


def _open_search_cache(path: Path, i: int) -> None:
    cache = CachedSearch(_Scripted(), path)
    assert cache.search(f"q{i}") and cache.search(f"q{i}")


def _open_memory(path: Path, i: int) -> None:
    mem = Memory(MemoryConfig(path=str(path)), path)
    assert mem.count() >= 0 and mem.keyword_search(f"word{i}") == []


@pytest.mark.parametrize("opener", [_open_response_cache, _open_search_cache, _open_memory])
def test_store_opens_while_another_worker_writes_the_new_db(tmp_path, opener):
    """Sweep workers start together: one is still creating its table (a write transaction, rollback journal)
    when the next opens the store. Switching to WAL then answers "database is locked" at once, busy timeout or
    not; the store must wait for the writer instead of failing its run."""
    db = tmp_path / "memory.sqlite" if opener is _open_memory else tmp_path / "store.sqlite"
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE other_worker (a)")
    release = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
    release.start()
    try:
        opener(tmp_path if opener is _open_memory else db, 0)
    finally:
        release.join()
        holder.close()
    with contextlib.closing(sqlite3.connect(db)) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("opener", [_open_response_cache, _open_search_cache, _open_memory])
def test_stores_opened_at_once_by_threads(tmp_path, opener):
    """Worker threads of one process open the store on a new file at once, each with its own connection."""
    for round_ in range(4):
        path = tmp_path / f"round{round_}" / "store.sqlite"
        target = path.parent if opener is _open_memory else path
        assert _together(THREADS, lambda i: opener(target, i)) == []


def test_stores_use_the_retrying_wal_helper(tmp_path, monkeypatch):
    """Response cache, search cache and memory switch to WAL through harness.stores._sqlite.set_wal, not a bare
    PRAGMA."""
    from harness.stores import _sqlite

    seen: list[str] = []

    def recording(conn: sqlite3.Connection, *args: Any, **kwargs: Any) -> None:
        seen.append(str(conn.execute("PRAGMA database_list").fetchone()[2]))
        set_wal(conn, *args, **kwargs)

    monkeypatch.setattr(_sqlite, "set_wal", recording)
    ResponseCache(tmp_path / "r.sqlite")
    CachedSearch(_Scripted(), tmp_path / "s.sqlite")
    Memory(MemoryConfig(path=str(tmp_path / "mem")), tmp_path)
    assert [Path(p).name for p in seen] == ["r.sqlite", "s.sqlite", "memory.sqlite"]


# -- 3. trace files -----------------------------------------------------------------------------------


def _traced(run_id: str, i: int) -> Tracer:
    tracer = Tracer(run_id)
    for n in range(50):
        with tracer.span(f"writer-{i}", cat="stage", n=n, pad="x" * 200):
            pass
    return tracer


def test_concurrent_trace_writes_of_one_run_id(tmp_path):
    tmp_path = tmp_path / "traces"
    tracers = [_traced("same-run", i) for i in range(THREADS)]
    expected = [json.dumps(t.to_chrome_trace()) for t in tracers]
    for _ in range(3):
        paths: list[Path] = []
        assert _together(THREADS, lambda i: paths.append(tracers[i].write(tmp_path))) == []
        assert set(paths) == {tmp_path / "same-run.json"}
        text = (tmp_path / "same-run.json").read_text()
        assert text in expected  # one writer's whole trace, never a mix
        assert json.loads(text)["otherData"]["run_id"] == "same-run"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["same-run.json"]  # no temp file left


def test_trace_write_cleans_its_temp_file_on_failure(tmp_path, monkeypatch):
    from harness.tracing import _trace

    def refuse(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(_trace.os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        _traced("r", 0).write(tmp_path / "traces")
    assert list((tmp_path / "traces").iterdir()) == []


def test_untraced_spans_keep_no_events():
    """The process-wide fallback tracer serves every call made outside a run: its span list must not grow."""
    tracer = current_tracer()
    before = len(tracer.events)
    calls = tracer.total_calls()
    for _ in range(100):
        with tracer.span("outside a run", cat="llm"):
            pass
    tracer.count_call("planner", _result())
    assert len(tracer.events) == before
    assert tracer.total_calls() == calls + 1  # prepare() still measures its calls by difference


# -- 5. per-thread state of shared search and memory objects ------------------------------------------


def test_degraded_answer_is_not_cached_when_another_thread_answers_meanwhile(tmp_path):
    """Thread A's query degrades to the fallback; while the fallback works, thread B's query is answered by the
    primary. A's degraded answer must still not be cached (last_degraded is per thread)."""
    in_fallback, b_done = threading.Event(), threading.Event()

    class SlowLocal(_Scripted):
        def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
            in_fallback.set()
            assert b_done.wait(10)
            return super().search(query, max_results)

    primary = _Scripted("web", answers={"b": [SearchResult("b", "https://example.org/b", "s", "web")]})
    cache = CachedSearch(FallbackSearch(primary, SlowLocal("local")), tmp_path / "s.sqlite")

    def thread_b() -> None:
        assert in_fallback.wait(10)
        cache.search("b")
        b_done.set()

    b = threading.Thread(target=thread_b)
    b.start()
    assert cache.search("a")[0].source == "local"
    b.join(10)
    rows = dict(cache._conn().execute("SELECT query, provider FROM search_cache").fetchall())
    assert rows == {"b": "web|local"}  # b (primary) cached, a (fallback) not


def test_last_compression_is_per_thread(tmp_path):
    good = json.dumps({"title": "Good", "narrative": "n", "key_facts": ["f"]})
    llm = FakeLLM(keyed={"task good": good, "task bad": "not json at all"})
    mem = Memory(MemoryConfig(), tmp_path)
    mem.store(Observation("warm", "n", (), "t", "warm", 0.0))  # open Chroma before the threads race
    after = threading.Barrier(2)
    seen: dict[str, Any] = {}

    def work(i: int) -> None:
        kind = ("good", "bad")[i]
        mem.compress_and_store(f"task {kind}", "output", None, llm, f"run-{kind}")
        after.wait(10)  # both compressions done before either reads
        seen[kind] = mem.last_compression

    assert _together(2, work) == []
    assert (seen["good"].run_id, seen["good"].parser) == ("run-good", "json")
    assert (seen["bad"].run_id, seen["bad"].parser) == ("run-bad", "fallback")


# -- 4. embedded backend: bounded host-memory prompt cache ---------------------------------------------


@pytest.fixture
def recorded_servers(monkeypatch, tmp_path):
    """Real xllamacpp CommonParams, a recording Server (no model is loaded): the params each server got."""
    xlc = pytest.importorskip("xllamacpp")
    from harness.backends import embedded

    built: list[Any] = []

    class Recorder:
        def __init__(self, params: Any) -> None:
            built.append(params)

    monkeypatch.setattr(xlc, "Server", Recorder)
    monkeypatch.setattr(embedded, "_SERVERS", {})
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    return built, gguf


def test_cache_ram_mib_reaches_common_params_when_prompts_are_reused(recorded_servers, caplog):
    from harness.backends.embedded import EmbeddedLLM

    built, gguf = recorded_servers
    assert sys.modules["xllamacpp"].CommonParams().cache_ram_mib == 8192  # llama.cpp's default, unbounded sweeps
    # the default: no prefix reuse, so no host-memory cache to fill (it would hold states nothing restores)
    assert BackendConfig().embedded_cache_ram_mib == 256 and BackendConfig().embedded_reuse_prompt is False
    with caplog.at_level(logging.INFO, logger="harness.backends.embedded"):
        llm = make_llm(BackendConfig(kind="embedded", embedded_model_path=str(gguf), cache=False), "planner")
    assert built[-1].cache_ram_mib == 0 and llm.cache_ram_mib == 0 and "cache_ram_mib=0" in caplog.text
    with caplog.at_level(logging.INFO, logger="harness.backends.embedded"):
        llm = make_llm(BackendConfig(kind="embedded", embedded_model_path=str(gguf), cache=False,
                                     embedded_reuse_prompt=True), "planner")
    assert built[-1].cache_ram_mib == 256 and llm.cache_ram_mib == 256 and len(built) == 2
    assert "cache_ram_mib=256" in caplog.text
    make_llm(BackendConfig(kind="embedded", embedded_model_path=str(gguf), embedded_cache_ram_mib=0,
                           embedded_reuse_prompt=True), "planner")
    assert len(built) == 2  # reuse with the cache at 0 is the no-reuse runtime's cache size: shared
    EmbeddedLLM(gguf, n_ctx=4096, slots=2, reuse_prompt=True)
    assert len(built) == 2  # the default size (256) shares the configured default's runtime
    EmbeddedLLM(gguf, n_ctx=4096, slots=2, cache_ram_mib=8192, reuse_prompt=True)
    assert built[-1].cache_ram_mib == 8192 and len(built) == 3
