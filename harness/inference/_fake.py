"""The scripted fake backend (tests only), registered as "fake"."""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ._protocol import BackendError, ChatResult
from ._registry import register_backend


class FakeExhausted(BackendError):
    """The scripted fake ran out of replies: the test asked for more calls than it scripted."""


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

