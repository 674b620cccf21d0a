"""What every provider shares: `SearchResult`, the `SearchProvider` protocol, `SearchUnavailable`, query normalising."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

@dataclass(frozen=True)
class SearchResult:
    title: str
    url: str
    snippet: str
    source: str  # provider name that produced it

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@runtime_checkable
class SearchProvider(Protocol):
    name: str

    def search(self, query: str, max_results: int = 5) -> list[SearchResult]: ...


class SearchUnavailable(RuntimeError):
    """A provider cannot answer (disabled, offline, rate-limited, timed out). The message names it and why."""


def normalize_query(query: str) -> str:
    return " ".join(query.lower().split())
