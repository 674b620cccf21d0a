"""What the backends share: host normalisation, retry with exponential backoff, and message conversion."""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Mapping, Sequence, TypeVar
from urllib.parse import urlsplit

log = logging.getLogger("harness.backends")

T = TypeVar("T")

DEFAULT_OLLAMA_HOST = "http://127.0.0.1:11434"
MAX_BACKOFF_S = 30.0


def ollama_host(configured: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The Ollama base URL: config, then OLLAMA_HOST, then the default; always scheme://host:port."""
    env = os.environ if environ is None else environ
    raw = (configured or env.get("OLLAMA_HOST") or DEFAULT_OLLAMA_HOST).strip().rstrip("/")
    if "://" not in raw:
        raw = "http://" + raw
    parts = urlsplit(raw)
    host = parts.hostname or "127.0.0.1"
    if host == "0.0.0.0":  # a bind address, not a destination (Ollama's own client does the same)
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    port = parts.port or (443 if parts.scheme == "https" else 11434)
    return f"{parts.scheme}://{host}:{port}{parts.path}"


HTTP_LOGGERS = ("httpx", "httpcore")  # the HTTP clients under the Ollama and OpenAI backends


def quiet_http_logs() -> None:
    """Show only the HTTP clients' warnings: httpx logs one INFO line per request (thousands in a sweep's output),
    and a failed call is said by the backend's own error and retry lines. The entry points call it once their
    logging is set up (Hydra's, or basicConfig)."""
    for name in HTTP_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def backoff_delays(retries: int, backoff_s: float) -> list[float]:
    """Sleep before each retry: backoff_s, 2*backoff_s, 4*backoff_s ... capped at MAX_BACKOFF_S."""
    return [min(backoff_s * (2**i), MAX_BACKOFF_S) for i in range(max(0, retries))]


def with_retries(
    call: Callable[[], T],
    *,
    retries: int,
    backoff_s: float,
    retryable: Callable[[BaseException], bool],
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `call`, retrying the errors `retryable` accepts with exponential backoff; re-raise the last one."""
    delays = backoff_delays(retries, backoff_s)
    attempt = 0
    while True:
        try:
            return call()
        except BaseException as exc:  # noqa: BLE001 - filtered by retryable, re-raised otherwise
            if attempt >= len(delays) or not retryable(exc):
                raise
            log.warning("%s failed (%s); retry %d of %d in %.2fs", what, exc, attempt + 1, len(delays), delays[attempt])
            sleep(delays[attempt])
            attempt += 1


def plain_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Messages as plain {"role", "content"} dicts, validated."""
    out = []
    for i, m in enumerate(messages):
        role, content = m.get("role"), m.get("content")
        if role not in {"system", "user", "assistant"} or not isinstance(content, str):
            raise ValueError(
                f"message {i} must be {{'role': 'system'|'user'|'assistant', 'content': str}}; got {dict(m)!r:.200}"
            )
        out.append({"role": role, "content": content})
    if not out:
        raise ValueError("chat needs at least one message; got none")
    return out
