"""Measure the memory's offline embeddings: load time, throughput, retrieval quality.

    python -m bench.quality.memory_embeddings [--json results/bench_embeddings.json]

Retrieval runs through the real Memory (ChromaDB + SQLite FTS5) on a hand-labelled set of 40 observations and
25 queries written for this script (keyword queries; loose paraphrases that still share a word or two
with their targets; and no-overlap queries that share no word stem with them). Methods:
FTS5 alone, each embedding alone (Chroma), and each embedding fused with FTS5 by reciprocal rank fusion, which
is what `Memory.get_context` returns. Metrics: recall@3 (share of a query's relevant observations in the top 3)
and MRR (1 / rank of the first relevant observation, 0 past rank 10).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harness.config import MemoryConfig  # noqa: E402
from harness.memory import Memory, Observation, rrf_merge  # noqa: E402
from harness.memory.embeddings import load_minilm, make_embedding_function, minilm_available  # noqa: E402

# id -> (title, narrative, key facts)
CORPUS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "aio-gather": ("Running coroutines concurrently with asyncio.gather",
                   "asyncio.gather schedules several awaitables at once and returns their results in order.",
                   ("return_exceptions=True collects errors instead of raising the first",)),
    "aio-taskgroup": ("asyncio.TaskGroup structured concurrency",
                      "Python 3.11 TaskGroup cancels the remaining tasks when one fails and raises an ExceptionGroup.",
                      ("use async with asyncio.TaskGroup() as tg",)),
    "aio-blocking": ("Blocking calls in async code",
                     "A blocking call such as time.sleep or requests.get stalls the whole event loop.",
                     ("offload with asyncio.to_thread or run_in_executor",)),
    "aio-timeout": ("Timeouts for awaitables",
                    "asyncio.timeout and wait_for cancel an operation that takes too long.",
                    ("asyncio.timeout is a context manager added in 3.11",)),
    "aio-queue": ("Producer consumer pipelines with asyncio.Queue",
                  "An asyncio.Queue with a bounded maxsize gives back-pressure between producers and consumers.",
                  ("call task_done and join to wait for the queue to drain",)),
    "aio-semaphore": ("Limiting concurrency with a semaphore",
                      "asyncio.Semaphore caps how many requests run at the same time against a server.",
                      ("async with sem: around each request",)),
    "test-fixtures": ("pytest fixtures",
                      "Fixtures provide setup and teardown; scope controls how often they are created.",
                      ("tmp_path gives each test its own directory",)),
    "test-parametrize": ("Table-driven tests with parametrize",
                         "pytest.mark.parametrize runs one test function over many input and expected pairs.",
                         ("ids make the table readable in the report",)),
    "test-mock": ("Mocking with monkeypatch and unittest.mock",
                  "monkeypatch replaces attributes and environment variables for the duration of a test.",
                  ("patch where the name is looked up, not where it is defined",)),
    "test-hypothesis": ("Property-based testing with Hypothesis",
                        "Hypothesis generates inputs from strategies and shrinks failures to a minimal example.",
                        ("@given(st.text()) explores unicode edge cases",)),
    "test-coverage": ("Measuring test coverage",
                      "coverage.py records which lines ran; branch coverage also checks both sides of each if.",
                      ("pytest-cov adds --cov to pytest",)),
    "test-flaky": ("Flaky tests",
                   "Tests that depend on timing, ordering or the network fail intermittently.",
                   ("freeze time and seed randomness",)),
    "pkg-pyproject": ("Packaging with pyproject.toml",
                      "pyproject.toml declares the build backend and project metadata in one file.",
                      ("optional-dependencies define extras",)),
    "pkg-venv": ("Virtual environments",
                 "python -m venv creates an isolated interpreter so project dependencies do not clash.",
                 ("activate, then pip install -e .",)),
    "pkg-lock": ("Pinning dependencies",
                 "Lock files pin exact versions so installs are reproducible across machines.",
                 ("pip-compile or uv lock produce them",)),
    "pkg-wheel": ("Building wheels",
                  "A wheel is a built distribution that installs without running setup code.",
                  ("python -m build creates sdist and wheel",)),
    "db-wal": ("SQLite write-ahead logging",
               "WAL mode lets readers continue while one writer appends to the log file.",
               ("PRAGMA journal_mode=WAL persists in the database",)),
    "db-fts": ("Full-text search with SQLite FTS5",
               "FTS5 virtual tables index text and rank matches with bm25.",
               ("quote user input to avoid query syntax errors",)),
    "db-busy": ("Database is locked errors",
                "Concurrent writers hit SQLITE_BUSY; a busy_timeout makes them wait and retry.",
                ("keep write transactions short",)),
    "db-index": ("Indexes and query plans",
                 "EXPLAIN QUERY PLAN shows whether a query scans the table or uses an index.",
                 ("index columns used in WHERE and JOIN",)),
    "git-rebase": ("Interactive rebase",
                   "git rebase -i rewrites local history: squash, reorder or edit commits before pushing.",
                   ("never rebase commits others already pulled",)),
    "git-bisect": ("Finding a regression with git bisect",
                   "git bisect binary-searches history between a good and a bad commit.",
                   ("git bisect run automates it with a test script",)),
    "git-hooks": ("Git hooks and pre-commit",
                  "pre-commit runs linters and formatters before each commit is recorded.",
                  ("configure hooks in .pre-commit-config.yaml",)),
    "git-worktree": ("Working on two branches at once",
                     "git worktree checks out another branch into a second directory sharing the same repository.",
                     ("no need to stash to switch context",)),
    "dock-cache": ("Docker layer caching",
                   "Order Dockerfile instructions from least to most often changed so cached layers are reused.",
                   ("copy requirements before the source tree",)),
    "dock-multistage": ("Multi-stage Docker builds",
                        "A build stage compiles; the final stage copies only the artifacts, keeping the image small.",
                        ("use slim base images",)),
    "dock-compose": ("Docker Compose for local services",
                     "Compose starts an application together with its database and cache from one YAML file.",
                     ("depends_on orders startup but not readiness",)),
    "dock-secrets": ("Secrets in containers",
                     "Do not bake credentials into images; pass them at runtime through secrets or environment.",
                     ("build args are visible in image history",)),
    "type-hints": ("Type hints and mypy",
                   "Static type checking with mypy catches wrong argument types before the code runs.",
                   ("enable strict mode gradually",)),
    "type-protocol": ("Structural typing with Protocol",
                      "typing.Protocol describes the methods an object needs without inheritance.",
                      ("runtime_checkable allows isinstance checks",)),
    "type-dataclass": ("Frozen dataclasses",
                       "dataclass(frozen=True) makes instances immutable and hashable.",
                       ("dataclasses.replace returns a modified copy",)),
    "type-generics": ("Generic functions and TypeVar",
                      "TypeVar links the input and output types of a function for the checker.",
                      ("Python 3.12 adds def f[T](x: T) -> T syntax",)),
    "log-config": ("Configuring the logging module",
                   "Libraries get a logger by name and leave handlers to the application.",
                   ("logging.getLogger(__name__) in every module",)),
    "log-structured": ("Structured JSON logs",
                       "Emitting one JSON object per line makes logs searchable by field.",
                       ("include a request id in every record",)),
    "log-tracing": ("Tracing spans",
                    "A trace records nested spans with start and duration; Perfetto displays Chrome trace files.",
                    ("one span per pipeline stage",)),
    "log-warnings": ("Warnings versus logging",
                     "warnings.warn is for developers using an API; logging is for operators running a program.",
                     ("filterwarnings turns warnings into errors in tests",)),
    "perf-profile": ("Profiling Python code",
                     "cProfile and py-spy show which functions consume the most CPU time.",
                     ("profile before optimising",)),
    "perf-gil": ("The GIL and CPU-bound work",
                 "Threads do not speed up CPU-bound Python because of the global interpreter lock; use processes.",
                 ("concurrent.futures.ProcessPoolExecutor",)),
    "perf-cache": ("Memoisation with functools.lru_cache",
                   "lru_cache stores results of pure functions keyed by their arguments.",
                   ("cache_info reports hits and misses",)),
    "perf-numpy": ("Vectorising with numpy",
                   "Replacing Python loops with numpy array operations moves the work into compiled code.",
                   ("avoid per-element Python calls",)),
}

# (query, relevant ids, kind)
QUERIES: list[tuple[str, tuple[str, ...], str]] = [
    ("asyncio.gather return_exceptions", ("aio-gather",), "keyword"),
    ("how do I run many network calls at the same time without threads", ("aio-gather", "aio-semaphore"), "paraphrase"),
    ("my event loop freezes when I call requests inside a coroutine", ("aio-blocking",), "paraphrase"),
    ("cancel an await that takes too long", ("aio-timeout",), "paraphrase"),
    ("TaskGroup ExceptionGroup", ("aio-taskgroup",), "keyword"),
    ("pytest parametrize table of inputs", ("test-parametrize",), "keyword"),
    ("replace an environment variable only while one test runs", ("test-mock",), "paraphrase"),
    ("generate random inputs and shrink the failing case", ("test-hypothesis",), "paraphrase"),
    ("tests that pass sometimes and fail other times", ("test-flaky",), "paraphrase"),
    ("SQLite database is locked busy_timeout", ("db-busy",), "keyword"),
    ("let readers keep going while someone writes to the database", ("db-wal",), "paraphrase"),
    ("rank text matches by relevance in sqlite", ("db-fts",), "paraphrase"),
    ("git bisect regression", ("git-bisect",), "keyword"),
    ("clean up my commits into one before opening a pull request", ("git-rebase",), "paraphrase"),
    ("make container image builds faster", ("dock-cache", "dock-multistage"), "paraphrase"),
    ("keep passwords out of the image", ("dock-secrets",), "paraphrase"),
    ("mypy strict type checking", ("type-hints",), "keyword"),
    ("duck typing interface without a base class", ("type-protocol",), "paraphrase"),
    ("speed up a CPU heavy loop in Python", ("perf-gil", "perf-numpy", "perf-profile"), "paraphrase"),
    ("lru_cache hits misses", ("perf-cache",), "keyword"),
    # no word (nor crude stem) in common with the target: only meaning can find these
    ("which revision introduced the bug", ("git-bisect",), "no-overlap"),
    ("reduce the shipped artefact footprint", ("dock-multistage",), "no-overlap"),
    ("avoid recomputing expensive answers", ("perf-cache",), "no-overlap"),
    ("what makes my script slow", ("perf-profile",), "no-overlap"),
    ("stop a slow await", ("aio-timeout",), "no-overlap"),
]
KINDS = ("keyword", "paraphrase", "no-overlap")


def observations() -> list[Observation]:
    return [
        Observation(title, narrative, facts, title, run_id, 1_700_000_000.0 + i)
        for i, (run_id, (title, narrative, facts)) in enumerate(CORPUS.items())
    ]


def recall_at(ranked: list[str], relevant: tuple[str, ...], k: int = 3) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant)


def reciprocal_rank(ranked: list[str], relevant: tuple[str, ...], cutoff: int = 10) -> float:
    for rank, doc in enumerate(ranked[:cutoff], start=1):
        if doc in relevant:
            return 1.0 / rank
    return 0.0


def speed(name: str, texts: list[str]) -> dict[str, float]:
    """Load time (cold: model read and first call) and docs/s over texts, best of 3."""
    t0 = time.perf_counter()
    if name == "minilm":
        load_minilm.cache_clear()
    ef = make_embedding_function(name)
    ef(["warm up"])
    load_s = time.perf_counter() - t0
    runs = []
    for _ in range(3):
        t0 = time.perf_counter()
        ef(texts)
        runs.append(time.perf_counter() - t0)
    return {"load_s": load_s, "docs_per_s": len(texts) / min(runs)}


def quality(rankings: dict[str, list[list[str]]]) -> dict[str, dict[str, float]]:
    out = {}
    for method, ranked_lists in rankings.items():
        rows: dict[str, list[tuple[float, float]]] = {"all": [], **{kind: [] for kind in KINDS}}
        for ranked, (_, relevant, kind) in zip(ranked_lists, QUERIES):
            pair = (recall_at(ranked, relevant), reciprocal_rank(ranked, relevant))
            rows["all"].append(pair)
            rows[kind].append(pair)
        out[method] = {
            f"{metric}_{part}": statistics.mean(p[i] for p in pairs)
            for part, pairs in rows.items()
            for i, metric in enumerate(("recall3", "mrr"))
        }
    return out


def run(root: Path) -> dict:
    embeddings = ["hashing"] + (["minilm"] if minilm_available() else [])
    texts = [f"{t}. {n}" for t, n, _ in CORPUS.values()] * 5  # 200 short texts
    speeds = {name: speed(name, texts) for name in embeddings}

    obs = observations()
    first = Memory(MemoryConfig(embedding=embeddings[0]), root)
    for o in obs:
        first.store(o)
    rankings: dict[str, list[list[str]]] = {"fts5": [first.keyword_search(q, 20) for q, _, _ in QUERIES]}
    for name in embeddings:
        mem = first if name == embeddings[0] else Memory(MemoryConfig(embedding=name), root)  # backfills
        vec = [mem.vector_search(q, 20) for q, _, _ in QUERIES]
        rankings[name] = vec
        rankings[f"rrf({name}+fts5)"] = [rrf_merge([v, f]) for v, f in zip(vec, rankings["fts5"])]
    return {"embeddings": embeddings, "speed": speeds, "quality": quality(rankings), "n_obs": len(obs),
            "n_queries": len(QUERIES), "n_texts": len(texts)}


def table(result: dict) -> str:
    lines = [f"speed ({result['n_texts']} short texts, best of 3)",
             f"{'embedding':<10} {'load_s':>8} {'docs/s':>10}"]
    for name, s in result["speed"].items():
        lines.append(f"{name:<10} {s['load_s']:>8.2f} {s['docs_per_s']:>10.0f}")
    lines.append("")
    counts = ", ".join(f"{sum(k == kind for *_, k in QUERIES)} {kind}" for kind in KINDS)
    lines.append(f"retrieval ({result['n_obs']} observations, {result['n_queries']} queries: {counts}); R@3 / MRR")
    parts = ("all", *KINDS)
    lines.append(f"{'method':<22}" + "".join(f"{p:>16}" for p in parts))
    for method, q in result["quality"].items():
        cells = "".join(f"{q[f'recall3_{p}']:>9.2f} /{q[f'mrr_{p}']:>5.2f}" for p in parts)
        lines.append(f"{method:<22}{cells}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-embeddings-") as tmp:
        result = run(Path(tmp))
    print(table(result))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
