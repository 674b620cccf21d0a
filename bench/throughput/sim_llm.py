"""A simulated LLM server for the benchmarks: fixed latency per call, a bounded number of calls served at
once, and deterministic replies shaped like a real model's for every prompt the harness sends.

It implements the project's LLM protocol (`chat(messages, *, schema, temperature, max_tokens, seed)` ->
ChatResult), so it enters the real pipeline through `harness.inference.wrap_roles` like any backend. Replies
are built from the request: a JSON instance of the request's schema (plan, prior knowledge, research
compression, judge rubric, panel, memory observation, step graph, mutated instruction) or Markdown for
synthesis and revisions, with the item count the prompt asks for. Everything depends only on the request, so
the same request gets the same reply (as a cache would see it). Token counts are characters / 4, the usual
rule of thumb for English text with BPE tokenisers; the synthesis reply has about `answer_words` words.

Accounting is thread-safe: `calls`, `busy_s` (wall seconds spent inside chat, latency and queueing for a free
slot included), tokens, and calls per kind of request.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import threading
import time
from collections import Counter
from typing import Any, Mapping, Sequence

from harness.inference import ChatResult

_TASK = re.compile(r"^(?:# Task\n|Task: )(.+)$", re.MULTILINE)
_EXACTLY = re.compile(r"exactly (\d{1,2}) numbered items")
_WORDS = (
    "asyncio event loop coroutine task gather timeout cancellation semaphore queue backpressure thread pool "
    "executor blocking call context manager structured concurrency exception group logging handler level "
    "encoding buffer file path pathlib json csv pickle sqlite transaction index pytest fixture mock coverage "
    "profile memory cache latency throughput retry backoff configuration validation typing dataclass"
).split()


_TOPICS = ("asyncio.gather", "asyncio.TaskGroup", "asyncio.timeout", "asyncio.Queue", "asyncio.Semaphore",
           "threading.Lock", "concurrent.futures", "contextvars", "the GIL", "multiprocessing.Pool")


def kind_of(messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any] | None) -> str:
    """Which harness request this is, from the schema's fields (JSON calls) or the prompt (text calls)."""
    if schema:
        props = set((schema.get("properties") or {}))
        for kind, keys in (
            ("plan", {"task_type", "complexity"}),
            ("prior_knowledge", {"known_facts", "gaps"}),
            ("research_compress", {"knowledge", "confidence"}),
            ("memory_compress", {"title", "narrative", "key_facts"}),
            ("panel", {"verdict", "score", "comment"}),
            ("step_graph", {"tasks", "exit_criteria"}),
            ("mutation", {"instruction"}),
            ("judge", {"feedback", "weaknesses"}),
        ):
            if keys <= props:
                return kind
        return "json_other"
    last = messages[-1].get("content", "") if messages else ""
    system = messages[0].get("content", "") if messages else ""
    if "but the task needs exactly" in last:
        return "synth_retry"
    if system.startswith("You revise a Markdown answer"):
        return "revise"
    return "synthesis"


