"""Ollama backend through the official `ollama` client.

Structured output goes through `format=<json schema>`; sampling through options temperature / num_predict /
seed. Connection failures are retried with exponential backoff, then reported as BackendUnavailable naming
the host and model; a missing model is ModelMissing; a timeout or an empty reply is BackendError.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import httpx
import ollama

from harness.backends import ollama_host, plain_messages, with_retries
from harness.config import BackendConfig
from harness.inference import BackendError, BackendUnavailable, ChatResult, Message, ModelMissing, register_backend

RETRY_STATUS = {502, 503, 504}


def _is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, ollama.ResponseError):
        return exc.status_code in RETRY_STATUS
    if isinstance(exc, httpx.TimeoutException):
        return isinstance(exc, httpx.ConnectTimeout)
    return isinstance(exc, (ConnectionError, httpx.TransportError))


def _is_model_missing(exc: ollama.ResponseError) -> bool:
    return exc.status_code == 404 or "not found" in str(exc.error).lower()


class OllamaLLM:
    """One Ollama model behind the LLM protocol."""

    backend = "ollama"

    def __init__(
        self,
        model: str,
        host: str | None = None,
        *,
        timeout_s: float = 300.0,
        retries: int = 3,
        backoff_s: float = 0.5,
    ) -> None:
        if not model:
            raise ValueError("ollama backend needs a model name (e.g. 'glm4:9b'); got an empty string")
        self.model = model
        self.host = ollama_host(host)
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.client = ollama.Client(host=self.host, timeout=timeout_s)

    def __repr__(self) -> str:
        return f"OllamaLLM(model={self.model!r}, host={self.host!r})"

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
        options: dict[str, Any] = {"temperature": float(temperature), "num_predict": int(max_tokens)}
        if seed is not None:
            options["seed"] = int(seed)
        kwargs: dict[str, Any] = {"model": self.model, "messages": msgs, "options": options, "stream": False}
        if schema is not None:
            kwargs["format"] = dict(schema)

        start = time.perf_counter()
        try:
            resp = with_retries(
                lambda: self.client.chat(**kwargs),
                retries=self.retries,
                backoff_s=self.backoff_s,
                retryable=_is_connection_error,
                what=f"ollama chat ({self.model} at {self.host})",
            )
        except ollama.ResponseError as exc:
            if _is_model_missing(exc):
                raise ModelMissing(
                    f"Ollama at {self.host} does not have model {self.model!r} ({exc.error}); "
                    f"run `ollama pull {self.model}` or set backend.<role>_model to a model it has"
                ) from exc
            if exc.status_code in RETRY_STATUS:
                raise BackendUnavailable(
                    f"Ollama at {self.host} kept answering HTTP {exc.status_code} for model {self.model!r} "
                    f"after {self.retries} retries: {exc.error}"
                ) from exc
            raise BackendError(f"Ollama at {self.host} refused a chat for model {self.model!r}: {exc}") from exc
        except httpx.TimeoutException as exc:
            if isinstance(exc, httpx.ConnectTimeout):
                raise self._unavailable(exc) from exc
            raise BackendError(
                f"Ollama at {self.host} did not answer within {self.timeout_s:g}s for model {self.model!r} "
                f"(max_tokens={max_tokens}); raise backend.timeout_s or lower max_tokens"
            ) from exc
        except (ConnectionError, httpx.TransportError) as exc:
            raise self._unavailable(exc) from exc
        latency = time.perf_counter() - start

        text = (resp.message.content or "") if resp.message is not None else ""
        done_reason = resp.done_reason or "stop"
        completion = int(resp.eval_count or 0)
        if not text.strip():
            raise BackendError(
                f"Ollama at {self.host} returned an empty reply for model {self.model!r} "
                f"(done_reason={done_reason}, eval_count={completion}, max_tokens={max_tokens})"
            )
        return ChatResult(
            text=text,
            prompt_tokens=int(resp.prompt_eval_count or 0),
            completion_tokens=completion,
            latency_s=latency,
            model=self.model,
            backend=self.backend,
            finish_reason="length" if done_reason == "length" else "stop",
        )

    def _unavailable(self, exc: BaseException) -> BackendUnavailable:
        return BackendUnavailable(
            f"Ollama is not reachable at {self.host} (model {self.model!r}) after {self.retries} retries: "
            f"{type(exc).__name__}: {exc}. Start it with `ollama serve`, set OLLAMA_HOST / backend.host, "
            f"or use backend.kind=embedded"
        )


@register_backend("ollama")
def make_ollama(cfg: BackendConfig, role: str) -> OllamaLLM:
    return OllamaLLM(
        cfg.model_for(role),
        cfg.host,
        timeout_s=cfg.timeout_s,
        retries=cfg.retries,
        backoff_s=cfg.backoff_s,
    )
