"""The LLM protocol, the backend registry, the scripted fake, the response cache and the role wrapper.

Every model call in the project goes through `LLM.chat`. Backends are small classes registered by name;
`make_roles(cfg)` builds the four role LLMs (planner, producer, evaluator, compressor) from one config.
Concrete network/runtime backends live in harness/backends/ and are imported lazily, so importing this
module stays cheap.
"""

from __future__ import annotations

import contextvars
import hashlib
import importlib
import json
import logging
import re
import sqlite3
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence, runtime_checkable

from harness.config import ROLES, BackendConfig
from harness.sqlite_store import ThreadLocalSQLite

log = logging.getLogger("harness.inference")

Message = Mapping[str, str]  # {"role": "system"|"user"|"assistant", "content": str}

def base_llm(llm: Any) -> Any:
    """The backend object under the role, cache and accounting wrappers (each keeps the next as `.inner`)."""
    seen = 0
    while hasattr(llm, "inner") and seen < 10:
        llm, seen = llm.inner, seen + 1
    return llm


def smoke_label(models: Sequence[str]) -> str:
    """The label of output from embedded models, naming the model files actually loaded."""
    return f"SMOKE RUN (embedded {', '.join(models) or 'model'}): structure check only, not research quality"


SMOKE_LABEL = smoke_label(["SmolLM2-135M"])  # the packaged default; Roles.smoke_label names what was loaded


@dataclass(frozen=True)
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    model: str
    backend: str
    cached: bool = False
    finish_reason: str = "stop"  # "length" when max_tokens cut the reply
    # of completion_tokens, those the model spent thinking (its thinking field or a <think> block), never in text
    thinking_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@runtime_checkable
class LLM(Protocol):
    backend: str
    model: str

    def chat(
        self,
        messages: Sequence[Message],
        *,
        schema: Mapping[str, Any] | None = None,
        temperature: float = 0.7,
        max_tokens: int = 512,
        seed: int | None = None,
    ) -> ChatResult: ...


# -- errors ------------------------------------------------------------------------------------------


class BackendError(RuntimeError):
    """A backend could not answer. The message names the backend, host and model."""


class BackendUnavailable(BackendError):
    """The server is down or unreachable."""


class RunAbandoned(RuntimeError):
    """Raised at a model call of a run whose result nobody will read any more (RunScope.stop is set): its trial
    was pruned or gated out while it ran. Not a BackendError: the backend is fine."""