class SimLLM:
    """Fixed-latency simulated server. capacity=None serves every call at once; capacity=C has C slots and
    queues the rest (a server with C parallel decoding slots)."""

    def __init__(self, latency_s: float = 0.05, *, capacity: int | None = None, model: str = "sim-model",
                 backend: str = "sim", answer_words: int = 300, judge_scores: tuple[int, int] = (5, 9),
                 steps: int | None = None) -> None:
        self.latency_s = float(latency_s)
        self.capacity = capacity
        self.model, self.backend = model, backend
        self.answer_words = answer_words
        self.judge_scores = judge_scores
        self.steps = steps  # step-graph replies list this many independent steps (concurrency bench)
        self._slots = threading.BoundedSemaphore(capacity) if capacity else None
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.calls = 0
            self.busy_s = 0.0
            self.prompt_tokens = 0
            self.completion_tokens = 0
            self.kinds: Counter[str] = Counter()
            self.kind_tokens: Counter[str] = Counter()
            self.in_flight = 0
            self.max_in_flight = 0

    def chat(self, messages, *, schema=None, temperature=0.7, max_tokens=512, seed=None) -> ChatResult:
        t0 = time.perf_counter()
        kind = kind_of(messages, schema)
        text = self.reply(kind, messages, schema, seed)
        if self._slots is not None:
            self._slots.acquire()
        try:
            with self._lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            if self.latency_s:
                time.sleep(self.latency_s)
            with self._lock:
                self.in_flight -= 1
        finally:
            if self._slots is not None:
                self._slots.release()
        prompt = sum(len(m.get("content", "")) for m in messages) // 4 + 4 * len(messages)
        completion = max(1, math.ceil(len(text) / 4))
        elapsed = time.perf_counter() - t0
        with self._lock:
            self.calls += 1
            self.busy_s += elapsed
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self.kinds[kind] += 1
            self.kind_tokens[kind] += prompt + completion
        return ChatResult(text, prompt, completion, elapsed, self.model, self.backend)

    # -- replies -------------------------------------------------------------------------------------------
    def reply(self, kind: str, messages, schema, seed) -> str:
        blob = json.dumps([list(map(dict, messages)), schema, seed], sort_keys=True, default=str)
        rng = random.Random(int(hashlib.sha256(blob.encode()).hexdigest()[:12], 16))
        joined = "\n".join(m.get("content", "") for m in messages)
        m = _TASK.search(joined)
        task = m.group(1).strip() if m else joined[:200]
        if schema:
            obj = instance(schema, rng)
            self._shape(kind, obj, task, rng)
            return json.dumps(obj)
        n = None
        m = _EXACTLY.search(joined)
        if m:
            n = int(m.group(1))
        return markdown_answer(task, n, self.answer_words, rng)

    def _shape(self, kind: str, obj: dict, task: str, rng: random.Random) -> None:
        from harness.synthesis import count_from_task

        low = task.lower()
        if kind == "plan":
            count = count_from_task(task)
            obj["task_type"] = ("enumerated" if count and re.match(r"\s*(list|name|give \d)", low) else
                                "best_practices" if "best practice" in low else "research")
            obj["complexity"] = "medium"
            obj["expected_sections"] = count
            obj["subtasks"] = []
            obj["search_queries"] = [task[:80], " ".join(task.split()[:6]) + " examples"][: len(obj["search_queries"]) or 2]
        elif kind == "judge":
            lo, hi = self.judge_scores
            for key, value in list(obj.items()):
                if isinstance(value, int):
                    obj[key] = rng.randint(lo, hi)
        elif kind == "research_compress":
            obj["relevance"] = round(rng.uniform(0.6, 0.9), 2)
            obj["coverage"] = round(rng.uniform(0.5, 0.9), 2)
            obj["confidence"] = round(rng.uniform(0.55, 0.85), 2)
        elif kind == "panel":
            obj["verdict"] = "accept"
            obj["score"] = rng.randint(6, 9)
        elif kind == "step_graph":
            n = self.steps or 2
            obj["tasks"] = [{"id": f"E{i}", "question": f"Explain how {_TOPICS[(i - 1) % len(_TOPICS)]} works in "
                             f"Python (part {i})", "depends_on": [], "criteria": []} for i in range(1, n + 1)]
        elif kind == "mutation":
            obj["instruction"] = (
                f"Write the answer in Markdown with one heading per point. For every point name a concrete tool, "
                f"function or setting and say why it matters; variant {rng.randint(1, 10**6)}."
            )


def instance(schema: Mapping[str, Any], rng: random.Random) -> Any:
    """A value that satisfies a (simple) JSON schema, filled with plausible words."""
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return instance(schema["anyOf"][0], rng)
    kind = schema.get("type")
    if kind == "object":
        return {k: instance(v, rng) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        lo, hi = int(schema.get("minItems", 0)), int(schema.get("maxItems", 3))
        return [instance(schema.get("items", {"type": "string"}), rng) for _ in range(max(lo, min(hi, 2)))]
    if kind == "string":
        hi = int(schema.get("maxLength", 200))
        lo = int(schema.get("minLength", 0))
        target = max(lo, int(hi * rng.uniform(0.5, 0.8)))
        return words(rng, target)[:hi]
    if kind == "integer":
        lo, hi = int(schema.get("minimum", 1)), int(schema.get("maximum", 10))
        return rng.randint(lo, hi)
    if kind == "number":
        lo, hi = float(schema.get("minimum", 0.0)), float(schema.get("maximum", 1.0))
        return round(rng.uniform(lo, hi), 2)
    if kind == "boolean":
        return True
    return None


def words(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    size = 0
    while size < chars:
        w = rng.choice(_WORDS)
        out.append(w)
        size += len(w) + 1
    text = " ".join(out)
    return text[:1].upper() + text[1:]


def markdown_answer(task: str, n: int | None, answer_words: int, rng: random.Random) -> str:
    """A Markdown answer of about answer_words words: n numbered items when a count is asked, else sections."""
    items = n or 4
    per = max(12, answer_words // items)
    lines = [f"{task.rstrip('.')}:", ""]
    for i in range(1, items + 1):
        body = words(rng, per * 6)
        if n:
            lines.append(f"{i}. **{words(rng, 20).title()}**: {body}.")
        else:
            lines += [f"## {words(rng, 24).title()}", "", f"{body} [{i}].", ""]
    return "\n".join(lines)
