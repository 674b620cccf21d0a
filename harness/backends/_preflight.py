"""The cheap check before a run writes anything: the configured server answers and has every role's model."""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from harness.config import ROLES
from harness.inference import BackendUnavailable, ModelMissing

from . import auto
from ._common import ollama_host, with_retries


def preflight(cfg: Any, *, timeout_s: float = 5.0, sleep: Callable[[float], None] = time.sleep) -> str:
    """Check, before a run writes anything, that the configured server answers and has every role's model.

    ollama: GET {host}/api/tags (retried with backoff), then every role's model must be listed.
    openai: GET {base_url}/models must answer (any HTTP status: servers differ in what they list).
    auto, embedded, fake: nothing to check here (auto probes and falls back by itself).
    Returns a one-line description; raises BackendUnavailable or ModelMissing naming the host and models.
    """
    kind = cfg.kind
    models = sorted({cfg.model_for(r) for r in ROLES})
    if kind == "ollama":
        host = ollama_host(cfg.host)

        def probe():
            p = auto.probe_ollama(host, min(timeout_s, cfg.timeout_s))
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
