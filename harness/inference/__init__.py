"""The LLM protocol, the backend registry, the scripted fake, the response cache and the role wrapper.

Every model call in the project goes through `LLM.chat`. Backends are small classes registered by name;
`make_roles(cfg)` builds the four role LLMs (planner, producer, evaluator, compressor) from one config.
Concrete network/runtime backends live in harness/backends/ and are imported lazily, so importing this
package stays cheap.

- _protocol: `Message`, `ChatResult`, the `LLM` protocol and the backend errors.
- _scope: `RunScope`, the stop flag and uncached-call count of one pooled run.
- _registry: `register_backend`, `make_llm`: backends by name.
- _fake: `FakeLLM`, the scripted backend of the tests.
- _cache: `ResponseCache` and `CachedLLM`.
- _roles: `RoleLLM` (tracing, accounting, <think> removal) and `Roles`, the four role LLMs of one run.
"""

from ._cache import ResponseCache, reply_options
from ._protocol import (
    LLM,
    BackendError,
    BackendUnavailable,
    ChatResult,
    ContextOverflow,
    Message,
    ModelMissing,
    context_overflow,
)
from ._registry import backend_names, make_llm, register_backend
from ._roles import SMOKE_LABEL, RoleLLM, Roles, base_llm, make_roles, smoke_label, wrap_roles
from ._scope import RunAbandoned, RunScope, run_scope

__all__ = [
    "Message",
    "ChatResult",
    "LLM",
    "BackendError",
    "BackendUnavailable",
    "ModelMissing",
    "ContextOverflow",
    "context_overflow",
    "RunAbandoned",
    "RunScope",
    "run_scope",
    "register_backend",
    "backend_names",
    "make_llm",
    "reply_options",
    "ResponseCache",
    "base_llm",
    "smoke_label",
    "SMOKE_LABEL",
    "RoleLLM",
    "Roles",
    "wrap_roles",
    "make_roles",
]
