"""Readiness check: before a night's run, does every role's model exist, fit and answer?

`python -m harness --check` prints, per role: the model, present or not, its digest, its trained context, the
window the run will use, thinking or not, one timed call; then judge vs producer family, keep_alive, and
whether the roles' models stay loaded together (/api/ps after one call each: a model missing there was unloaded
to make room, so a sweep would reload models on every role change). Problems (server down, a model missing, a
call that fails) are one line each and exit status 2. Nothing is written: no results folder, no cache.
experiments.run calls `require_ready` before a sweep, A/B or calibration on Ollama or an OpenAI-compatible server.
"""

from __future__ import annotations

import dataclasses
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable

from harness.config import ROLES, BackendConfig
from harness.inference import BackendError, RoleLLM, make_llm

PROBE_TIMEOUT_S = 10.0
# the timed call: JSON roles answer a tiny schema (their requests carry one, so `think` is as in the run)
CALL_MESSAGES = [{"role": "user", "content": "Reply with the word ready."}]
CALL_SCHEMA = {"type": "object", "properties": {"ready": {"type": "string", "maxLength": 10}}, "required": ["ready"]}
TEXT_ROLES = ("producer",)


class NotReady(BackendError):
    """The readiness check found problems; the message lists them."""


@dataclass(frozen=True)
class RoleCheck:
    role: str
    model: str
    kind: str
    present: bool | None = None
    digest: str | None = None
    context_length: int | None = None
    num_ctx: int | None = None
    thinking: bool | None = None
    think: str = ""
    family: str | None = None
    call_s: float | None = None
    thinking_tokens: int = 0
    error: str = ""

    def line(self) -> str:
        def v(x: Any, unknown: str = "?") -> str:
            return unknown if x is None else str(x)

        present = {True: "present", False: "MISSING", None: "?"}[self.present]
        think = "n/a" if self.thinking is None else ("yes" if self.thinking else "no")
        call = f"{self.call_s:.2f}s" if self.call_s is not None else f"FAILED ({self.error})" if self.error else "-"
        spent = f" (thinking {self.thinking_tokens} tokens)" if self.thinking_tokens else ""
        return (f"{self.role:<10} {self.kind}:{self.model}  {present}  digest {v(self.digest)[:12]}  "
                f"context {v(self.context_length)}  window {v(self.num_ctx, 'unknown')}  thinking {think}"
                f"{(' ' + self.think) if self.think else ''}  family {v(self.family)}  call {call}{spent}")


@dataclass(frozen=True)
class Readiness:
    where: str
    roles: tuple[RoleCheck, ...]
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def ready(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        out = [f"== readiness: {self.where} =="]
        out += [r.line() for r in self.roles]
        out += self.notes
        out += [f"WARNING: {w}" for w in self.warnings]
        out.append("READY" if self.ready else f"NOT READY: {len(self.problems)} problem(s)")
        return out


def _get_json(url: str, timeout_s: float, headers: dict[str, str] | None = None) -> Any:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=timeout_s) as resp:
        return json.loads(resp.read().decode() or "{}")


def _timed_call(cfg: BackendConfig, role: str, max_tokens: int) -> tuple[float | None, int, str]:
    """(seconds, thinking tokens, error) of one call through the role seam (no cache: nothing is written)."""
    try:
        llm = RoleLLM(role, make_llm(cfg, role))
        t0 = time.perf_counter()
        result = llm.chat(CALL_MESSAGES, schema=None if role in TEXT_ROLES else CALL_SCHEMA, temperature=0.0,
                          max_tokens=max_tokens, seed=0)
        return time.perf_counter() - t0, result.thinking_tokens, ""
    except Exception as exc:  # noqa: BLE001 - reported as the role's problem
        return None, 0, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]


