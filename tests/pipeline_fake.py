"""A scripted model for the whole run lifecycle: one FakeLLM whose reply depends on which stage is asking.

The stage is recognised from the system prompt each stage sends (planner passes, step-graph planner, research
compressor, judge, panel, reviser, memory compressor); anything else is the producer's synthesis (or its count
retry). Replies per stage are a string, a list (consumed in order; the last one repeats) or a callable(messages).
A callable may raise (e.g. BackendError) to simulate a backend failure. `Router.calls` counts calls per stage and
keeps their messages, so tests assert what each stage was asked.
"""

from __future__ import annotations

import json
import threading
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable

from harness.config import HarnessConfig, OrchestratorConfig, ResearchConfig, WiggumConfig
from harness.inference._fake import FakeLLM
from harness.inference._roles import fake_roles
from harness.research.search import SearchResult

STAGE_MARKERS = (  # (system prompt substring, stage), first match wins
    ("You assess what you already know", "prior"),
    ("You plan a research task", "plan"),
    ("You split a compound research task", "graph"),
    ("You compress web research", "research"),
    ("You compress a finished research run", "memory"),
    ("You are a strict, fair reviewer", "judge"),
    ("on a review panel", "panel"),
    ("You revise a Markdown answer", "revise"),
)

PRIOR = json.dumps({"known_facts": ["asyncio runs coroutines on an event loop"], "gaps": ["current asyncio APIs"]})


def plan_json(task_type: str = "enumerated", complexity: str = "medium", sections: int | None = 5,
              queries=("asyncio best practices",), subtasks=()) -> str:
    return json.dumps({
        "task_type": task_type, "complexity": complexity, "expected_sections": sections,
        "search_queries": list(queries), "prior_work_summary": "", "notes": "name concrete APIs",
        "subtasks": list(subtasks),
    })


RESEARCH = json.dumps({
    "knowledge": "asyncio.gather runs awaitables concurrently; asyncio.timeout bounds a wait.",
    "relevance": 0.9, "coverage": 0.8, "confidence": 0.9, "notes": "enough", "next_query": "",
})
MEMORY = json.dumps({
    "title": "Asyncio practices run",
    "narrative": "Listed asyncio practices: gather for concurrency, timeouts, TaskGroup.",
    "key_facts": ["asyncio.TaskGroup cancels sibling tasks on failure"],
})
PANEL = json.dumps({"verdict": "accept", "score": 8, "comment": "Concrete and correct."})


def judge_json(score: int = 9, feedback: str = "Add version numbers.") -> str:
    dims = {d: score for d in ("relevance", "completeness", "depth", "specificity", "structure", "grounded")}
    return json.dumps({**dims, "feedback": feedback, "weaknesses": ["few versions"]})


_PRACTICES = (
    ("gather", "use `asyncio.gather` with `return_exceptions=True` so one failure does not hide the others"),
    ("timeouts", "bound every wait with `asyncio.timeout` (Python 3.11) instead of letting a slow peer hang the loop"),
    ("task groups", "start related tasks in an `asyncio.TaskGroup`, which cancels the siblings when one fails"),
    ("blocking calls", "move blocking I/O to `asyncio.to_thread` so the event loop keeps serving other coroutines"),
    ("queues", "hand work between producers and consumers through an `asyncio.Queue` with a `maxsize` for backpressure"),
    ("debug mode", "run with `PYTHONASYNCIODEBUG=1` during tests to log callbacks slower than 100 ms"),
    ("cancellation", "re-raise `CancelledError` after cleanup so the caller's cancel actually takes effect"),
    ("semaphores", "cap concurrent connections with an `asyncio.Semaphore` sized to the server's limit"),
)


def numbered(n: int, topic: str = "asyncio") -> str:
    """n distinct practices (a realistic answer: the evaluators flag one sentence repeated as degenerate)."""
    return "\n".join(
        f"{i}. **{_PRACTICES[(i - 1) % len(_PRACTICES)][0].capitalize()} in {topic}**: "
        f"{_PRACTICES[(i - 1) % len(_PRACTICES)][1]} [1]."
        for i in range(1, n + 1)
    )


