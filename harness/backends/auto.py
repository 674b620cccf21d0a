"""auto (the default backend): Ollama when it is reachable and has the role's model, else the embedded model.

The probe is one GET {host}/api/tags bounded by backend.probe_timeout_s. The decision is made once per process
for a given (host, role models) and announced in one line (logging and stderr): a sweep never switches
backend halfway through. HARNESS_BACKEND=<kind> forces a backend.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from harness.config import ROLES, BackendConfig
from harness.inference import LLM, make_llm, register_backend

from ._common import ollama_host

log = logging.getLogger("harness.backends.auto")

ENV_FORCE = "HARNESS_BACKEND"
fallback_kind = "embedded"  # tests may point this at a registered fake


@dataclass(frozen=True)
class Probe:
    host: str
    reachable: bool
    models: frozenset[str]  # as tagged names: "qwen2.5:32b", "llama3:latest"
    error: str = ""

    def has_model(self, name: str) -> bool:
        """Whether the server lists `name`; an untagged name means its :latest tag, as Ollama reads it."""
        return tagged(name) in self.models


@dataclass(frozen=True)
class AutoDecision:
    host: str
    kinds: tuple[tuple[str, str], ...]  # (role, kind) for every role
    reason: str

    def kind_for(self, role: str) -> str:
        return dict(self.kinds)[role]

    def line(self) -> str:
        by_kind: dict[str, list[str]] = {}
        for role, kind in self.kinds:
            by_kind.setdefault(kind, []).append(role)
        chosen = "; ".join(f"{kind} for {', '.join(roles)}" for kind, roles in by_kind.items())
        return f"backend auto: {chosen} ({self.reason})"


def tagged(name: str) -> str:
    """An Ollama model name with its tag: "llama3" -> "llama3:latest"; a tagged name is kept."""
    return name if ":" in name else f"{name}:latest"


def probe_ollama(host: str, timeout_s: float) -> Probe:
    """One cheap GET /api/tags; never raises."""
    loopback = (urllib.parse.urlsplit(host).hostname or "") in {"127.0.0.1", "localhost", "::1"}
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({})) if loopback else urllib.request.build_opener()
    try:
        with opener.open(f"{host}/api/tags", timeout=timeout_s) as resp:
            data = json.loads(resp.read().decode() or "{}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Probe(host, False, frozenset(), f"{type(exc).__name__}: {reason}")
    names = set()
    for m in data.get("models") or []:
        for key in ("name", "model"):
            if m.get(key):
                names.add(tagged(str(m[key])))
    return Probe(host, True, frozenset(names))


def choose_backends(cfg: BackendConfig, probe: Probe, fallback: str = "embedded") -> AutoDecision:
    """Pure: which backend each role gets, and why, given the probe."""
    if not probe.reachable:
        kinds = tuple((role, fallback) for role in ROLES)
        return AutoDecision(probe.host, kinds, f"Ollama not reachable at {probe.host}: {probe.error}")
    missing = [role for role in ROLES if not probe.has_model(cfg.model_for(role))]
    kinds = tuple((role, fallback if role in missing else "ollama") for role in ROLES)
    if not missing:
        reason = f"Ollama at {probe.host} has {', '.join(sorted({cfg.model_for(r) for r in ROLES}))}"
    else:
        lacking = ", ".join(f"{r}={cfg.model_for(r)}" for r in missing)
        reason = f"Ollama at {probe.host} is up but lacks {lacking}; `ollama pull` them to use Ollama"
    return AutoDecision(probe.host, kinds, reason)


_LOCK = threading.Lock()
_DECISIONS: dict[tuple, AutoDecision] = {}
_ANNOUNCED: set[str] = set()


def reset() -> None:
    """Forget decisions and announcements (tests)."""
    with _LOCK:
        _DECISIONS.clear()
        _ANNOUNCED.clear()


def announce(line: str) -> None:
    """Log and print a line once per process."""
    with _LOCK:
        if line in _ANNOUNCED:
            return
        _ANNOUNCED.add(line)
    log.info(line)
    print(line, file=sys.stderr, flush=True)


def auto_decision(cfg: BackendConfig) -> AutoDecision:
    """The decision for cfg, probing at most once per process for the same host and role models."""
    host = ollama_host(cfg.host)
    key = (host, tuple(cfg.model_for(r) for r in ROLES), fallback_kind)
    with _LOCK:
        found = _DECISIONS.get(key)
    if found is None:
        found = choose_backends(cfg, probe_ollama(host, cfg.probe_timeout_s), fallback_kind)
        with _LOCK:
            found = _DECISIONS.setdefault(key, found)
    announce(found.line())
    return found


@register_backend("auto")
def make_auto(cfg: BackendConfig, role: str) -> LLM:
    forced = os.environ.get(ENV_FORCE, "").strip()
    if forced and forced != "auto":
        announce(f"backend auto: {forced} for all roles ({ENV_FORCE}={forced})")
        return make_llm(dataclasses.replace(cfg, kind=forced), role)
    kind = auto_decision(cfg).kind_for(role)
    return make_llm(dataclasses.replace(cfg, kind=kind), role)
