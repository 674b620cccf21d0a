"""Concrete LLM backends: ollama, openai (compatible servers), embedded (xllamacpp), auto.

Each module registers a factory `(BackendConfig, role) -> LLM` with `harness.inference.register_backend`;
`harness.inference.make_llm` imports them lazily. This package holds the small helpers they share (host
normalisation, retry with exponential backoff, message conversion), the preflight check and the readiness check.

- _common: `ollama_host`, `backoff_delays`, `with_retries`, `plain_messages`, and `quiet_http_logs`, which the
  entry points call so the HTTP clients log no line per request.
- _preflight: `preflight`, the cheap check before a run writes anything.
- auto, ollama_backend, openai_backend, embedded, context: the backends and the context windows they ask for.
- readiness: `python -m harness --check`, the deep check of every role's model.
"""

from ._common import quiet_http_logs
from ._preflight import preflight

__all__ = [
    "preflight",
    "quiet_http_logs",
]
