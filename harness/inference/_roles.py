"""The role wrapper: each role's LLM traced and counted per role, <think> blocks taken out, and the four roles
of one run built from config (`make_roles`) or from raw LLMs (`wrap_roles`, `fake_roles`)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.config import ROLES, BackendConfig

from ._cache import CachedLLM, ResponseCache
from ._fake import FakeLLM
from ._protocol import LLM, BackendError, ChatResult
from ._registry import make_llm
from ._scope import _RUN_SCOPE, RunAbandoned


def base_llm(llm: Any) -> Any:
    """The backend object under the role, cache and accounting wrappers (each keeps the next as `.inner`)."""
    seen = 0
    while hasattr(llm, "inner") and seen < 10:
        llm, seen = llm.inner, seen + 1
    return llm


def smoke_label(models: Sequence[str]) -> str:
    """The one label of output from embedded models, naming the model files actually loaded (none named: "embedded
    model"): a run's output and record, and the experiments' summaries and run label, all carry this wording."""
    return f"SMOKE RUN (embedded {', '.join(models) or 'model'}): structure check only, not research quality"


SMOKE_LABEL = smoke_label(["SmolLM2-135M"])  # the packaged default; Roles.smoke_label names what was loaded


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
        from harness.tracing import current_tracer

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
