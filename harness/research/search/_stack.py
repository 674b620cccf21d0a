"""The search stack a SearchConfig asks for: `make_search`."""

from __future__ import annotations

from pathlib import Path

from ._cache import CachedSearch
from ._corpus import LocalCorpusProvider
from ._ddgs import DDGSProvider
from ._fallback import FallbackSearch
from ._protocol import SearchProvider

PROVIDERS = ("auto", "ddgs", "local")


def make_search(cfg, results_dir: str | Path) -> SearchProvider:
    """The search stack for a SearchConfig (see the package docstring)."""
    results = Path(results_dir)
    kind = cfg.provider
    if kind not in PROVIDERS:
        raise ValueError(f"search.provider={kind!r} is not a provider; expected one of {', '.join(PROVIDERS)}")
    cache_path = Path(cfg.cache_path) if cfg.cache_path else results / "search_cache.sqlite"

    def local() -> LocalCorpusProvider:
        return LocalCorpusProvider(cfg.local_corpus or None, index_dir=results / "search_index")

    if kind == "local":
        return local()
    ddgs = DDGSProvider(timeout_s=cfg.ddgs_timeout_s)
    if kind == "ddgs":
        return CachedSearch(ddgs, cache_path, cfg.ttl_hours)
    return CachedSearch(FallbackSearch(ddgs, local()), cache_path, cfg.ttl_hours)
