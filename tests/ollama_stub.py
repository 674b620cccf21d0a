"""A threaded HTTP server on 127.0.0.1 that behaves as Ollama documents (and speaks the OpenAI chat API), to test
the real clients, including faults.

    with OllamaStub(models=["glm4:9b"], replies=["hello"]) as stub:
        OllamaLLM("glm4:9b", stub.url).chat(...)
        stub.requests[-1].body["format"]

Ollama: GET /api/version, /api/tags, /api/ps; POST /api/show, /api/chat (stream false). OpenAI: GET /v1/models,
POST /v1/chat/completions. A prompt word is one token per 4 characters, at least one (count_tokens); a
reply is counted in words.

What it emulates from Ollama's documentation:
- the window: `options.num_ctx`, else the server default `default_ctx` (2048, Ollama's documented default;
  OLLAMA_CONTEXT_LENGTH), capped by the model's trained context. A longer prompt is cut from the front, system
  prompt first, and answered 200 OK with `prompt_eval_count` = the tokens kept (the reply function sees the
  messages as cut). A prompt that fits but whose reply then overruns the window is `shifted` (the runner drops
  the oldest tokens mid-reply); both count as `truncated`. /v1/chat/completions has no num_ctx: it runs in the
  default window.
- /api/show: details.family, model_info "<arch>.context_length", capabilities (+ "thinking").
- thinking models: `think: true` (or a level) -> the thinking in `message.thinking`; `think: false` -> none; no `think` ->
  a `<think>...</think>` block at the head of `content`. Thinking spends num_predict first. `think: true` to a
  model that cannot think -> 400.
- loading: a model is loaded by a request (a changed num_ctx reloads it: `loads` counts), others are unloaded
  when the sizes exceed `memory`; /api/ps lists the loaded models with size, size_vram and context_length;
  `keep_alive: 0` unloads after the request.
- a missing model -> 404 `model "x" not found, try pulling it first`.
Faults: `delay_s`, `fail_next(n, status)`, `drop_next(n)` (close without answering), `raw_next(n, body)` (send
this body with 200, e.g. malformed JSON or a reply without `message`), `stop()` (the port then refuses).
`fault_chats(kind, after=, every=, count=)` (issue 41): a fault on the work's chat requests (the readiness check's
timed calls pass unless checks=True) after the first `after` are answered, on every `every`-th one, `count` times
(None: for good), as Ollama and what stands before it send them (CHAT_FAULTS):
- "status": HTTP `status` with Ollama's body `{"error": "<text>"}` (500 "llama runner process has terminated", 503
  "server busy, please try again.  maximum pending requests exceeded", a proxy's 429 ...);
- "error200": `{"error": "<text>"}` with 200, as Ollama ends a reply whose generation failed once the status was sent;
- "empty": 200 and an empty body; "cut": 200, the reply's Content-Length, half the body, then the connection closed;
- "drop": the connection closed without an answer; "slow": the reply after `delay_s`;
- "model": a normal reply naming another model (`model`), as a proxy that routes to another model sends it;
- "think_only": the model spent num_predict thinking: `message.thinking` filled and no content (`<think>` cut in
  content when the request has no `think`).
"""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Union

DEFAULT_CTX = 2048  # Ollama's documented default window (Modelfile num_ctx)


@dataclass(frozen=True)
class StubReply:
    """A scripted reply; `text` may be cut to the request's max tokens (done_reason/finish_reason "length")."""

    text: str
    done_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


ReplySpec = Union[str, StubReply, Callable[[dict], Union[str, StubReply]]]


CHAT_FAULTS = ("status", "error200", "empty", "cut", "drop", "slow", "model", "think_only")
OLLAMA_ERRORS = {  # Ollama's own error texts for the statuses it sends (server/routes.go, llm/server.go)
    500: "llama runner process has terminated: exit status 2",
    503: "server busy, please try again.  maximum pending requests exceeded",
    429: "too many requests",  # a proxy or gateway in front of Ollama (Ollama itself answers 503 when its queue is full)
}


