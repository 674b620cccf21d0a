"""OpenAI-compatible backend (vLLM, llama.cpp server, LM Studio) through the `openai` client.

The JSON schema goes as response_format={"type": "json_schema", ...}. Errors map like the Ollama backend:
connection failures are retried with backoff then raised as BackendUnavailable, 404 as ModelMissing,
timeouts and empty replies as BackendError.
"""

from __future__ import annotations

import os
import time
from typing import Any, Mapping, Sequence

import openai

from harness.backends import plain_messages, with_retries
from harness.config import BackendConfig
from harness.inference import BackendError, BackendUnavailable, ChatResult, Message, ModelMissing, register_backend

RETRY_STATUS = {502, 503, 504}


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APITimeoutError):
        return False
    if isinstance(exc, openai.APIConnectionError):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code in RETRY_STATUS


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
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": plain_messages(messages),
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
            cls = BackendUnavailable if exc.status_code in RETRY_STATUS else BackendError
            raise cls(
                f"OpenAI-compatible server at {self.base_url} answered HTTP {exc.status_code} for model "
                f"{self.model!r}: {exc.message}"
            ) from exc
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
    return OpenAICompatLLM(
        cfg.model_for(role),
        cfg.base_url or "",
        api_key=cfg.api_key,
        timeout_s=cfg.timeout_s,
        retries=cfg.retries,
        backoff_s=cfg.backoff_s,
    )
