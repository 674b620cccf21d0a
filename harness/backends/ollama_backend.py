"""Ollama backend through the official `ollama` client.

Structured output goes through `format=<json schema>`; sampling through options temperature / num_predict /
seed. Every request carries `options.num_ctx` (harness.backends.context: one window per model for the whole run,
from the harness's largest prompt plus max_tokens, capped by the model's trained context read from /api/show;
`backend.num_ctx` overrides it), so Ollama never applies its small default window and cuts the prompt from the
front. A prompt estimated over the window, or a reply whose `prompt_eval_count` shows it was cut, raises
ContextOverflow. `think` is sent per role to models that can think (off for JSON requests unless configured);
the thinking Ollama returns in `message.thinking` is counted apart and never joins the text. `keep_alive` is
passed through.

Connection failures (and HTTP 429, 502, 503, 504) are retried with exponential backoff, then reported as
BackendUnavailable naming the host and model; a missing model is ModelMissing; a timeout, an empty reply or a reply
that is not a chat response is BackendError, in one line. Ollama's own error text reaches that line, also when it
comes as an `error` field in a 200 reply. A reply that names another model than the one asked (a proxy routing to
another model) is refused as a BackendError: the result would be recorded under the model that was asked
(docs/RELIABILITY.md).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import httpx
import ollama

from harness.config import BackendConfig
from harness.inference import BackendError, BackendUnavailable, ChatResult, Message, ModelMissing, register_backend

from ._common import ollama_host, plain_messages, with_retries
from .context import Window, model_num_ctx, role_setting

log = logging.getLogger("harness.backends.ollama")

RETRY_STATUS = {429, 502, 503, 504}  # busy (Ollama's full queue is 503; a proxy's rate limit 429) or a gateway
SHOW_TIMEOUT_S = 10.0  # /api/show while building a role: a slow server must not hold the run's start for long


def _is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, ollama.ResponseError):
        return exc.status_code in RETRY_STATUS
    if isinstance(exc, httpx.TimeoutException):
        return isinstance(exc, httpx.ConnectTimeout)
    return isinstance(exc, (ConnectionError, httpx.TransportError))


def _is_model_missing(exc: ollama.ResponseError) -> bool:
    return exc.status_code == 404 or "not found" in str(exc.error).lower()


def _server_error(exc: BaseException) -> str | None:
    """The `error` text of a 200 reply that carries Ollama's error object instead of a chat response (pydantic's
    report holds the body it refused as each error's input)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return None
    try:
        for e in errors():
            body = e.get("input")
            if isinstance(body, dict) and body.get("error"):
                return " ".join(str(body["error"]).split())[:300]
    except Exception:  # noqa: BLE001 - no body to read: the caller says what it can
        return None
    return None


def same_model(asked: str, named: str) -> bool:
    """Ollama echoes the model as asked; "x" and "x:latest" are one model."""
    def norm(name: str) -> str:
        name = name.strip().lower()
        return name if ":" in name else name + ":latest"

    return norm(asked) == norm(named)


