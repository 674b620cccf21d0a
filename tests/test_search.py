"""Search providers: protocol, local FTS5 corpus, hostile queries, TTL cache, fallback degradation."""

from __future__ import annotations

import shutil
import time

import pytest

from harness.config import SearchConfig
from harness.research.search import LocalCorpusProvider, SearchProvider, SearchResult, SearchUnavailable, make_search
from harness.research.search._cache import CachedSearch
from harness.research.search._ddgs import DDGSProvider
from harness.research.search._fallback import FallbackSearch, reset_degradation
from harness.text import fts_query


@pytest.fixture(autouse=True)
def _fresh_degradation():
    reset_degradation()
    yield
    reset_degradation()


@pytest.fixture(scope="module")
def default_corpus(tmp_path_factory):
    provider = LocalCorpusProvider(index_dir=tmp_path_factory.mktemp("index"))
    provider.ensure_index()
    return provider


class Scripted:
    """A provider answering from a dict, counting calls."""

    def __init__(self, name="scripted", answers=None, error: Exception | None = None):
        self.name = name
        self.answers = answers or {}
        self.error = error
        self.calls: list[str] = []

    def search(self, query, max_results=5):
        self.calls.append(query)
        if self.error:
            raise self.error
        return list(self.answers.get(query, []))[:max_results]


def _r(n: int, source="scripted") -> SearchResult:
    return SearchResult(f"title {n}", f"https://example.org/{n}", f"snippet {n}", source)


def test_every_provider_satisfies_the_protocol(tmp_path):
    local = LocalCorpusProvider(index_dir=tmp_path)
    providers = [DDGSProvider(), local, CachedSearch(local, tmp_path / "c.sqlite"), FallbackSearch(DDGSProvider(), local)]
    for p in providers:
        assert isinstance(p, SearchProvider), type(p)


def test_search_result_is_frozen():
    with pytest.raises(AttributeError):
        _r(1).title = "x"  # type: ignore[misc]


def test_default_corpus_finds_asyncio_gather(default_corpus):
    results = default_corpus.search("asyncio gather", 5)
    assert results and results[0].url == "pydoc://asyncio.gather"
    assert "awaitable" in results[0].snippet.lower() or "coroutine" in results[0].snippet.lower()
    assert all(r.source == "local" for r in results)
    assert len({r.url for r in results}) == len(results)


@pytest.mark.parametrize(
    "query, expected_url_prefix",
    [
        ("concurrent futures thread pool executor", "pydoc://concurrent.futures"),
        ("sqlite3 connect", "pydoc://sqlite3"),
        ("dataclasses field default_factory", "pydoc://dataclasses"),
        ("optuna hyperparameter optimization", "pkg://optuna"),
    ],
)
def test_default_corpus_table(default_corpus, query, expected_url_prefix):
    urls = [r.url for r in default_corpus.search(query, 5)]
    assert any(u.startswith(expected_url_prefix) for u in urls), urls


def test_index_is_built_once_and_reused(default_corpus):
    again = LocalCorpusProvider(index_dir=default_corpus.index_path.parent)
    again.ensure_index()
    assert again.build_seconds is None  # version stamp matched: no rebuild
    assert again.passages == default_corpus.passages > 1000


def test_default_corpus_build_is_bounded(default_corpus):
    assert default_corpus.build_seconds is not None and default_corpus.build_seconds < 20


@pytest.mark.parametrize(
    "query",
    ['"', "AND", "OR NOT", "NEAR(", "*", "title:asyncio", "'; DROP TABLE passages; --", "\x00", "(((", "a" * 5000,
     "asyncio^2 -gather +x", "🙂 emoji", "", "   ", 'col:"x" AND (y OR'],
)
def test_hostile_fts_queries_never_raise(default_corpus, query):
    results = default_corpus.search(query, 3)
    assert isinstance(results, list)
    assert default_corpus.search("asyncio gather", 1)  # index still intact


@pytest.mark.parametrize(
    "query, expected",
    [
        ("asyncio gather", '"asyncio" OR "gather"'),
        ('say "hi"', '"say" OR "hi"'),
        ("NEAR(a b)", '"near" OR "a" OR "b"'),
        ("a a A", '"a"'),
        ("--", ""),
    ],
)
def test_fts_query_table(query, expected):
    assert fts_query(query) == expected


