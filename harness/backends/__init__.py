"""Concrete LLM backends: ollama, openai (compatible servers), embedded (xllamacpp), auto.

Each module registers a factory `(BackendConfig, role) -> LLM` with `harness.inference.register_backend`;
`harness.inference.make_llm` imports them lazily. This package holds the small helpers they share: host
normalisation, retry with exponential backoff, and message conversion.
"""

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


def preflight(cfg: Any, *, timeout_s: float = 5.0, sleep: Callable[[float], None] = time.sleep) -> str:
    """Check, before a run writes anything, that the configured server answers and has every role's model.

    ollama: GET {host}/api/tags (retried with backoff), then every role's model must be listed.
    openai: GET {base_url}/models must answer (any HTTP status: servers differ in what they list).
    auto, embedded, fake: nothing to check here (auto probes and falls back by itself).
    Returns a one-line description; raises BackendUnavailable or ModelMissing naming the host and models.
    """
    from harness.config import ROLES
    from harness.inference import BackendUnavailable, ModelMissing

    kind = cfg.kind
    models = sorted({cfg.model_for(r) for r in ROLES})
    if kind == "ollama":
        from harness.backends.auto import probe_ollama

        host = ollama_host(cfg.host)

        def probe():
            p = probe_ollama(host, min(timeout_s, cfg.timeout_s))
            if not p.reachable:
                raise ConnectionError(p.error)
            return p

        try:
            found = with_retries(probe, retries=cfg.retries, backoff_s=cfg.backoff_s,
                                 retryable=lambda e: isinstance(e, ConnectionError),
                                 what=f"ollama preflight ({host})", sleep=sleep)
        except ConnectionError as exc:
            raise BackendUnavailable(
                f"Ollama is not reachable at {host} (models {', '.join(models)}) after {cfg.retries} retries: "
                f"{exc}. Start it with `ollama serve`, set OLLAMA_HOST / backend.host, or use backend=embedded"
            ) from None
        missing = sorted({cfg.model_for(r) for r in ROLES if not found.has_model(cfg.model_for(r))})
        if missing:
            roles = ", ".join(f"{r}={cfg.model_for(r)}" for r in ROLES if cfg.model_for(r) in missing)
            raise ModelMissing(
                f"Ollama at {host} does not have model(s) {', '.join(missing)} ({roles}); "
                f"run {', '.join(f'`ollama pull {m}`' for m in missing)} or set backend.<role>_model to a model it has"
            )
        return f"ollama at {host} has {', '.join(models)}"
    if kind == "openai":
        import urllib.error
        import urllib.request

        base = (cfg.base_url or "").rstrip("/")
        if not base:
            raise ValueError("backend.kind=openai needs backend.base_url (e.g. http://127.0.0.1:8000/v1); got none")
        key = cfg.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        request = urllib.request.Request(f"{base}/models", headers={"Authorization": f"Bearer {key}"})

        def probe():
            try:
                with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
                        request, timeout=min(timeout_s, cfg.timeout_s)):
                    return None
            except urllib.error.HTTPError:
                return None  # it answered
            except (urllib.error.URLError, OSError) as exc:
                raise ConnectionError(f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}") from None

        try:
            with_retries(probe, retries=cfg.retries, backoff_s=cfg.backoff_s,
                         retryable=lambda e: isinstance(e, ConnectionError), what=f"openai preflight ({base})",
                         sleep=sleep)
        except ConnectionError as exc:
            raise BackendUnavailable(
                f"OpenAI-compatible server is not reachable at {base} (models {', '.join(models)}) after "
                f"{cfg.retries} retries: {exc}. Start it or set backend.base_url"
            ) from None
        return f"openai-compatible server at {base} answers"
    return f"{kind}: no preflight check"
