"""The LLM seam: the message and reply types, the protocol every backend meets, and the errors a backend raises."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

Message = Mapping[str, str]  # {"role": "system"|"user"|"assistant", "content": str}


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