def test_user_folder_corpus_and_rebuild_on_change(tmp_path):
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "wal.md").write_text("# SQLite WAL\n\nWrite-ahead logging lets readers run while a writer commits.\n")
    (docs / "sub" / "page.html").write_text("<html><body><h1>Zebra</h1><p>The zebra crossing guide.</p></body></html>")
    (docs / "skip.bin").write_bytes(b"\x00zebra")
    provider = LocalCorpusProvider([docs], index_dir=tmp_path / "idx")
    hits = provider.search("write-ahead logging readers", 3)
    assert hits and hits[0].url == (docs / "wal.md").resolve().as_uri() and hits[0].title == "SQLite WAL"
    zebra = provider.search("zebra", 5)
    assert [h.url.rsplit("/", 1)[-1] for h in zebra] == ["page.html"]
    time.sleep(0.01)
    (docs / "new.txt").write_text("Quokkas are small marsupials.")
    fresh = LocalCorpusProvider([docs], index_dir=tmp_path / "idx")
    assert fresh.search("quokkas", 3)[0].url.endswith("new.txt")
    assert fresh.build_seconds is not None


def test_user_folder_must_exist(tmp_path):
    with pytest.raises(ValueError, match="not a folder"):
        LocalCorpusProvider([tmp_path / "missing"])


# -- cache ---------------------------------------------------------------------------------------------


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


def test_cache_ttl_expiry_refetches(tmp_path):
    inner = Scripted(answers={"q": [_r(1)]})
    clock = Clock()
    cache = CachedSearch(inner, tmp_path / "cache.sqlite", ttl_hours=24, clock=clock)
    assert cache.search("q") == [_r(1)]
    assert cache.search("q") == [_r(1)]
    assert (len(inner.calls), cache.hits, cache.misses) == (1, 1, 1)
    clock.now += 23.9 * 3600
    cache.search("q")
    assert len(inner.calls) == 1
    clock.now += 0.2 * 3600  # past 24 h since the store
    inner.answers["q"] = [_r(2)]
    assert cache.search("q") == [_r(2)]
    assert (len(inner.calls), cache.hits, cache.misses) == (2, 2, 2)
    assert cache.search("q") == [_r(2)]  # the refetch was stored with the new time


@pytest.mark.parametrize(
    "first, second, max_second, shared",
    [
        ("Asyncio  Gather", "asyncio gather", 5, True),
        ("asyncio gather", "asyncio gather", 3, False),
        ("asyncio gather", "asyncio gathers", 5, False),
    ],
)
def test_cache_key_normalisation(tmp_path, first, second, max_second, shared):
    inner = Scripted(answers={first: [_r(1)], second: [_r(1)]})
    cache = CachedSearch(inner, tmp_path / "c.sqlite")
    cache.search(first, 5)
    cache.search(second, max_second)
    assert len(inner.calls) == (1 if shared else 2)


def test_cache_persists_across_instances_and_skips_empty(tmp_path):
    inner = Scripted(answers={"q": [_r(1)]})
    CachedSearch(inner, tmp_path / "c.sqlite").search("q")
    CachedSearch(inner, tmp_path / "c.sqlite").search("none")
    other = CachedSearch(inner, tmp_path / "c.sqlite")
    assert other.search("q") == [_r(1)] and other.hits == 1
    other.search("none")
    assert inner.calls == ["q", "none", "none"]  # empty answers are not cached


def test_cache_is_wal(tmp_path):
    cache = CachedSearch(Scripted(), tmp_path / "c.sqlite")
    assert cache._conn().execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# -- ddgs and fallback ---------------------------------------------------------------------------------


def test_ddgs_disabled_fails_immediately():
    t0 = time.perf_counter()
    with pytest.raises(SearchUnavailable, match="DDGS_DISABLED"):
        DDGSProvider().search("python asyncio")
    assert time.perf_counter() - t0 < 0.1


def test_fallback_degrades_within_a_second_and_records_reason(tmp_path):
    local = Scripted("local", answers={"asyncio gather": [_r(1, "local")]})
    fb = FallbackSearch(DDGSProvider(timeout_s=5), local)
    t0 = time.perf_counter()
    assert fb.search("asyncio gather") == [_r(1, "local")]
    assert time.perf_counter() - t0 < 1.0
    assert fb.degraded_reason.startswith("ddgs:") and "DDGS_DISABLED" in fb.degraded_reason
    assert fb.last_degraded


def test_fallback_skips_failed_primary_for_the_rest_of_the_process():
    primary = Scripted("web", error=ConnectionError("network unreachable"))
    local = Scripted("local", answers={"a": [_r(1)], "b": [_r(2)]})
    FallbackSearch(primary, local).search("a")
    fb2 = FallbackSearch(primary, local)
    assert fb2.search("b") == [_r(2)]
    assert primary.calls == ["a"]  # tried once, then skipped
    assert fb2.degraded_reason == "web: ConnectionError: network unreachable"