@dataclass
class ChatFault:
    """A fault on chat requests (see OllamaStub.fault_chats); `seen` counts the matching requests, `hits` the faults."""

    kind: str
    after: int = 0
    every: int = 1
    count: int | None = None
    status: int = 500
    error: str = ""
    model: str = "llama3:8b"
    delay_s: float = 1.0
    checks: bool = False
    seen: int = 0
    hits: int = 0

    def take(self, check_call: bool) -> bool:
        """This request gets the fault (counts it)."""
        if check_call and not self.checks:
            return False
        self.seen += 1
        if self.seen <= self.after or (self.seen - self.after - 1) % self.every:
            return False
        if self.count is not None and self.hits >= self.count:
            return False
        self.hits += 1
        return True


@dataclass(frozen=True)
class StubModel:
    """A model the server has. family: details.family; size in bytes (all of it in VRAM unless size_vram)."""

    name: str
    context_length: int = 32768
    thinking: bool = False
    family: str = ""
    size: int = 1_000_000_000
    size_vram: int | None = None

    @property
    def tagged(self) -> str:
        return _norm(self.name)

    @property
    def arch(self) -> str:
        return self.family or self.name.split(":")[0].rstrip("0123456789.") or "llama"


@dataclass
class StubRequest:
    method: str
    path: str
    body: dict[str, Any] = field(default_factory=dict)
    window: int | None = None  # the window the prompt ran in (chat requests)
    prompt_tokens: int | None = None  # the prompt's tokens as sent
    kept_tokens: int | None = None  # after front truncation
    completion_tokens: int | None = None

    @property
    def cut(self) -> bool:
        """The prompt was cut from the front before generation."""
        return self.prompt_tokens is not None and self.kept_tokens is not None and self.kept_tokens < self.prompt_tokens

    @property
    def shifted(self) -> bool:
        """Prompt and reply overran the window: Ollama's runner shifted the context mid-reply, dropping the
        prompt's oldest tokens (the system prompt first) while the model still wrote."""
        return (self.window is not None and self.kept_tokens is not None and self.completion_tokens is not None
                and self.kept_tokens + self.completion_tokens > self.window)

    @property
    def truncated(self) -> bool:
        return self.cut or self.shifted

    @property
    def num_ctx(self) -> int | None:
        return (self.body.get("options") or {}).get("num_ctx")


def is_check_call(body: dict) -> bool:
    """A timed call of the readiness check (its one fixed message)."""
    from harness.backends.readiness import CALL_MESSAGES

    return list(body.get("messages") or []) == CALL_MESSAGES


