"""A fallback provider for when the primary is down, with the primary's failure recorded once per process."""

from __future__ import annotations

import contextlib
import logging
import threading

from ._protocol import SearchProvider, SearchResult

log = logging.getLogger("harness.search")

_DOWN: dict[str, str] = {}  # primary provider name -> first failure reason, for the rest of the process
_UP: set[str] = set()  # primaries that answered once: later calls need not wait for the decision
_DECIDING: dict[str, threading.Lock] = {}  # one first call per primary; concurrent first calls wait for it
_DOWN_LOCK = threading.Lock()


def reset_degradation() -> None:
    """Forget recorded primary failures (tests; or a long-running process that wants to retry the web)."""
    with _DOWN_LOCK:
        _DOWN.clear()
        _UP.clear()


class FallbackSearch:
    """Use primary; when it raises (or answers nothing) use fallback and record why in degraded_reason.

    After the primary's first failure it is skipped for the rest of the process (across instances), so an
    offline machine pays the failure once, not per query. `last_degraded` is per thread: CachedSearch reads it
    right after its own call, and another worker's answer in between must not decide what gets cached.
    """

    def __init__(self, primary: SearchProvider, fallback: SearchProvider) -> None:
        self.primary = primary
        self.fallback = fallback
        self.name = f"{primary.name}|{fallback.name}"
        self.degraded_reason: str | None = None
        self.fallback_calls = 0
        self._last = threading.local()
        self._calls_lock = threading.Lock()

    @property
    def last_degraded(self) -> bool:
        """Whether this thread's last answer came from the fallback."""
        return getattr(self._last, "degraded", False)

    @last_degraded.setter
    def last_degraded(self, value: bool) -> None:
        self._last.degraded = bool(value)

    def _primary(self, query: str, max_results: int) -> tuple[list[SearchResult] | None, str | None]:
        """(results, None) or (None, why it is down). Decided once per process: until the primary has answered
        once, its calls go one at a time, so the contexts a sweep prepares at once do not each pay (and log)
        the offline failure; the first failure is logged in one line and every later call skips the primary."""
        name = self.primary.name
        with _DOWN_LOCK:
            down, up = _DOWN.get(name), name in _UP
            deciding = _DECIDING.setdefault(name, threading.Lock())
        if down is not None:
            return None, down
        with contextlib.nullcontext() if up else deciding:
            with _DOWN_LOCK:
                down = _DOWN.get(name)
            if down is not None:
                return None, down
            try:
                results = self.primary.search(query, max_results)
            except Exception as exc:
                text = (str(exc).splitlines() or [""])[0]
                reason = (text if text.startswith(name) else f"{name}: {type(exc).__name__}: {text}")[:300]
                with _DOWN_LOCK:
                    first = name not in _DOWN
                    down = _DOWN.setdefault(name, reason)
                if first:
                    log.warning("search: %s unavailable, using %s for the rest of this process (%s)", name,
                                self.fallback.name, down[:160])
                return None, down
            with _DOWN_LOCK:
                _UP.add(name)
            return results, None

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        results, down = self._primary(query, max_results)
        if results:
            self.last_degraded = False
            return results
        if down is None:
            self.degraded_reason = self.degraded_reason or f"{self.primary.name}: no results for {query[:80]!r}"
        else:
            self.degraded_reason = down
        self.last_degraded = True
        with self._calls_lock:
            self.fallback_calls += 1
        return self.fallback.search(query, max_results)
