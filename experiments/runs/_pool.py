"""One bounded executor for independent harness runs: the tasks of a trial, baseline repeats, holdout runs,
A/B cells, context preparations and calibration runs.

Results come back in submission order whatever order the workers finish in (a run starts as soon as any
other ends; finished results wait for their turn), and the caller consumes them on its own thread: reports to the pruner, ledger rows, Optuna values and MLflow calls happen there, one at a
time, in the same order as at concurrency 1. Only the runs themselves (model calls, the harness pipeline)
run on worker threads. At most `workers` runs are in flight; at concurrency 1 the next run starts only after the
caller has taken the previous result, exactly as a plain loop. A pruned trial or a stopping A/B look cancels
everything not started yet (`Ordered.cancel`); runs already started are dropped, counted in `Ordered.abandoned`
(an A/B look lets them finish; a pruned or gated-out trial stops each at its next model call). A trial's
minibatch gate and the rest of its tasks are one queue (experiments.runs's checkpoint): at concurrency N
the rest starts while the gate's last tasks run, and a gated-out candidate drops what started, as a pruned one
does.

What the pool guarantees is its own determinism: a backend whose reply depends only on the request gives the
same results at any concurrency (tests/test_pool.py). An engine that batches concurrent requests may not:
llama.cpp's batched decoding is not batch-invariant (docs/BENCHMARKS.md). The embedded backend therefore serves
each slot from a one-sequence server of its own by default (backend.embedded_batching=false), and its replies,
like the pool's, do not depend on the concurrency.

Workers are daemon threads started per run with the caller's contextvars: Ctrl-C in the caller stops the
loop at once, the process exits without waiting for a model call to end, and every reply that finished is
already in the response cache, so a resume re-issues none of them.

Concurrency is chosen by `resolve_concurrency`: `backend.concurrency` = an integer, or `auto` = what the
backend serves at once (embedded: its slots; Ollama: $OLLAMA_NUM_PARALLEL when set, else
backend.parallel_default; an OpenAI-compatible server: backend.parallel_default).
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any, Callable, Generic, Iterable, Iterator, Mapping, TypeVar

from harness.config import MAX_WORKERS, resolve_concurrency
from harness.inference import RunScope, run_scope

log = logging.getLogger("experiments.runs")

T = TypeVar("T")
R = TypeVar("R")


class RunPool:
    """At most `workers` harness runs at once; `workers=1` runs each on the caller's thread (no threads)."""

    def __init__(self, workers: int = 1, *, why: str = "") -> None:
        if int(workers) < 1:
            raise ValueError(f"concurrency must be >= 1, got {workers}")
        self.workers = min(int(workers), MAX_WORKERS)
        self.why = why

    def ordered(self, fn: Callable[[T], R], items: Iterable[T]) -> "Ordered[T, R]":
        """Iterate (item, Future) in the order of `items`; each Future is done when yielded."""
        return Ordered(fn, items, self.workers)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
        """fn over items, results in order; the first exception (in item order) is raised after the runs
        already in flight have ended, and nothing after it is started."""
        out: list[R] = []
        with self.ordered(fn, items) as results:
            for _, fut in results:
                out.append(fut.result())
        return out

    def __repr__(self) -> str:
        return f"RunPool(workers={self.workers})"


SERIAL = RunPool(1)


class Ordered(Generic[T, R]):
    """The iterator RunPool.ordered returns; a context manager that cancels what is left on exit."""

    def __init__(self, fn: Callable[[T], R], items: Iterable[T], workers: int) -> None:
        self._fn, self._items, self._workers = fn, iter(items), workers
        self._window: deque[tuple[T, Future]] = deque()
        self._scopes: dict[int, RunScope] = {}  # id(future) -> the run's stop flag and uncached calls
        self._stopped = False
        self.cancelled = 0  # items never started
        self.abandoned = 0  # runs in flight when cancelled: they end before cancel returns, results dropped
        self.dropped_calls = 0  # the uncached model calls those runs made (spent, not used)

    def _start(self, item: T) -> Future:
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        ctx = contextvars.copy_context()
        scope = self._scopes[id(fut)] = RunScope()

        def scoped() -> R:
            run_scope(scope)  # inside the run's own copy of the context
            return self._fn(item)

        def work() -> None:
            try:
                result = ctx.run(scoped)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                fut.set_exception(exc)
            else:
                fut.set_result(result)

        if self._workers == 1:
            work()
        else:
            threading.Thread(target=work, name="harness-run", daemon=True).start()
        return fut

    def _running(self) -> int:
        return sum(not f.done() for _, f in self._window)

    def _fill(self) -> None:
        # work-conserving: a run starts whenever one ends, not only when the oldest is taken (one long task at
        # the head would idle the other workers); finished results wait in the window, at most `ahead` of them
        ahead = 1 if self._workers == 1 else 4 * self._workers
        while not self._stopped and self._running() < self._workers and len(self._window) < ahead:
            try:
                item = next(self._items)
            except StopIteration:
                return
            self._window.append((item, self._start(item)))

    def __iter__(self) -> Iterator[tuple[T, Future]]:
        while True:
            self._fill()  # here, not before the yield: at concurrency 1 nothing runs ahead of the caller's decision
            if not self._window:
                return
            item, fut = self._window[0]
            while not fut.done():  # KeyboardInterrupt reaches the caller here
                wait([f for _, f in self._window if not f.done()], return_when=FIRST_COMPLETED)
                if not fut.done():  # the head's turn: its caller decides first (a gate may stop what follows)
                    self._fill()
            self._window.popleft()
            self._scopes.pop(id(fut), None)
            yield item, fut

    def cancel(self, *, interrupt: bool = False) -> None:
        """Start nothing more; runs in flight are dropped (counted in `abandoned`, their uncached calls in
        `dropped_calls`). They finish before cancel returns; with interrupt=True each ends at its next model call
        (harness.inference.RunAbandoned) instead of finishing its task: for runs whose whole output is dropped and
        that leave nothing shared half-built (a trial's task runs on prepared contexts, memory frozen), not for
        context preparations, which are stored."""
        if self._stopped:
            return
        self._stopped = True
        self.abandoned = len(self._window)
        self.cancelled = sum(1 for _ in self._items)
        if interrupt:
            for _, fut in self._window:
                self._scopes[id(fut)].stop.set()
        for _, fut in self._window:
            fut.exception()  # let them end: their model calls land in the cache, nothing is half-written
        self.dropped_calls = sum(self._scopes[id(fut)].uncached_calls for _, fut in self._window)
        self._window.clear()

    def __enter__(self) -> "Ordered[T, R]":
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is KeyboardInterrupt:  # leave daemon workers behind: the process is going down
            self._stopped = True
            return
        self.cancel()


def runner_pool(backend_cfg: Any, identity: Mapping[str, Any], *, environ: Mapping[str, str] | None = None) -> RunPool:
    """The RunPool `backend.concurrency` asks for (see resolve_concurrency), with the reason it was chosen, against
    the backend that really answers: the producer's resolved kind in the runner's identity() (under
    backend.kind=auto the configured kind does not say whether Ollama or the embedded model runs)."""
    producer = identity.get("producer") if isinstance(identity, Mapping) else None
    kind = str((producer or {}).get("backend") or getattr(backend_cfg, "kind", "fake"))
    n, why = resolve_concurrency(getattr(backend_cfg, "concurrency", 1), kind,
                                 slots=int(getattr(backend_cfg, "embedded_slots", 1) or 1),
                                 parallel_default=int(getattr(backend_cfg, "parallel_default", 4) or 4),
                                 environ=environ)
    return RunPool(n, why=why)
