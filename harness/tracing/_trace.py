"""One Chrome Trace Event file per run, the per-role and per-stage usage of its model calls, and its run id.

The trace format is the JSON Object Format of Chrome's Trace Event spec ("traceEvents" list of complete
events, ph="X", microsecond ts/dur), which Perfetto and chrome://tracing open. The run's line in runs.jsonl is
written with harness.stores.append_jsonl.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from harness.stores import atomic_write_json

_PID = os.getpid()


@dataclass
class Span:
    name: str
    cat: str
    start_us: float
    tid: int
    args: dict[str, Any] = field(default_factory=dict)
    dur_us: float = 0.0

    def update(self, **args: Any) -> None:
        self.args.update(args)


class Tracer:
    """Collects spans (per thread) and per-role / per-stage LLM usage for one run. Thread-safe."""

    def __init__(self, run_id: str = "run") -> None:
        self.run_id = run_id
        self.t0 = time.perf_counter()
        self.wall_t0 = time.time()
        self.events: list[dict[str, Any]] = []
        self.usage: dict[str, dict[str, float]] = defaultdict(
            lambda: {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0, "cached": 0}
        )
        self.calls_by_stage: dict[str, int] = defaultdict(int)
        self.stage_s: dict[str, float] = defaultdict(float)
        self._lock = threading.Lock()
        self._stack = threading.local()
        self._tids: dict[int, int] = {}

    def _now_us(self) -> float:
        return (time.perf_counter() - self.t0) * 1e6

    def _tid(self) -> int:
        ident = threading.get_ident()
        with self._lock:
            return self._tids.setdefault(ident, len(self._tids) + 1)

    def _frames(self) -> list[Span]:
        if not hasattr(self._stack, "frames"):
            self._stack.frames = []
        return self._stack.frames

    def current_stage(self) -> str:
        for span in reversed(self._frames()):
            if span.cat == "stage":
                return span.name
        return "-"

    @contextlib.contextmanager
    def span(self, name: str, cat: str = "stage", **args: Any) -> Iterator[Span]:
        span = Span(name=name, cat=cat, start_us=self._now_us(), tid=self._tid(), args=dict(args))
        frames = self._frames()
        frames.append(span)
        try:
            yield span
        except BaseException as exc:
            span.args["error"] = f"{type(exc).__name__}: {exc}"[:300]
            raise
        finally:
            frames.pop()
            span.dur_us = max(self._now_us() - span.start_us, 0.0)
            event = {
                "name": span.name,
                "cat": span.cat,
                "ph": "X",
                "ts": round(span.start_us, 1),
                "dur": round(span.dur_us, 1),
                "pid": _PID,
                "tid": span.tid,
                "args": _jsonable(span.args),
            }
            with self._lock:
                self._keep(event)
                if cat == "stage" and len([f for f in frames if f.cat == "stage"]) == 0:
                    self.stage_s[name] += span.dur_us / 1e6

    def _keep(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def stage(self, name: str, **args: Any):
        return self.span(name, cat="stage", **args)

    def count_call(self, role: str, result: Any) -> None:
        stage = self.current_stage()
        with self._lock:
            u = self.usage[role]
            u["calls"] += 1
            u["prompt_tokens"] += result.prompt_tokens
            u["completion_tokens"] += result.completion_tokens
            u["latency_s"] += result.latency_s
            u["cached"] += int(bool(result.cached))
            self.calls_by_stage[stage] += 1

    def llm_seconds(self) -> float:
        """Seconds spent inside LLM calls (sum of llm spans)."""
        with self._lock:
            return sum(e["dur"] for e in self.events if e["cat"] == "llm") / 1e6

    def total_calls(self) -> int:
        with self._lock:
            return int(sum(u["calls"] for u in self.usage.values()))

    def to_chrome_trace(self) -> dict[str, Any]:
        with self._lock:
            events = sorted(self.events, key=lambda e: (e["ts"], -e["dur"]))
            tids = dict(self._tids)
        meta = [{"name": "process_name", "ph": "M", "pid": _PID, "tid": 0, "ts": 0, "args": {"name": f"harness {self.run_id}"}}]
        meta += [
            {"name": "thread_name", "ph": "M", "pid": _PID, "tid": tid, "ts": 0, "args": {"name": f"worker-{tid}"}}
            for tid in sorted(tids.values())
        ]
        # ts0_unix_us: the wall-clock time of ts 0, so a reader can place the spans in real time (MLflow traces)
        return {"traceEvents": meta + events, "displayTimeUnit": "ms",
                "otherData": {"run_id": self.run_id, "ts0_unix_us": round(self.wall_t0 * 1e6)}}

    def write(self, directory: str | Path) -> Path:
        """Write <run_id>.json atomically. The temp file has a unique name: two writers of one run id (threads or
        processes) must not write into, or rename away, each other's temp file."""
        return atomic_write_json(Path(directory) / f"{self.run_id}.json", self.to_chrome_trace())


class _NullTracer(Tracer):
    """Used when no run is active: spans still time and calls are still counted, but no span event is kept. It is
    one object for the whole process, so keeping its events would grow without bound over a long sweep."""

    def _keep(self, event: dict[str, Any]) -> None:
        pass


_current: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("harness_tracer", default=None)
_fallback = _NullTracer("untraced")


def current_tracer() -> Tracer:
    return _current.get() or _fallback


@contextlib.contextmanager
def use_tracer(tracer: Tracer) -> Iterator[Tracer]:
    token = _current.set(tracer)
    try:
        yield tracer
    finally:
        _current.reset(token)


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))


def new_run_id(prefix: str = "run") -> str:
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{os.urandom(3).hex()}"
