"""The output check: URLs in a final answer that no gathered source has."""

from __future__ import annotations

import re
from typing import Any, Iterable
from urllib.parse import urlsplit

_ANSWER_URL = re.compile(r"\b(?:https?|ftp|file)://[^\s<>\"'`()\[\]{}|\\^]+", re.IGNORECASE)
_URL_TAIL = ".,;:!?*_~"


def _norm_url(url: str) -> str:
    parts = urlsplit(url.rstrip(_URL_TAIL))
    path = parts.path.rstrip("/")
    query = f"?{parts.query}" if parts.query else ""
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}{query}"


def _safe_norm(url: str) -> str:
    try:
        return _norm_url(url)
    except ValueError:  # malformed (e.g. a bad IPv6 host): compared as written
        return url.rstrip(_URL_TAIL)


def unsourced_urls(answer: str, gathered: Iterable[str]) -> tuple[dict[str, Any], ...]:
    """URLs in the final answer that appear in none of the gathered texts (task, memory, research context, source
    URLs and snippets, file text): each {"url", "host_seen"}. A URL the model was never shown is either invented
    or planted (an injection that asks the answer to link to, or load an image from, an attacker's address); the
    run record keeps the list so such a URL never passes silently. host_seen: the host does appear in a source
    (a deeper page of a cited site is less suspicious than a new host). URLs are compared without fragment, trailing
    slash or trailing punctuation, with scheme and host lower-cased."""
    texts = [t for t in gathered if isinstance(t, str) and t]
    seen = {_safe_norm(m.group(0)) for t in texts for m in _ANSWER_URL.finditer(t)}
    hosts = {urlsplit(u).netloc for u in seen}
    out: dict[str, dict[str, Any]] = {}
    for m in _ANSWER_URL.finditer(answer or ""):
        raw = m.group(0).rstrip(_URL_TAIL)
        norm = _safe_norm(raw)
        if norm in seen or norm in out or any(raw in t for t in texts):
            continue
        try:
            host = urlsplit(norm).netloc
        except ValueError:
            host = ""
        out[norm] = {"url": raw[:300], "host_seen": bool(host) and host in hosts}
    return tuple(out.values())
