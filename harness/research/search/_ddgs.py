"""Web search through DuckDuckGo (the `ddgs` package), bounded by a timeout."""

from __future__ import annotations

import logging
import os
import threading

from ._protocol import SearchResult, SearchUnavailable

class DDGSProvider:
    """Web search through the `ddgs` package. DDGS_DISABLED=1 makes every call fail at once (tests, offline)."""

    name = "ddgs"

    def __init__(self, timeout_s: float = 5.0, *, region: str = "wt-wt", backend: str = "auto") -> None:
        self.timeout_s = timeout_s
        self.region = region
        self.backend = backend
        # ddgs logs one INFO line per failed engine (8 DNS errors per query offline); our one "search degraded"
        # warning says the same. Users who want them can lower the level again after construction.
        logging.getLogger("ddgs").setLevel(logging.WARNING)

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]:
        if os.environ.get("DDGS_DISABLED", "").strip().lower() in {"1", "true", "yes", "on"}:
            raise SearchUnavailable("ddgs: disabled by DDGS_DISABLED=1")
        box: dict[str, object] = {}

        def work() -> None:
            try:
                from ddgs import DDGS

                box["rows"] = DDGS(timeout=max(1, int(self.timeout_s))).text(
                    query, region=self.region, max_results=max_results, backend=self.backend
                )
            except BaseException as exc:  # re-raised in the caller's thread
                box["error"] = exc

        worker = threading.Thread(target=work, name="ddgs-search", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if worker.is_alive():
            raise SearchUnavailable(f"ddgs: no answer within {self.timeout_s:g} s")
        if "error" in box:
            exc = box["error"]
            raise SearchUnavailable(f"ddgs: {type(exc).__name__}: {str(exc)[:200]}") from exc  # type: ignore[arg-type]
        rows = box.get("rows") or []
        out = []
        for row in rows[:max_results]:  # type: ignore[union-attr]
            url = str(row.get("href") or row.get("url") or "")
            if url:
                out.append(SearchResult(str(row.get("title", "")), url, str(row.get("body", "")), self.name))
        return out