def _one_line(exc: BaseException) -> str:
    """A decoding or validation error in one line (pydantic's report is one line per field)."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            return "; ".join(f"{'.'.join(map(str, e.get('loc', ()))) or 'reply'}: {e.get('msg')}" for e in errors())
        except Exception:  # noqa: BLE001 - fall back to the first line
            pass
    return (str(exc).splitlines() or [type(exc).__name__])[0]


@dataclass(frozen=True)
class ModelInfo:
    """What /api/show says about a model (None where it could not be read)."""

    model: str
    context_length: int | None = None
    thinking: bool = False  # capabilities list "thinking"
    family: str | None = None
    error: str = ""


def read_model_info(client: Any, model: str) -> ModelInfo:
    """One /api/show: trained context ("<arch>.context_length" in model_info), capabilities, family; never raises."""
    try:
        shown = client.show(model)
    except Exception as exc:  # noqa: BLE001 - the chat call reports a server that is down or lacks the model
        return ModelInfo(model, error=f"{type(exc).__name__}: {_one_line(exc)}")
    info = dict(getattr(shown, "modelinfo", None) or {})
    arch = info.get("general.architecture")
    length = info.get(f"{arch}.context_length") if arch else None
    if length is None:
        length = next((v for k, v in info.items() if k.endswith(".context_length")), None)
    caps = [str(c) for c in (getattr(shown, "capabilities", None) or [])]
    details = getattr(shown, "details", None)
    family = getattr(details, "family", None) if details is not None else None
    return ModelInfo(model, int(length) if length else None, "thinking" in caps, family)


_INFO_LOCK = threading.Lock()
_INFO: dict[tuple[str, str], ModelInfo] = {}


def model_info(host: str, model: str, timeout_s: float = SHOW_TIMEOUT_S) -> ModelInfo:
    """read_model_info once per process per (host, model); a failed read is retried next time."""
    with _INFO_LOCK:
        found = _INFO.get((host, model))
    if found is None:
        found = read_model_info(ollama.Client(host=host, timeout=timeout_s), model)
        if not found.error:
            with _INFO_LOCK:
                _INFO[(host, model)] = found
    return found


THINK_LEVELS = ("low", "medium", "high")  # gpt-oss takes a level, not true/false (Ollama's thinking docs)


def configured_think(value: Any, role: str) -> bool | str | None:
    """backend.think for one role: None, True, False or a level (low|medium|high); else a one-line error."""
    got = role_setting(value, role, "backend.think")
    if got is not None and not isinstance(got, bool) and got not in THINK_LEVELS:
        raise ValueError(f"backend.think for {role} is {got!r}; expected true, false, null or one of "
                         f"{', '.join(THINK_LEVELS)} (or a mapping role -> those)")
    return got


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
        role: str = "producer",
        num_ctx: int | None = None,
        think: bool | str | None = None,
        thinking_model: bool = False,
        keep_alive: Any = None,
        trained_ctx: int | None = None,
    ) -> None:
        if not model:
            raise ValueError("ollama backend needs a model name (e.g. 'glm4:9b'); got an empty string")
        self.model = model
        self.host = ollama_host(host)
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.role = role
        self.window = (Window(role, model, int(num_ctx), f"Ollama {self.host}", trained=trained_ctx) if num_ctx
                       else None)
        self.think = think
        self.thinking_model = thinking_model
        self.keep_alive = keep_alive
        self.client = ollama.Client(host=self.host, timeout=timeout_s)

    def __repr__(self) -> str:
        return f"OllamaLLM(model={self.model!r}, host={self.host!r}, num_ctx={self.num_ctx})"

    @property
    def num_ctx(self) -> int | None:
        return self.window.num_ctx if self.window else None

    @property
    def reply_options(self) -> dict[str, Any] | None:
        """What besides the request decides the reply: the window (a cut prompt is another prompt) and thinking."""
        if self.window is None and self.think is None:
            return None
        return {"num_ctx": self.num_ctx, "think": self.think}

    def think_for(self, schema: Mapping[str, Any] | None) -> bool | str | None:
        """The `think` value sent: only to models that can think; off for JSON requests unless configured."""
        if not self.thinking_model:
            return None
        if self.think is not None:
            return self.think
        return False if schema is not None else None

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
        if self.window is not None:
            self.window.check_before(msgs, max_tokens)
        options: dict[str, Any] = {"temperature": float(temperature), "num_predict": int(max_tokens)}
        if self.window is not None:
            options["num_ctx"] = self.window.num_ctx
        if seed is not None:
            options["seed"] = int(seed)
        kwargs: dict[str, Any] = {"model": self.model, "messages": msgs, "options": options, "stream": False}
        if schema is not None:
            kwargs["format"] = dict(schema)
        think = self.think_for(schema)
        if think is not None:
            kwargs["think"] = think
        if self.keep_alive is not None:
            kwargs["keep_alive"] = self.keep_alive

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
        except ValueError as exc:  # the body is not JSON, or not a chat response (pydantic's error is a ValueError)
            said = _server_error(exc)
            if said is not None:  # Ollama's error object in a 200 (a generation that failed once the status was sent)
                raise BackendError(
                    f"Ollama at {self.host} answered a chat for model {self.model!r} with an error: {said}"
                ) from None
            if isinstance(exc, json.JSONDecodeError) and not exc.doc.strip():
                raise BackendError(f"Ollama at {self.host} answered a chat for model {self.model!r} with HTTP 200 and "
                                   f"an empty body") from None
            raise BackendError(
                f"Ollama at {self.host} sent a reply for model {self.model!r} that is not a chat response: "
                f"{type(exc).__name__}: {_one_line(exc)}"
            ) from None
        latency = time.perf_counter() - start
        named = str(getattr(resp, "model", None) or "")
        if named and not same_model(self.model, named):
            raise BackendError(
                f"Ollama at {self.host} answered a request for model {self.model!r} with a reply from {named!r} (a "
                f"proxy or server routing to another model?): refused, so that no result is recorded under a model "
                f"that did not write it; point backend.host at a server that runs {self.model!r}"
            )

        text = resp.message.content or ""
        thinking = getattr(resp.message, "thinking", None) or ""
        done_reason = resp.done_reason or "stop"
        completion = int(resp.eval_count or 0)
        if not text.strip():
            spent = f", {len(thinking)} characters of thinking" if thinking else ""
            raise BackendError(
                f"Ollama at {self.host} returned an empty reply for model {self.model!r} "
                f"(done_reason={done_reason}, eval_count={completion}, max_tokens={max_tokens}{spent})"
                + (f"; set backend.think.{self.role}=false or raise max_tokens" if thinking else "")
            )
        if self.window is not None:
            self.window.check_after(msgs, resp.prompt_eval_count, completion)
        # Ollama counts thinking in eval_count and reports no split: the thinking's share of the characters
        thinking_tokens = round(completion * len(thinking) / (len(thinking) + len(text))) if thinking else 0
        return ChatResult(
            text=text,
            prompt_tokens=int(resp.prompt_eval_count or 0),
            completion_tokens=completion,
            latency_s=latency,
            model=self.model,
            backend=self.backend,
            finish_reason="length" if done_reason == "length" else "stop",
            thinking_tokens=thinking_tokens,
        )

    def _unavailable(self, exc: BaseException) -> BackendUnavailable:
        return BackendUnavailable(
            f"Ollama is not reachable at {self.host} (model {self.model!r}) after {self.retries} retries: "
            f"{type(exc).__name__}: {exc}. Start it with `ollama serve`, set OLLAMA_HOST / backend.host, "
            f"or use backend.kind=embedded"
        )


_ANNOUNCED: set[tuple[str, str, int]] = set()


@register_backend("ollama")
def make_ollama(cfg: BackendConfig, role: str) -> OllamaLLM:
    model, host = cfg.model_for(role), ollama_host(cfg.host)
    think = configured_think(cfg.think, role)
    info = model_info(host, model, min(SHOW_TIMEOUT_S, float(cfg.timeout_s)))
    num_ctx, how = model_num_ctx(cfg, model, info.context_length)
    with _INFO_LOCK:
        first = (host, model, num_ctx) not in _ANNOUNCED
        _ANNOUNCED.add((host, model, num_ctx))
    if first:
        trained = info.context_length or f"unknown ({info.error or 'not in /api/show'})"
        log.info("ollama %s at %s: num_ctx=%d (%s; trained context %s; thinking %s)", model, host, num_ctx, how,
                 trained, "yes" if info.thinking else "no")
    return OllamaLLM(
        model,
        host,
        timeout_s=cfg.timeout_s,
        retries=cfg.retries,
        backoff_s=cfg.backoff_s,
        role=role,
        num_ctx=num_ctx,
        think=think,
        thinking_model=info.thinking,
        keep_alive=cfg.keep_alive,
        trained_ctx=info.context_length,
    )
