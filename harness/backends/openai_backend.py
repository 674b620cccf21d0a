"""OpenAI-compatible backend (vLLM, llama.cpp server, LM Studio) through the `openai` client.

The JSON schema goes as response_format={"type": "json_schema", ...}. Errors map like the Ollama backend:
connection failures are retried with backoff then raised as BackendUnavailable, 404 as ModelMissing,
timeouts and empty replies as BackendError.

The context window is read from what the server exposes in GET /models (vLLM's `max_model_len`, LM Studio's
`max_context_length`, llama.cpp's `meta.n_ctx_train`); `backend.num_ctx` wins when set. A prompt estimated over
it is refused before sending, a server's "context length" refusal and a reply whose prompt count shows a cut
(Ollama's /v1 endpoint cuts at its default window) raise ContextOverflow. When the server does not say, one log
line says so and only the prompt count is checked.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import urllib.request
from typing import Any, Mapping, Sequence

import openai

from harness.config import BackendConfig
from harness.inference import (BackendError, BackendUnavailable, ChatResult, ContextOverflow, Message, ModelMissing,
                               register_backend)

from ._common import plain_messages, with_retries
from .context import Window, configured_num_ctx

log = logging.getLogger("harness.backends.openai")
WINDOW_KEYS = ("max_model_len", "max_context_length", "context_length", "context_window")

RETRY_STATUS = {502, 503, 504}


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APITimeoutError):
        return False
    if isinstance(exc, openai.APIConnectionError):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code in RETRY_STATUS


def served_window(cfg: BackendConfig, role: str, entry: Mapping[str, Any] | None) -> tuple[int | None, str]:
    """(window, where it came from): backend.num_ctx, else the model's /models entry, else (None, why)."""
    given = configured_num_ctx(cfg.num_ctx, role)
    if given is not None:
        return given, "backend.num_ctx"
    entry = entry or {}
    for key in WINDOW_KEYS:
        if isinstance(entry.get(key), int) and entry[key] > 0:
            return int(entry[key]), f"/models {key}"
    meta = entry.get("meta") if isinstance(entry.get("meta"), Mapping) else {}
    if isinstance(meta.get("n_ctx_train"), int):
        return int(meta["n_ctx_train"]), "/models meta.n_ctx_train"
    return None, "the server's /models entry names no window"


_MODELS_LOCK = threading.Lock()
_MODELS: dict[str, dict[str, Mapping[str, Any]]] = {}
_SAID: set[tuple[str, str]] = set()


def listed_models(base_url: str, api_key: str, timeout_s: float) -> dict[str, Mapping[str, Any]]:
    """GET {base_url}/models once per process: model id -> its entry; {} when it cannot be read."""
    with _MODELS_LOCK:
        if base_url in _MODELS:
            return _MODELS[base_url]
    try:
        request = urllib.request.Request(f"{base_url}/models", headers={"Authorization": f"Bearer {api_key}"})
        with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(request, timeout=timeout_s) as resp:
            data = json.loads(resp.read().decode() or "{}")
        found = {str(m.get("id")): m for m in data.get("data") or [] if isinstance(m, Mapping)}
    except Exception as exc:  # noqa: BLE001 - the chat call reports a server that is down
        log.info("openai-compatible server at %s: /models not read (%s)", base_url, type(exc).__name__)
        return {}
    with _MODELS_LOCK:
        _MODELS[base_url] = found
    return found


def _context_refusal(exc: openai.APIStatusError) -> bool:
    text = str(getattr(exc, "message", "") or exc).lower()
    return exc.status_code == 400 and ("context length" in text or "context window" in text or "too long" in text)