def _families(checks: tuple[RoleCheck, ...]) -> tuple[list[str], list[str]]:
    by = {c.role: c for c in checks}
    producer, judge = by.get("producer"), by.get("evaluator")
    if producer is None or judge is None:
        return [], []
    pf, jf = producer.family or "?", judge.family or "?"
    note = f"judge vs producer: {judge.model} ({jf}) vs {producer.model} ({pf})"
    if judge.model == producer.model:
        return [note + ": the same model"], ["the judge is the producer's own model: it tends to rate its own outputs "
                                             "higher (self-preference); set backend.evaluator_model to another family"]
    if pf != "?" and pf == jf:
        return [note + ": the same family"], [f"the judge is from the producer's family ({pf}): self-preference "
                                              f"bias can carry across a family; prefer another family"]
    return [note + (": different families" if "?" not in (pf, jf) else ": family unknown")], []


def check_ollama(cfg: BackendConfig, roles: tuple[str, ...] = ROLES) -> Readiness:
    from ._common import ollama_host
    from .context import ROLE_MAX_TOKENS, model_num_ctx
    from .ollama_backend import configured_think, read_model_info
    import ollama

    host = ollama_host(cfg.host)
    where = f"ollama at {host}"
    try:
        tags = _get_json(f"{host}/api/tags", min(PROBE_TIMEOUT_S, cfg.timeout_s))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Readiness(where, (), problems=(f"Ollama is not reachable at {host}: {type(exc).__name__}: {reason}; "
                                              f"start it with `ollama serve` or set backend.host",))
    digests = {}
    for m in tags.get("models") or []:
        name = str(m.get("model") or m.get("name") or "")
        digests[name if ":" in name else name + ":latest"] = m.get("digest")
    client = ollama.Client(host=host, timeout=min(PROBE_TIMEOUT_S * 6, cfg.timeout_s))
    checks, problems = [], []
    for role in roles:
        model = cfg.model_for(role)
        tagged = model if ":" in model else model + ":latest"
        if tagged not in digests:
            checks.append(RoleCheck(role, model, "ollama", present=False))
            problems.append(f"{role}: Ollama at {host} does not have {model}; run `ollama pull {model}` or set "
                            f"backend.{role}_model")
            continue
        info = read_model_info(client, model)
        num_ctx, _ = model_num_ctx(cfg, model, info.context_length)
        think = configured_think(cfg.think, role)
        sent = ("think off for JSON" if think is None and role not in TEXT_ROLES else
                "model default" if think is None else f"think={str(think).lower()}") if info.thinking else ""
        if think and not info.thinking:
            problems.append(f"{role}: backend.think is true but {model} cannot think (/api/show capabilities)")
        seconds, spent, error = _timed_call(cfg, role, ROLE_MAX_TOKENS[role])
        if error:
            problems.append(f"{role}: the timed call to {model} failed: {error}")
        checks.append(RoleCheck(role, model, "ollama", True, digests[tagged], info.context_length, num_ctx,
                                info.thinking, sent, info.family, seconds, spent, error))
    notes, warnings = _families(tuple(checks))
    notes.append(f"keep_alive: {cfg.keep_alive if cfg.keep_alive is not None else 'server default (5m)'}")
    loaded_note, loaded_warnings = _loaded_together(host, cfg, tuple(c for c in checks if c.present))
    notes.append(loaded_note)
    return Readiness(where, tuple(checks), tuple(notes), tuple(warnings + loaded_warnings), tuple(problems))


