"""The backend registry: backends are small classes registered by name and built per role by `make_llm`.

Concrete network/runtime backends live in harness/backends/ and are imported lazily, so importing the registry
stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Callable

from harness.config import BackendConfig

from ._protocol import LLM

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