class OpenAICompatLLM:
    """One model on an OpenAI-compatible server behind the LLM protocol."""

    backend = "openai"

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 300.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        role: str = "producer",
        num_ctx: int | None = None,
    ) -> None:
        if not base_url:
            raise ValueError(
                "backend.kind=openai needs backend.base_url (e.g. http://127.0.0.1:8000/v1 for vLLM); got none"
            )
        if not model:
            raise ValueError("openai backend needs a model name; got an empty string")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        key = api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        self.client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=timeout_s, max_retries=0)
        self.window = Window(role, model, num_ctx, f"OpenAI-compatible server {self.base_url}")

    def __repr__(self) -> str:
        return f"OpenAICompatLLM(model={self.model!r}, base_url={self.base_url!r})"

    def chat(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.7,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> ChatResult:
        msgs = plain_messages(messages)
        self.window.check_before(msgs, max_tokens)
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": msgs,
            "temperature": float(temperature),
            "max_tokens": int(max_tokens),
        }
        if seed is not None:
            kwargs["seed"] = int(seed)
        if schema is not None:
            kwargs["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": dict(schema)}}

        start = time.perf_counter()
        try:
            resp = with_retries(
                lambda: self.client.chat.completions.create(**kwargs),
                retries=self.retries,
                backoff_s=self.backoff_s,
                retryable=_retryable,
                what=f"openai chat ({self.model} at {self.base_url})",
            )
        except openai.APITimeoutError as exc:
            raise BackendError(
                f"OpenAI-compatible server at {self.base_url} did not answer within {self.timeout_s:g}s for model "
                f"{self.model!r} (max_tokens={max_tokens}); raise backend.timeout_s or lower max_tokens"
            ) from exc
        except openai.APIConnectionError as exc:
            raise BackendUnavailable(
                f"OpenAI-compatible server is not reachable at {self.base_url} (model {self.model!r}) after "
                f"{self.retries} retries: {exc}. Start it, fix backend.base_url, or use backend.kind=embedded"
            ) from exc
        except openai.NotFoundError as exc:
            raise ModelMissing(
                f"OpenAI-compatible server at {self.base_url} does not serve model {self.model!r}: {exc.message}"
            ) from exc
        except openai.APIStatusError as exc:
            if _context_refusal(exc):
                raise ContextOverflow(
                    f"{self.window.role} prompt for {self.model} at {self.base_url} was refused as too long for the "
                    f"server's context window: {str(exc.message).splitlines()[0]}; shorten the prompt or serve a "
                    f"longer window"
                ) from None
            cls = BackendUnavailable if exc.status_code in RETRY_STATUS else BackendError
            raise cls(
                f"OpenAI-compatible server at {self.base_url} answered HTTP {exc.status_code} for model "
                f"{self.model!r}: {exc.message}"
            ) from exc
        except (ValueError, openai.APIResponseValidationError) as exc:  # a body that is not a chat completion
            raise BackendError(
                f"OpenAI-compatible server at {self.base_url} sent a reply for model {self.model!r} that is not a "
                f"chat completion: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
            ) from None
        latency = time.perf_counter() - start

        choice = resp.choices[0] if resp.choices else None
        text = (choice.message.content or "") if choice is not None and choice.message is not None else ""
        finish = (choice.finish_reason if choice is not None else None) or "stop"
        usage = resp.usage
        if not text.strip():
            raise BackendError(
                f"OpenAI-compatible server at {self.base_url} returned an empty reply for model {self.model!r} "
                f"(finish_reason={finish}, max_tokens={max_tokens})"
            )
        self.window.check_after(msgs, getattr(usage, "prompt_tokens", None),
                                int(getattr(usage, "completion_tokens", 0) or 0))
        return ChatResult(
            text=text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            latency_s=latency,
            model=self.model,
            backend=self.backend,
            finish_reason="length" if finish == "length" else "stop",
        )


@register_backend("openai")
def make_openai(cfg: BackendConfig, role: str) -> OpenAICompatLLM:
    model, base = cfg.model_for(role), (cfg.base_url or "").rstrip("/")
    window, how = None, "no base_url"
    if base:
        key = cfg.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
        window, how = served_window(cfg, role, listed_models(base, key, min(10.0, float(cfg.timeout_s))).get(model))
        with _MODELS_LOCK:
            first = (base, f"{role}:{model}") not in _SAID
            _SAID.add((base, f"{role}:{model}"))
        if first:
            log.info("openai-compatible %s at %s for %s: window %s (%s)%s", model, base, role, window or "unknown",
                     how, "" if window else "; set backend.num_ctx to the server's window so a prompt over it is "
                     "refused before it is sent")
    return OpenAICompatLLM(
        model,
        cfg.base_url or "",
        api_key=cfg.api_key,
        timeout_s=cfg.timeout_s,
        retries=cfg.retries,
        backoff_s=cfg.backoff_s,
        role=role,
        num_ctx=window,
    )