def _loaded_together(host: str, cfg: BackendConfig, checks: tuple[RoleCheck, ...]) -> tuple[str, list[str]]:
    """After one call per role, /api/ps should list every role's model: one missing was unloaded for another."""
    try:
        ps = _get_json(f"{host}/api/ps", min(PROBE_TIMEOUT_S, cfg.timeout_s))
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"loaded models: /api/ps could not be read ({type(exc).__name__})", []
    loaded = {}
    for m in ps.get("models") or []:
        name = str(m.get("model") or m.get("name") or "")
        loaded[name if ":" in name else name + ":latest"] = m
    wanted = sorted({c.model if ":" in c.model else c.model + ":latest" for c in checks if not c.error})
    sizes = ", ".join(f"{n} {int(m.get('size') or 0) / 2**30:.1f} GiB ({int(m.get('size_vram') or 0) / 2**30:.1f} "
                      f"in VRAM, window {m.get('context_length', '?')})" for n, m in loaded.items())
    note = f"loaded after the calls (/api/ps): {sizes or 'none'}"
    warnings = []
    gone = [n for n in wanted if n not in loaded]
    if gone and cfg.keep_alive not in (0, "0", "0s"):
        warnings.append(f"the roles' models cannot stay loaded together: {', '.join(gone)} was unloaded to load "
                        f"another, so a sweep reloads a model at every role change; use smaller models or windows, "
                        f"fewer distinct models, or raise OLLAMA_MAX_LOADED_MODELS if memory allows")
    for n, m in loaded.items():
        size, vram = int(m.get("size") or 0), int(m.get("size_vram") or 0)
        if n in wanted and size and vram < size:
            warnings.append(f"{n} runs {100 * (size - vram) / size:.0f}% on the CPU ({vram / 2**30:.1f} of "
                            f"{size / 2**30:.1f} GiB in VRAM): slow; a smaller backend.num_ctx or model fits better")
    return note, warnings


def check_openai(cfg: BackendConfig, roles: tuple[str, ...] = ROLES) -> Readiness:
    import os

    from .context import ROLE_MAX_TOKENS

    base = (cfg.base_url or "").rstrip("/")
    where = f"openai-compatible server at {base}"
    key = cfg.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
    try:
        listed = _get_json(f"{base}/models", min(PROBE_TIMEOUT_S, cfg.timeout_s), {"Authorization": f"Bearer {key}"})
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Readiness(where, (), problems=(f"the server at {base} does not list its models: "
                                              f"{type(exc).__name__}: {reason}; start it or set backend.base_url",))
    from .openai_backend import served_window

    served = {str(m.get("id")): m for m in listed.get("data") or [] if isinstance(m, dict)}
    checks, problems = [], []
    for role in roles:
        model = cfg.model_for(role)
        if model not in served:
            checks.append(RoleCheck(role, model, "openai", present=False))
            problems.append(f"{role}: the server at {base} does not serve {model} (GET /models lists "
                            f"{', '.join(sorted(served)) or 'nothing'})")
            continue
        window, _ = served_window(cfg, role, served[model])
        seconds, spent, error = _timed_call(cfg, role, ROLE_MAX_TOKENS[role])
        if error:
            problems.append(f"{role}: the timed call to {model} failed: {error}")
        checks.append(RoleCheck(role, model, "openai", True, None, window, window, None, "", None, seconds, spent,
                                error))
    notes, warnings = _families(tuple(checks))
    if any(c.present and c.num_ctx is None for c in checks):
        warnings.append("the server does not say its context window (no max_model_len in /models): a prompt it cuts "
                        "is caught only by its prompt token count; set backend.num_ctx to the server's window")
    return Readiness(where, tuple(checks), tuple(notes), tuple(warnings), tuple(problems))


def check_readiness(cfg: BackendConfig) -> Readiness:
    """The readiness of cfg's backend (auto: of what it resolves to; embedded and fake: nothing to check)."""
    kind = cfg.kind
    if kind == "auto":
        from .auto import auto_decision

        decision = auto_decision(cfg)
        on_ollama = tuple(r for r in ROLES if decision.kind_for(r) == "ollama")
        if not on_ollama:
            return Readiness(f"auto -> {decision.kind_for('producer')}", (), (decision.line(),))
        found = check_ollama(dataclasses.replace(cfg, kind="ollama"), on_ollama)
        return dataclasses.replace(found, notes=(decision.line(), *found.notes))
    if kind == "ollama":
        return check_ollama(cfg)
    if kind == "openai":
        return check_openai(cfg)
    return Readiness(f"{kind}: nothing to check (in-process)", ())


def require_ready(cfg: BackendConfig, out: Callable[[str], None] = print) -> Readiness:
    """Run the check, print its lines, raise NotReady (one line naming every problem) when it found any."""
    found = check_readiness(cfg)
    for line in found.lines():
        out(line)
    if found.problems:
        raise NotReady(f"readiness check failed: {'; '.join(found.problems)}")
    return found