class Router:
    """Dispatches each call to the stage's reply; thread-safe (FakeLLM calls it under its lock)."""

    def __init__(self, **replies: Any) -> None:
        self.replies: dict[str, Any] = {
            "prior": PRIOR, "plan": plan_json(), "graph": None, "research": RESEARCH, "memory": MEMORY,
            "judge": judge_json(), "panel": PANEL, "revise": numbered(5), "synth": numbered(5), "retry": numbered(5),
        }
        self.replies.update(replies)
        self.calls: Counter[str] = Counter()
        self.messages: dict[str, list[list[dict[str, str]]]] = defaultdict(list)
        self.threads: dict[str, set[str]] = defaultdict(set)

    @staticmethod
    def stage_of(messages: list[dict[str, str]]) -> str:
        system = next((m.get("content", "") for m in messages if m.get("role") == "system"), "")
        for marker, stage in STAGE_MARKERS:
            if marker in system:
                return stage
        last = messages[-1].get("content", "") if messages else ""
        return "retry" if "Rewrite the complete answer" in last else "synth"

    def __call__(self, messages: list[dict[str, str]]) -> str:
        stage = self.stage_of(messages)
        self.calls[stage] += 1
        self.messages[stage].append(messages)
        self.threads[stage].add(threading.current_thread().name)
        reply = self.replies.get(stage)
        if isinstance(reply, list):
            reply = reply.pop(0) if len(reply) > 1 else reply[0]
        if callable(reply):
            reply = reply(messages)
        if reply is None:
            raise AssertionError(f"pipeline fake: no reply scripted for stage {stage!r}")
        return reply

    def user_text(self, stage: str, index: int = 0) -> str:
        return "\n".join(m["content"] for m in self.messages[stage][index] if m["role"] != "system")


def pipeline_llm(router: Router, *, latency_s: float = 0.0, backend: str = "fake") -> FakeLLM:
    """One FakeLLM for all roles; every prompt matches the empty key, so the router answers everything."""
    return FakeLLM(keyed={"": router}, latency_s=latency_s, backend=backend)


class ListSearch:
    """A search provider with canned results per query (non-http URLs, so no page enrichment is attempted)."""

    name = "list"

    def __init__(self, latency_s: float = 0.0) -> None:
        self.queries: list[str] = []
        self.latency_s = latency_s
        self._lock = threading.Lock()

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        import time

        with self._lock:
            self.queries.append(query)
        if self.latency_s:
            time.sleep(self.latency_s)
        words = "-".join(query.lower().split())[:40]
        return [
            SearchResult(f"{query} ({i})", f"doc://{words}/{i}",
                         f"{query}: asyncio.gather, asyncio.TaskGroup and asyncio.timeout in Python 3.11; "
                         + " ".join(_tokens(f"{query}/{i}")), self.name)
            for i in range(1, min(max_results, 3) + 1)
        ]


def _tokens(seed: str, n: int = 8) -> list[str]:
    """Made-up words unique to one result, so each query's results count as novel."""
    import hashlib

    return [f"term{hashlib.sha256(f'{seed}/{k}'.encode()).hexdigest()[:6]}" for k in range(n)]


def config(tmp_path: Path, **over: Any) -> HarnessConfig:
    """Fast defaults: one research round, one wiggum round, no page enrichment; keyword overrides replace fields."""
    cfg = HarnessConfig(results_dir=str(tmp_path / "results"))
    cfg.research = ResearchConfig(max_rounds=1, enrich_urls=0)
    cfg.wiggum = WiggumConfig(max_rounds=1)
    cfg.orchestrator = OrchestratorConfig(mode="off")
    for key, value in over.items():
        setattr(cfg, key, value)
    return cfg


def make_harness(tmp_path: Path, router: Router, *, latency_s: float = 0.0, backend: str = "fake",
                 search: ListSearch | None = None, cfg: HarnessConfig | None = None, **over: Any):
    from evaluators import HARNESS_EVALUATOR
    from harness.agent import Harness

    cfg = cfg if cfg is not None else config(tmp_path, **over)
    roles = fake_roles(pipeline_llm(router, latency_s=latency_s, backend=backend))
    return Harness(cfg, roles, evaluator=HARNESS_EVALUATOR, search=search if search is not None else ListSearch())


def read_trace(path: str | Path) -> list[dict[str, Any]]:
    """The complete ("X") events of a Chrome trace file, in time order."""
    data = json.loads(Path(path).read_text())
    assert isinstance(data.get("traceEvents"), list)
    return sorted((e for e in data["traceEvents"] if e.get("ph") == "X"), key=lambda e: (e["ts"], -e["dur"]))


def top_stages(events: list[dict[str, Any]], tid: int | None = None) -> list[str]:
    """Names of stage spans not nested in another stage span (same thread), in start order."""
    stages = [e for e in events if e["cat"] == "stage" and (tid is None or e["tid"] == tid)]
    out = []
    for e in stages:
        inside = any(o is not e and o["tid"] == e["tid"] and o["ts"] <= e["ts"] and e["ts"] + e["dur"] <= o["ts"] + o["dur"]
                     and (o["ts"], -o["dur"]) < (e["ts"], -e["dur"]) for o in stages)
        if not inside:
            out.append(e["name"])
    return out


Reply = str | list | Callable[[list[dict[str, str]]], str]