def free_port() -> int:
    """A port nothing listens on (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _norm(name: str) -> str:
    return name if ":" in name else name + ":latest"


def _words(text: str) -> list[str]:
    return str(text or "").split()


def word_tokens(word: str) -> int:
    """A word's tokens: one per 4 characters, at least one (BPE splits long words; never merges two words)."""
    return max(1, -(-len(word) // 4))


def count_tokens(text: str) -> int:
    return sum(word_tokens(w) for w in _words(text))


def front_truncate(messages: list[dict], window: int) -> tuple[list[dict], int, int]:
    """(messages as kept, tokens sent, tokens kept): the oldest tokens go first, the system prompt first; a cut
    prompt keeps exactly `window` tokens, as Ollama's runner logs it ("truncating input prompt" limit=.. new=..)."""
    total = sum(count_tokens(m.get("content", "")) for m in messages)
    excess = max(0, total - window)
    kept = []
    for m in messages:
        words = _words(m.get("content", ""))
        cut = 0
        while excess > 0 and cut < len(words):
            excess -= word_tokens(words[cut])
            cut += 1
        if cut < len(words) or not words:
            kept.append({**m, "content": " ".join(words[cut:]) if cut else m.get("content", "")})
    return kept, total, min(total, window)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.open_connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self.conn_lock:
            self.open_connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.conn_lock:
                self.open_connections.discard(request)

    def kill_connections(self) -> None:
        with self.conn_lock:
            conns = list(self.open_connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class OllamaStub:
    """Threaded stub server; replies are consumed from a queue, then `default_reply` is used."""

    def __init__(
        self,
        models: Iterable[str | StubModel] = ("stub-model",),
        replies: Iterable[ReplySpec] = (),
        *,
        default_reply: ReplySpec | None = "stub reply",
        delay_s: float = 0.0,
        version: str = "0.6.0",
        default_ctx: int = DEFAULT_CTX,
        memory: int | None = None,
        thinking_text: str = "Let me think about this step by step first.",
        openai_max_model_len: bool = False,
    ) -> None:
        self.catalog = {m.tagged: m for m in (x if isinstance(x, StubModel) else StubModel(x) for x in models)}
        self.models = [m.name for m in self.catalog.values()]
        self.replies: deque[ReplySpec] = deque(replies)
        self.default_reply = default_reply
        self.delay_s = delay_s
        self.version = version
        self.default_ctx = default_ctx
        self.memory = memory  # bytes the loaded models may take together; None = unlimited
        self.thinking_text = thinking_text
        self.openai_max_model_len = openai_max_model_len  # vLLM lists max_model_len in /v1/models; Ollama does not
        self.requests: list[StubRequest] = []
        self.loaded: dict[str, int] = {}  # tagged model -> num_ctx it was loaded with (insertion = LRU order)
        self.loads: dict[str, int] = {}  # tagged model -> times loaded
        self._failures: deque[tuple[int, str]] = deque()
        self._raw: deque[str] = deque()
        self._drops = 0
        self.chat_faults: list[ChatFault] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- lifecycle --------------------------------------------------------------------------------------
    def start(self) -> "OllamaStub":
        self._server = _Server(("127.0.0.1", self.port), self._handler_class())
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Kill the server: open keep-alive connections are cut, later connections to the port are refused."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server.kill_connections()
            self._server = None

    def __enter__(self) -> "OllamaStub":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self._server is not None

    # -- fault injection --------------------------------------------------------------------------------
    def fail_next(self, count: int = 1, status: int = 503, error: str = "server overloaded") -> None:
        with self._lock:
            self._failures.extend([(status, error)] * count)

    def drop_next(self, count: int = 1) -> None:
        with self._lock:
            self._drops += count

    def raw_next(self, count: int = 1, body: str = '{"model": "x", "message": {"content": "unterminat') -> None:
        """The next chat replies are this body with HTTP 200 (malformed JSON, a reply without `message` ...)."""
        with self._lock:
            self._raw.extend([body] * count)

    def fault_chats(self, kind: str = "status", *, after: int = 0, every: int = 1, count: int | None = None,
                    status: int = 500, error: str | None = None, model: str = "llama3:8b", delay_s: float = 1.0,
                    checks: bool = False) -> ChatFault:
        """From the (after+1)-th chat request of the work on, every `every`-th one gets the fault, `count` times
        (None: for good); kinds in the module's docstring (CHAT_FAULTS). Returns the fault, whose `hits` say how
        many requests it met. The readiness check's timed calls are neither faulted nor counted unless checks."""
        if kind not in CHAT_FAULTS:
            raise ValueError(f"unknown chat fault {kind!r}; expected one of {', '.join(CHAT_FAULTS)}")
        if every < 1 or after < 0:
            raise ValueError(f"fault_chats needs every >= 1 and after >= 0; got every={every}, after={after}")
        if error is None:
            error = (OLLAMA_ERRORS.get(status, "an error occurred") if kind == "status"
                     else "an error was encountered while running the model: unexpected EOF")
        fault = ChatFault(kind, after, every, count, status, error, model, delay_s, checks)
        with self._lock:
            self.chat_faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        """The server is healthy again: every fault armed is dropped."""
        with self._lock:
            self.chat_faults.clear()
            self._failures.clear()
            self._raw.clear()
            self._drops = 0

    def chat_requests(self, include_checks: bool = False) -> list[StubRequest]:
        """The chat requests of the work; the readiness check's timed calls (harness.backends.readiness, one per role
        before a sweep) only with include_checks, so a test counting a sweep's calls counts its work."""
        chats = [r for r in self.requests if r.path in ("/api/chat", "/v1/chat/completions")]
        return chats if include_checks else [r for r in chats if not is_check_call(r.body)]

    # -- internals --------------------------------------------------------------------------------------
    def _next_reply(self, body: dict) -> StubReply:
        with self._lock:
            spec = self.replies.popleft() if self.replies else self.default_reply
        if spec is None:
            return StubReply("")
        if callable(spec):
            spec = spec(body)
        return spec if isinstance(spec, StubReply) else StubReply(str(spec))

    def _take_fault(self, path: str, body: dict | None = None) -> tuple[str, Any]:
        chat = path in ("/api/chat", "/v1/chat/completions")
        with self._lock:
            if self._drops:
                self._drops -= 1
                return "drop", None
            if self._failures:
                return "fail", self._failures.popleft()
            if self._raw and chat:
                return "raw", self._raw.popleft()
            if chat and self.chat_faults:
                check = is_check_call(body or {})
                for fault in self.chat_faults:
                    if fault.take(check):
                        return "chat", fault
        return "", None

    def _model(self, name: str) -> StubModel | None:
        return self.catalog.get(_norm(str(name or "")))

    def _has_model(self, name: str) -> bool:
        return self._model(name) is not None

    def _load(self, model: StubModel, num_ctx: int, keep_alive: Any) -> None:
        """Load `model` with `num_ctx` (a changed num_ctx reloads), unloading the least recently used models
        while the loaded sizes exceed `memory`; keep_alive 0 unloads it after the request."""
        with self._lock:
            if self.loaded.get(model.tagged) != num_ctx:
                self.loads[model.tagged] = self.loads.get(model.tagged, 0) + 1
            self.loaded.pop(model.tagged, None)
            self.loaded[model.tagged] = num_ctx
            if self.memory is not None:
                while len(self.loaded) > 1 and sum(self.catalog[m].size for m in self.loaded) > self.memory:
                    self.loaded.pop(next(iter(self.loaded)))
            if keep_alive in (0, "0", "0s", "0m"):
                self.loaded.pop(model.tagged, None)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send_raw(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _send(self, status: int, payload: dict) -> None:
                self._send_raw(status, json.dumps(payload).encode())

            def _route(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except json.JSONDecodeError:
                    self._send(400, {"error": "invalid JSON body"})
                    return
                path = self.path.split("?")[0]
                self.record = StubRequest(method, path, body)
                stub.requests.append(self.record)
                fault, detail = stub._take_fault(path, body)
                self.fault = None
                if fault == "chat":
                    if detail.kind in ("status", "error200", "empty", "cut", "drop"):
                        self._chat_fault(path, detail)
                        return
                    self.fault = detail  # slow, model, think_only: shape the normal reply
                    if detail.kind == "slow":
                        time.sleep(detail.delay_s)
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault == "fail":
                    status, error = detail
                    self._send(status, {"error": error} if path.startswith("/api") else {"error": {"message": error}})
                    return
                if fault == "raw":
                    self._send_raw(200, detail.encode())
                    return
                if stub.delay_s:
                    time.sleep(stub.delay_s)
                handler = {
                    ("GET", "/api/version"): self._version,
                    ("GET", "/api/tags"): self._tags,
                    ("GET", "/api/ps"): self._ps,
                    ("POST", "/api/show"): self._show,
                    ("POST", "/api/chat"): self._ollama_chat,
                    ("GET", "/v1/models"): self._openai_models,
                    ("POST", "/v1/chat/completions"): self._openai_chat,
                }.get((method, path))
                if handler is None:
                    self._send(404, {"error": f"no route {method} {path}"})
                    return
                try:
                    handler(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _chat_fault(self, path: str, fault: ChatFault) -> None:
                """A fault that replaces the answer: a status, an error in a 200, an empty or cut body, a drop."""
                ollama_api = path.startswith("/api")
                error = {"error": fault.error} if ollama_api else {"error": {"message": fault.error}}
                if fault.kind == "status":
                    self._send(fault.status, error)
                elif fault.kind == "error200":
                    self._send(200, error)
                elif fault.kind == "empty":
                    self._send_raw(200, b"")
                else:  # cut or drop: the connection goes with the answer unsent (or half sent)
                    self.close_connection = True
                    if fault.kind == "cut":
                        data = json.dumps({"model": "x", "created_at": "2025-01-01T00:00:00Z",
                                           "message": {"role": "assistant", "content": "a reply cut mid-way " * 8},
                                           "done": True, "done_reason": "stop"}).encode()
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data[: len(data) // 2])
                        self.wfile.flush()
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def _version(self, body: dict) -> None:
                self._send(200, {"version": stub.version})

            def _tags(self, body: dict) -> None:
                models = [{"name": m.name, "model": m.name, "size": m.size,
                           "digest": hashlib.sha256(m.tagged.encode()).hexdigest(),
                           "details": {"family": m.arch}} for m in stub.catalog.values()]
                self._send(200, {"models": models})

            def _ps(self, body: dict) -> None:
                with stub._lock:
                    loaded = list(stub.loaded.items())
                models = []
                for name, num_ctx in loaded:
                    m = stub.catalog[name]
                    models.append({"name": m.name, "model": m.name, "size": m.size,
                                   "size_vram": m.size if m.size_vram is None else m.size_vram,
                                   "digest": hashlib.sha256(m.tagged.encode()).hexdigest(),
                                   "details": {"family": m.arch}, "context_length": num_ctx,
                                   "expires_at": "2030-01-01T00:00:00Z"})
                self._send(200, {"models": models})

            def _missing(self, name: str) -> None:
                self._send(404, {"error": f'model "{name}" not found, try pulling it first'})

            def _show(self, body: dict) -> None:
                name = body.get("model") or body.get("name") or ""
                m = stub._model(name)
                if m is None:
                    self._missing(name)
                    return
                caps = ["completion"] + (["thinking"] if m.thinking else [])
                self._send(200, {
                    "modelfile": f"FROM {m.name}", "parameters": "", "template": "{{ .Prompt }}",
                    "details": {"family": m.arch, "format": "gguf", "parameter_size": "7B"},
                    "model_info": {"general.architecture": m.arch, f"{m.arch}.context_length": m.context_length},
                    "capabilities": caps,
                })

            def _generate(self, m: StubModel, body: dict, window: int, limit: Any, think: Any) -> tuple:
                """Cut the prompt to the window, ask the scripted reply, add thinking; returns the parts."""
                kept, total, kept_n = front_truncate(list(body.get("messages", [])), window)
                self.record.window, self.record.prompt_tokens, self.record.kept_tokens = window, total, kept_n
                reply = stub._next_reply({**body, "messages": kept})
                thinking = stub.thinking_text if m.thinking and think is not False else ""
                budget = None if limit is None else int(limit)
                thought_words = _words(thinking)
                if budget is not None and len(thought_words) >= budget:  # thinking spends num_predict first
                    thinking, budget = " ".join(thought_words[:budget]), 0
                elif budget is not None:
                    budget -= len(thought_words)
                shaped, _, completion = _shape(reply, kept, budget)
                prompt = reply.prompt_tokens if reply.prompt_tokens is not None else kept_n
                self.record.completion_tokens = completion + len(_words(thinking))
                return shaped, thinking, prompt, self.record.completion_tokens

            def _ollama_chat(self, body: dict) -> None:
                model = body.get("model", "")
                m = stub._model(model)
                if m is None:
                    self._missing(model)
                    return
                think = body.get("think")
                if think and not m.thinking:
                    self._send(400, {"error": f'"{model}" does not support thinking'})
                    return
                options = body.get("options") or {}
                window = min(int(options.get("num_ctx") or stub.default_ctx), m.context_length)
                stub._load(m, window, body.get("keep_alive"))
                reply, thinking, prompt, completion = self._generate(m, body, window, options.get("num_predict"), think)
                fault = self.fault
                if fault is not None and fault.kind == "think_only":  # num_predict spent thinking: no answer
                    reply, thinking = StubReply("", "length"), thinking or stub.thinking_text
                message = {"role": "assistant", "content": reply.text}
                if thinking and think not in (None, False):  # true or a level (gpt-oss): a field of its own
                    message["thinking"] = thinking
                elif thinking:  # no `think` in the request: the model's raw output, <think> block and all
                    message["content"] = f"<think>{thinking}</think>\n\n{reply.text}" if reply.text else f"<think>{thinking}"
                if fault is not None and fault.kind == "model":
                    model = fault.model
                self._send(200, {
                    "model": model, "created_at": "2025-01-01T00:00:00Z", "message": message, "done": True,
                    "done_reason": reply.done_reason, "prompt_eval_count": prompt, "eval_count": completion,
                    "total_duration": 1000,
                })

            def _openai_models(self, body: dict) -> None:
                data = [{"id": m.name, "object": "model", "owned_by": "library"} for m in stub.catalog.values()]
                if stub.openai_max_model_len:
                    data = [{**d, "max_model_len": m.context_length} for d, m in zip(data, stub.catalog.values())]
                self._send(200, {"object": "list", "data": data})

            def _openai_chat(self, body: dict) -> None:
                model = body.get("model", "")
                m = stub._model(model)
                if m is None:
                    self._send(
                        404,
                        {"error": {"message": f"The model `{model}` does not exist.", "code": "model_not_found"}},
                    )
                    return
                window = m.context_length if stub.openai_max_model_len else min(stub.default_ctx, m.context_length)
                stub._load(m, window, None)
                reply, thinking, prompt, completion = self._generate(m, body, window, body.get("max_tokens"), False)
                fault = self.fault
                if fault is not None and fault.kind == "think_only":
                    reply = StubReply(f"<think>{stub.thinking_text}", "length")
                if fault is not None and fault.kind == "model":
                    model = fault.model
                self._send(
                    200,
                    {
                        "id": "chatcmpl-stub",
                        "object": "chat.completion",
                        "created": 0,
                        "model": model,
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply.text},
                                "finish_reason": reply.done_reason,
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt,
                            "completion_tokens": completion,
                            "total_tokens": prompt + completion,
                        },
                    },
                )

        return Handler


def _shape(reply: StubReply, messages: list[dict], limit: int | None) -> tuple[StubReply, int, int]:
    """Word-count tokens; cut the reply to `limit` words and mark it "length" when it is longer."""
    words = reply.text.split(" ")
    text, done = reply.text, reply.done_reason
    if limit is not None and len(words) > int(limit):
        text, done = " ".join(words[: int(limit)]), "length"
    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else sum(
        len(str(m.get("content", "")).split()) for m in messages
    )
    completion = reply.completion_tokens if reply.completion_tokens is not None else len(text.split())
    return StubReply(text, done, prompt, completion), prompt, completion


def json_for_schema(schema: dict, depth: int = 0) -> Any:
    """A small value that satisfies a bounded JSON schema (the harness's schemas): required properties, one item
    per array (or minItems), the minimum or middle of number ranges, the first enum value."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: json_for_schema(v, depth + 1) for k, v in props.items()}
    if kind == "array":
        n = max(1, int(schema.get("minItems") or 1))
        return [json_for_schema(schema.get("items") or {"type": "string"}, depth + 1) for _ in range(n)]
    if kind in ("number", "integer"):
        lo, hi = schema.get("minimum", 0), schema.get("maximum", 10)
        value = (lo + hi) * 0.7
        return int(value) if kind == "integer" else round(value, 1)
    if kind == "boolean":
        return True
    cap = min(int(schema.get("maxLength") or 160), 160)  # models fill their fields: up to 160 characters
    return " ".join(["python asyncio event loop tasks"] * 6)[:cap].strip()


def schema_reply(text: str) -> Callable[[dict], str]:
    """A reply function: JSON for a request with a `format` schema (Ollama) or a json_schema response_format
    (OpenAI), else `text`. Every stage of the harness then gets something it can read."""

    def reply(body: dict) -> str:
        fmt = body.get("format")
        if isinstance(fmt, dict):
            return json.dumps(json_for_schema(fmt))
        rf = body.get("response_format") or {}
        schema = (rf.get("json_schema") or {}).get("schema") if isinstance(rf, dict) else None
        if isinstance(schema, dict):
            return json.dumps(json_for_schema(schema))
        return text

    return reply