class RunScope:
    """One pooled run (experiments.pool): a stop flag its model calls obey, and the uncached calls it made.

    Set for the run's thread with `run_scope` (a contextvar, so concurrent runs each see their own). When `stop`
    is set, the run's next model call raises RunAbandoned instead of reaching the cache or the backend, so a
    dropped run ends at its next call instead of finishing its task."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.uncached_calls = 0
        self._lock = threading.Lock()

    def count(self) -> None:
        with self._lock:  # a run may fan its calls out to threads that copied its context
            self.uncached_calls += 1


_RUN_SCOPE: contextvars.ContextVar[RunScope | None] = contextvars.ContextVar("harness_run_scope", default=None)


def run_scope(scope: RunScope | None) -> contextvars.Token:
    """Make `scope` the current run's (call inside the run's own context; reset with _RUN_SCOPE.reset)."""
    return _RUN_SCOPE.set(scope)


class ModelMissing(BackendError):
    """The server answered but does not have the model."""


class ContextOverflow(BackendError):
    """A prompt did not fit the context window: estimated over it before sending, or cut by the server (Ollama
    cuts from the front and answers 200 OK). The run that made the call fails; it is never a scored result."""


def context_overflow(events: Sequence[Mapping[str, Any]]) -> str | None:
    """The first ContextOverflow among a run's trace events ("Type: message" in an llm span's error), also one
    that a stage turned into its fallback (the planner never raises): the run must fail, not be scored."""
    for e in events:
        error = str((e.get("args") or {}).get("error", ""))
        if e.get("cat") == "llm" and error.startswith("ContextOverflow"):
            return error
    return None


class FakeExhausted(BackendError):
    """The scripted fake ran out of replies: the test asked for more calls than it scripted."""


# -- registry ----------------------------------------------------------------------------------------

BackendFactory = Callable[[BackendConfig, str], LLM]
_REGISTRY: dict[str, BackendFactory] = {}
# backends implemented in their own modules, imported on first use
_LAZY = {
    "ollama": "harness.backends.ollama_backend",
    "openai": "harness.backends.openai_backend",
    "embedded": "harness.backends.embedded",
    "auto": "harness.backends.auto",
}


def register_backend(name: str) -> Callable[[BackendFactory], BackendFactory]:
    def deco(factory: BackendFactory) -> BackendFactory:
        _REGISTRY[name] = factory
        return factory

    return deco


def backend_names() -> list[str]:
    return sorted(set(_REGISTRY) | set(_LAZY))


def make_llm(cfg: BackendConfig, role: str = "producer") -> LLM:
    """Build the raw backend LLM for one role (no cache, no tracing)."""
    name = cfg.kind
    if name not in _REGISTRY and name in _LAZY:
        importlib.import_module(_LAZY[name])
    if name not in _REGISTRY:
        raise ValueError(f"backend.kind={name!r} is not a backend; expected one of {', '.join(backend_names())}")
    return _REGISTRY[name](cfg, role)


# -- the scripted fake (tests only) ------------------------------------------------------------------


@dataclass
class FakeCall:
    messages: list[dict[str, str]]
    schema: Mapping[str, Any] | None
    temperature: float
    max_tokens: int
    seed: int | None


class FakeLLM:
    """Scripted replies for tests: a queue, and/or replies keyed by a prompt substring.

    Keyed replies are matched against the concatenated messages (first key that occurs wins); a keyed value
    may be a string (reused every time), a list (consumed in order) or a callable(messages) -> str. With no
    match the queue is consumed. With neither, FakeExhausted is raised, so a test never silently gets "".
    """

    def __init__(
        self,
        replies: Sequence[str] = (),
        *,
        keyed: Mapping[str, Any] | None = None,
        model: str = "fake-model",
        backend: str = "fake",
        latency_s: float = 0.0,
    ) -> None:
        self.queue: deque[str] = deque(replies)
        self.keyed = dict(keyed or {})
        self.model = model
        self.backend = backend
        self.latency_s = latency_s
        self.calls: list[FakeCall] = []
        self._lock = threading.Lock()

    def chat(self, messages, *, schema=None, temperature=0.7, max_tokens=512, seed=None) -> ChatResult:
        msgs = [dict(m) for m in messages]
        with self._lock:
            self.calls.append(FakeCall(msgs, schema, temperature, max_tokens, seed))
            text = self._next(msgs)
        if self.latency_s:
            time.sleep(self.latency_s)
        prompt = sum(len(m.get("content", "").split()) for m in msgs)
        return ChatResult(text, prompt, len(text.split()), self.latency_s, self.model, self.backend)

    def _next(self, msgs: list[dict[str, str]]) -> str:
        joined = "\n".join(m.get("content", "") for m in msgs)
        for key, value in self.keyed.items():
            if key in joined:
                if callable(value):
                    return value(msgs)
                if isinstance(value, list):
                    if value:
                        return value.pop(0)
                    continue
                return value
        if self.queue:
            return self.queue.popleft()
        raise FakeExhausted(f"fake backend has no reply left for prompt starting {joined[:120]!r}")


register_backend("fake")(lambda cfg, role: FakeLLM(model=cfg.model_for(role)))


# -- response cache ----------------------------------------------------------------------------------


def reply_options(llm: Any) -> Mapping[str, Any] | None:
    """What besides the request decides a backend's reply (EmbeddedLLM.reply_options, else its sampling)."""
    options = getattr(llm, "reply_options", None)
    return options if options is not None else getattr(llm, "sampling", None)


def cache_key(backend: str, model: str, messages: Sequence[Message], schema, temperature, max_tokens, seed,
              sampling: Mapping[str, Any] | None = None) -> str:
    """sampling: what besides the request decides the reply (reply_options); absent, the key is as before."""
    data = {
        "backend": backend,
        "model": model,
        "messages": [dict(m) for m in messages],
        "schema": schema,
        "temperature": round(float(temperature), 4),
        "max_tokens": int(max_tokens),
        "seed": seed,
    }
    if sampling:
        data["sampling"] = dict(sampling)
    blob = json.dumps(data, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


_REPLY_FIELDS = {"text": str, "prompt_tokens": int, "completion_tokens": int, "latency_s": (int, float), "model": str,
                 "backend": str}


def decode_reply(blob: Any) -> tuple[ChatResult | None, str]:
    """A stored reply -> (ChatResult marked cached, "") or (None, why it does not read back). The fields with a
    default (finish_reason, thinking_tokens) may be absent: rows written before they existed lack them."""
    from dataclasses import fields as dataclass_fields

    optional = {f.name: type(f.default) for f in dataclass_fields(ChatResult) if f.name not in _REPLY_FIELDS}
    optional.pop("cached", None)
    try:
        data = json.loads(blob)
    except (TypeError, ValueError) as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__}, not an object"
    missing = sorted(set(_REPLY_FIELDS) - set(data))
    unknown = sorted(set(data) - set(_REPLY_FIELDS) - set(optional))
    if missing or unknown:
        return None, f"fields missing {missing}, unknown {unknown}"
    for name, value in data.items():
        want = _REPLY_FIELDS.get(name) or optional[name]
        if isinstance(value, bool) or not isinstance(value, want) or (isinstance(value, int) and value < 0):
            return None, f"field {name}={value!r:.40} has the wrong type or sign"
    if not data["text"].strip():
        return None, "empty text"  # never cached on purpose (CachedLLM), so never a reply to reuse
    return replace(ChatResult(**data), cached=True, latency_s=0.0), ""


