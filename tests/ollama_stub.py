"""A tiny threaded HTTP server on 127.0.0.1 speaking enough of Ollama's API (and the OpenAI chat API) to test
the real clients, including faults.

    with OllamaStub(models=["glm4:9b"], replies=["hello"]) as stub:
        OllamaLLM("glm4:9b", stub.url).chat(...)
        stub.requests[-1].body["format"]

Ollama: GET /api/version, GET /api/tags, POST /api/chat (stream false).
OpenAI: GET /v1/models, POST /v1/chat/completions.
Faults: `delay_s` (slow replies), `fail_next(n, status)` (HTTP errors), `drop_next(n)` (close the connection
without answering), unknown model -> 404 "model not found", `stop()` (the server dies; the port then refuses).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Union


@dataclass(frozen=True)
class StubReply:
    """A scripted reply; `text` may be cut to the request's max tokens (done_reason/finish_reason "length")."""

    text: str
    done_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


ReplySpec = Union[str, StubReply, Callable[[dict], Union[str, StubReply]]]


@dataclass
class StubRequest:
    method: str
    path: str
    body: dict[str, Any] = field(default_factory=dict)


def free_port() -> int:
    """A port nothing listens on (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
        models: Iterable[str] = ("stub-model",),
        replies: Iterable[ReplySpec] = (),
        *,
        default_reply: ReplySpec | None = "stub reply",
        delay_s: float = 0.0,
        version: str = "0.6.0",
    ) -> None:
        self.models = list(models)
        self.replies: deque[ReplySpec] = deque(replies)
        self.default_reply = default_reply
        self.delay_s = delay_s
        self.version = version
        self.requests: list[StubRequest] = []
        self._failures: deque[tuple[int, str]] = deque()
        self._drops = 0
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

    def chat_requests(self) -> list[StubRequest]:
        return [r for r in self.requests if r.path in ("/api/chat", "/v1/chat/completions")]

    # -- internals --------------------------------------------------------------------------------------
    def _next_reply(self, body: dict) -> StubReply:
        with self._lock:
            spec = self.replies.popleft() if self.replies else self.default_reply
        if spec is None:
            return StubReply("")
        if callable(spec):
            spec = spec(body)
        return spec if isinstance(spec, StubReply) else StubReply(str(spec))

    def _take_fault(self) -> tuple[str, tuple[int, str] | None]:
        with self._lock:
            if self._drops:
                self._drops -= 1
                return "drop", None
            if self._failures:
                return "fail", self._failures.popleft()
        return "", None

    def _has_model(self, name: str) -> bool:
        def norm(n: str) -> str:
            return n if ":" in n else n + ":latest"

        return norm(name) in {norm(m) for m in self.models}

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _route(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except json.JSONDecodeError:
                    self._send(400, {"error": "invalid JSON body"})
                    return
                path = self.path.split("?")[0]
                stub.requests.append(StubRequest(method, path, body))
                fault, failure = stub._take_fault()
                if fault == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault == "fail":
                    status, error = failure
                    self._send(status, {"error": error} if path.startswith("/api") else {"error": {"message": error}})
                    return
                if stub.delay_s:
                    time.sleep(stub.delay_s)
                handler = {
                    ("GET", "/api/version"): self._version,
                    ("GET", "/api/tags"): self._tags,
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

            def do_GET(self) -> None:
                self._route("GET")

            def do_POST(self) -> None:
                self._route("POST")

            def _version(self, body: dict) -> None:
                self._send(200, {"version": stub.version})

            def _tags(self, body: dict) -> None:
                models = [{"name": m, "model": m, "size": 1, "digest": "0" * 64} for m in stub.models]
                self._send(200, {"models": models})

            def _ollama_chat(self, body: dict) -> None:
                model = body.get("model", "")
                if not stub._has_model(model):
                    self._send(404, {"error": f'model "{model}" not found, try pulling it first'})
                    return
                limit = (body.get("options") or {}).get("num_predict")
                reply, prompt, completion = _shape(stub._next_reply(body), body.get("messages", []), limit)
                self._send(
                    200,
                    {
                        "model": model,
                        "created_at": "2025-01-01T00:00:00Z",
                        "message": {"role": "assistant", "content": reply.text},
                        "done": True,
                        "done_reason": reply.done_reason,
                        "prompt_eval_count": prompt,
                        "eval_count": completion,
                        "total_duration": 1000,
                    },
                )

            def _openai_models(self, body: dict) -> None:
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in stub.models]})

            def _openai_chat(self, body: dict) -> None:
                model = body.get("model", "")
                if not stub._has_model(model):
                    self._send(
                        404,
                        {"error": {"message": f"The model `{model}` does not exist.", "code": "model_not_found"}},
                    )
                    return
                reply, prompt, completion = _shape(stub._next_reply(body), body.get("messages", []), body.get("max_tokens"))
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
