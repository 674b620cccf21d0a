"""Run scopes: the stop flag and uncached-call counter of one pooled run, seen by its model calls."""

from __future__ import annotations

import contextvars
import threading


class RunAbandoned(RuntimeError):
    """Raised at a model call of a run whose result nobody will read any more (RunScope.stop is set): its trial
    was pruned or gated out while it ran. Not a BackendError: the backend is fine."""


class RunScope:
    """One pooled run (experiments.runs): a stop flag its model calls obey, and the uncached calls it made.

    Set for the run's thread with `run_scope` (a contextvar, so concurrent runs each see their own). When `stop`
    is set, the run's next model call raises RunAbandoned instead of reaching the cache or the backend, so a
    dropped run ends at its next call instead of finishing its task."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.uncached_calls = 0
        self._lock = threading.Lock()

    def count(self) -> None:
        with self._lock:  # a run may fan its calls out to threads that copied its context
            self.uncached_calls += 1


_RUN_SCOPE: contextvars.ContextVar[RunScope | None] = contextvars.ContextVar("harness_run_scope", default=None)


def run_scope(scope: RunScope | None) -> contextvars.Token:
    """Make `scope` the current run's (call inside the run's own context; reset with _RUN_SCOPE.reset)."""
    return _RUN_SCOPE.set(scope)