def test_fallback_on_empty_primary_answer_keeps_primary():
    primary = Scripted("web", answers={"b": [_r(9)]})
    local = Scripted("local", answers={"a": [_r(1)]})
    fb = FallbackSearch(primary, local)
    assert fb.search("a") == [_r(1)] and "no results" in fb.degraded_reason
    assert fb.search("b") == [_r(9)] and not fb.last_degraded
    assert primary.calls == ["a", "b"]


def test_degraded_answers_are_not_cached(tmp_path):
    primary = Scripted("web", error=TimeoutError("slow"))
    local = Scripted("local", answers={"q": [_r(1)]})
    cache = CachedSearch(FallbackSearch(primary, local), tmp_path / "c.sqlite")
    cache.search("q")
    cache.search("q")
    assert local.calls == ["q", "q"] and cache.hits == 0
    assert cache.degraded_reason == "web: TimeoutError: slow"


def test_ddgs_timeout_is_enforced(monkeypatch):
    import ddgs

    class Slow:
        def __init__(self, **kw):
            pass

        def text(self, query, **kw):
            time.sleep(3)
            return []

    monkeypatch.delenv("DDGS_DISABLED")
    monkeypatch.setattr(ddgs, "DDGS", Slow)
    t0 = time.perf_counter()
    with pytest.raises(SearchUnavailable, match="no answer within 0.3 s"):
        DDGSProvider(timeout_s=0.3).search("x")
    assert time.perf_counter() - t0 < 1.0


def test_ddgs_rows_become_results(monkeypatch):
    import ddgs

    seen = {}

    class Fake:
        def __init__(self, **kw):
            seen["init"] = kw

        def text(self, query, **kw):
            seen["text"] = (query, kw)
            return [
                {"title": "Asyncio", "href": "https://docs.python.org/3/library/asyncio.html", "body": "Async I/O"},
                {"title": "no url", "body": "dropped"},
            ]

    monkeypatch.delenv("DDGS_DISABLED")
    monkeypatch.setattr(ddgs, "DDGS", Fake)
    results = DDGSProvider(timeout_s=2).search("asyncio", 3)
    assert results == [SearchResult("Asyncio", "https://docs.python.org/3/library/asyncio.html", "Async I/O", "ddgs")]
    assert seen["text"][0] == "asyncio" and seen["text"][1]["max_results"] == 3


def test_ddgs_errors_are_named(monkeypatch):
    import ddgs
    from ddgs.exceptions import RatelimitException

    class Broken:
        def __init__(self, **kw):
            pass

        def text(self, query, **kw):
            raise RatelimitException("202 Ratelimit")

    monkeypatch.delenv("DDGS_DISABLED")
    monkeypatch.setattr(ddgs, "DDGS", Broken)
    with pytest.raises(SearchUnavailable, match="ddgs: RatelimitException: 202 Ratelimit"):
        DDGSProvider().search("x")


# -- registry ------------------------------------------------------------------------------------------


def test_make_search_stacks(tmp_path):
    auto = make_search(SearchConfig(), tmp_path)
    assert isinstance(auto, CachedSearch) and isinstance(auto.inner, FallbackSearch)
    assert auto.path == tmp_path / "search_cache.sqlite"
    assert isinstance(auto.inner.fallback, LocalCorpusProvider)
    assert auto.inner.fallback.index_path == tmp_path / "search_index" / "corpus.sqlite"
    ddg = make_search(SearchConfig(provider="ddgs", cache_path=str(tmp_path / "x.sqlite"), ttl_hours=1), tmp_path)
    assert isinstance(ddg.inner, DDGSProvider) and ddg.ttl_s == 3600
    assert isinstance(make_search(SearchConfig(provider="local"), tmp_path), LocalCorpusProvider)
    with pytest.raises(ValueError, match="search.provider='bing'.*auto, ddgs, local"):
        make_search(SearchConfig(provider="bing"), tmp_path)


def test_auto_stack_offline_serves_local_docs(tmp_path, default_corpus):
    (tmp_path / "search_index").mkdir()
    shutil.copy(default_corpus.index_path, tmp_path / "search_index" / "corpus.sqlite")  # same stamp: no rebuild
    stack = make_search(SearchConfig(), tmp_path)
    t0 = time.perf_counter()
    results = stack.search("asyncio gather", 3)
    assert time.perf_counter() - t0 < 1.0
    assert results[0].url == "pydoc://asyncio.gather"
    assert stack.degraded_reason.startswith("ddgs:")
    assert stack.inner.fallback.build_seconds is None