class ResponseCache:
    """SQLite (WAL) store of replies keyed on backend, model, messages, schema and sampling options.

    Safe for several processes: each call opens a short transaction; busy_timeout absorbs contention. Safe for
    several threads: each has its own connection, and the hit/miss counters change under a lock (worker threads
    of one sweep share one cache, and `+=` on an attribute is a read-modify-write).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.hits = 0
        self.misses = 0
        self._stats_lock = threading.Lock()
        self._db = ThreadLocalSQLite(self.path)
        self._conn().execute(
            "CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, result TEXT NOT NULL, created REAL NOT NULL)"
        )

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

    def get(self, key: str) -> ChatResult | None:
        """The stored reply, or None (a miss). An entry that does not read back as a reply (bad JSON, missing or
        unknown fields, wrong types, empty text) is a miss too, logged with the file: the caller asks the model
        again and `put` overwrites it. A file SQLite cannot read raises StoreError (harness.sqlite_store)."""
        row = self._conn().execute("SELECT result FROM replies WHERE key=?", (key,)).fetchone()
        result, why = (None, "") if row is None else decode_reply(row[0])
        if why:
            log.warning("response cache %s: entry %s does not read back (%s); asking the model again",
                        self.path, key[:12], why)
        with self._stats_lock:
            if result is None:
                self.misses += 1
            else:
                self.hits += 1
        return result

    def put(self, key: str, result: ChatResult) -> None:
        data = {k: v for k, v in result.__dict__.items() if k != "cached"}
        self._conn().execute(
            "INSERT OR REPLACE INTO replies (key, result, created) VALUES (?, ?, ?)",
            (key, json.dumps(data), time.time()),
        )

    def stats(self) -> dict[str, int]:
        with self._stats_lock:
            return {"hits": self.hits, "misses": self.misses}


class CachedLLM:
    """Wraps an LLM with the response cache.

    Empty replies are not cached (asking again may do better). Replies cut at max_tokens are cached like any
    other (finish_reason "length" is kept), so a resumed run re-issues no call it already made.
    """

    def __init__(self, inner: LLM, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self.backend = inner.backend
        self.model = inner.model

    def chat(self, messages, *, schema=None, temperature=0.7, max_tokens=512, seed=None) -> ChatResult:
        key = cache_key(self.backend, self.model, messages, schema, temperature, max_tokens, seed,
                        reply_options(self.inner))
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        result = self.inner.chat(messages, schema=schema, temperature=temperature, max_tokens=max_tokens, seed=seed)
        if result.text.strip():
            self.cache.put(key, result)
        return result


# -- role wrapper: tracing and per-role accounting ---------------------------------------------------


_THINK_BLOCK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_THINKING_LOCK = threading.Lock()


def split_think(text: str) -> tuple[str, str]:
    """(answer, thinking): every <think>...</think> block taken out of a reply, an unclosed one to the end (the
    reply was cut while thinking), and a reply that opens with thinking and only closes it (templates that put
    <think> in the prompt) cut at its </think>."""
    thought: list[str] = []
    head = _THINK_CLOSE.split(text, 1)
    if len(head) == 2 and "<think>" not in head[0].lower():
        thought.append(head[0])
        text = head[1]

    def take(m: re.Match) -> str:
        thought.append(m.group(1))
        return ""

    answer = _THINK_BLOCK.sub(take, text)
    return (answer.strip() if thought else answer), "".join(thought).strip()


class RoleLLM:
    """An LLM bound to a role. Each call is a trace span and is counted per role and per stage.

    <think> blocks are taken out of every reply here, whatever the backend, so none reaches an output, a parser
    or the judge; the tokens they took are counted apart (ChatResult.thinking_tokens, the span, the role's usage).
    """

    def __init__(self, role: str, inner: LLM) -> None:
        self.role = role
        self.inner = inner
        self.backend = inner.backend
        self.model = inner.model

    @property
    def smoke(self) -> bool:
        return self.backend == "embedded"

    def chat(self, messages, *, schema=None, temperature=0.7, max_tokens=512, seed=None) -> ChatResult:
        from harness.logger import current_tracer

        scope = _RUN_SCOPE.get()
        if scope is not None and scope.stop.is_set():
            raise RunAbandoned(f"{self.role} call not made: the run was abandoned (its trial stopped)")
        tracer = current_tracer()
        with tracer.span(f"llm.{self.role}", cat="llm", model=self.model, backend=self.backend) as span:
            result = self._without_thinking(self.inner.chat(
                messages, schema=schema, temperature=temperature, max_tokens=max_tokens, seed=seed
            ))
            span.update(
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                cached=result.cached,
                finish_reason=result.finish_reason,
            )
            if result.thinking_tokens:
                span.update(thinking_tokens=result.thinking_tokens)
        tracer.count_call(self.role, result)
        if result.thinking_tokens:
            with _THINKING_LOCK:
                usage = tracer.usage[self.role]
                usage["thinking_tokens"] = usage.get("thinking_tokens", 0) + result.thinking_tokens
        if scope is not None and not result.cached:
            scope.count()
        return result


    def _without_thinking(self, result: ChatResult) -> ChatResult:
        answer, thought = split_think(result.text)
        if not thought:
            return result
        if not answer:
            raise BackendError(
                f"{self.role} reply from {self.backend}:{self.model} held only thinking ({len(thought)} characters, "
                f"finish_reason={result.finish_reason}): set backend.think.{self.role}=false or raise its max_tokens"
            )
        share = len(thought) / (len(thought) + len(answer))
        spent = result.thinking_tokens or round(result.completion_tokens * share)
        return replace(result, text=answer, thinking_tokens=spent)


@dataclass
class Roles:
    """The four role LLMs used by one harness run."""

    planner: LLM
    producer: LLM
    evaluator: LLM
    compressor: LLM
    cache: ResponseCache | None = None
    description: dict[str, str] = field(default_factory=dict)

    @property
    def smoke(self) -> bool:
        return any(getattr(llm, "backend", "") == "embedded" for llm in (self.planner, self.producer, self.evaluator))

    @property
    def smoke_label(self) -> str:
        """smoke_label naming the embedded model file of each role (path name, else the model name)."""
        names: list[str] = []
        for llm in (self.planner, self.producer, self.evaluator, self.compressor):
            inner = base_llm(llm)
            if getattr(inner, "backend", "") == "embedded":
                path = getattr(inner, "path", None)
                name = Path(path).name if path else str(getattr(inner, "model", "model"))
                if name not in names:
                    names.append(name)
        return smoke_label(names)

    def by_role(self, role: str) -> LLM:
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        return getattr(self, role)

    def cache_stats(self) -> dict[str, int]:
        return self.cache.stats() if self.cache else {"hits": 0, "misses": 0}


def wrap_roles(llms: Mapping[str, LLM], cache: ResponseCache | None = None) -> Roles:
    """Wrap raw LLMs (e.g. FakeLLMs in tests) with cache and role accounting."""
    wrapped = {}
    for role in ROLES:
        llm = llms[role]
        if cache is not None:
            llm = CachedLLM(llm, cache)
        wrapped[role] = RoleLLM(role, llm)
    return Roles(
        **wrapped,
        cache=cache,
        description={r: f"{llms[r].backend}:{llms[r].model}" for r in ROLES},
    )


def make_roles(cfg: BackendConfig, results_dir: str | Path = "results") -> Roles:
    """Build the four role LLMs from config: one registry lookup per role, shared cache."""
    cache = None
    if cfg.cache:
        cache = ResponseCache(cfg.cache_path or Path(results_dir) / "llm_cache.sqlite")
    return wrap_roles({role: make_llm(cfg, role) for role in ROLES}, cache)


def fake_roles(fake: FakeLLM | Mapping[str, LLM], cache: ResponseCache | None = None) -> Roles:
    """Tests: one FakeLLM for every role, or a mapping role -> LLM."""
    llms = fake if isinstance(fake, Mapping) else {role: fake for role in ROLES}
    return wrap_roles(llms, cache)
