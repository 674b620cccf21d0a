"""Checks on the harness's own settings, one line naming the key, the value and what is allowed (ConfigError), and
the judge warnings (a judge that may prefer the producer's outputs). experiments.config.validate runs these first,
then the experiment's own checks."""

from __future__ import annotations

import dataclasses
import logging
import math
import re
from typing import Any, Mapping, Sequence

from harness.config import (
    COMPOSITES,
    ORCHESTRATOR_MODES,
    PLANNER_MODES,
    SEARCH_PROVIDERS,
    TASK_TYPES,
    ConfigError,
    HarnessConfig,
    resolve_concurrency,
)

log = logging.getLogger("harness.checks")  # the name the judge warnings have always been logged under


_WARNED: set[str] = set()  # a warning is logged once per process, however many configs a sweep validates


def model_family(name: str) -> str:
    """A model's family read off its name: the first letters of its last path part ("qwen2.5:32b" -> "qwen",
    "Qwen/Qwen2.5-32B-Instruct" -> "qwen", "llama3.3:70b" -> "llama", "gemma3:27b" -> "gemma")."""
    found = re.match(r"[a-z]+", str(name).strip().lower().rsplit("/", 1)[-1])
    return found.group(0) if found else str(name).strip().lower()


def resolved_kind(backend: Any) -> str:
    """The kind the producer and judge run on: backend auto resolved (HARNESS_BACKEND, else its one probe per
    process), so a run that fell back to the embedded model is spoken of as embedded."""
    kind = str(backend.kind)
    if kind != "auto":
        return kind
    import os

    from harness.backends.auto import ENV_FORCE, auto_decision

    forced = os.environ.get(ENV_FORCE, "").strip()
    if forced and forced != "auto":
        return forced
    decision = auto_decision(backend)
    kinds = {decision.kind_for("producer"), decision.kind_for("evaluator")}
    return "ollama" if kinds == {"ollama"} else decision.kind_for("evaluator" if "ollama" in kinds else "producer")


def judge_warnings(backend: Any) -> list[str]:
    """One-line warnings, not errors: the judge (evaluator role) resolving to the producer's own model or family. A
    model tends to rate its own outputs higher (self-preference), so such scores flatter what it wrote. Spoken of
    the backend actually resolved (auto: what it fell back to). The fake backend's scripted replies have no model
    to prefer; the embedded backend serves every role from one GGUF."""
    kind = resolved_kind(backend)
    if kind == "fake":
        return []
    if kind == "embedded":
        via = " (backend auto fell back to it)" if str(backend.kind) == "auto" else ""
        return [f"backend.kind=embedded{via} serves every role from one GGUF, so the judge scores its own outputs "
                "(self-preference): a smoke setting, not a measurement; use ollama or openai with another "
                "backend.evaluator_model for scores"]
    producer, judge = str(backend.producer_model).strip(), str(backend.evaluator_model).strip()
    if producer.lower() == judge.lower():
        return [f"backend.evaluator_model={judge!r} is the producer's own model (backend.producer_model): a judge "
                "tends to rate its own outputs higher (self-preference); configure another model, at least as "
                "large and from another family where possible"]
    if model_family(producer) == model_family(judge):
        return [f"backend.evaluator_model={judge!r} is from the producer's family ({model_family(judge)}, "
                f"backend.producer_model={producer!r}): self-preference can carry across a family; prefer a judge "
                "from another family, at least as large"]
    return []


def warn_once(messages: Sequence[str]) -> None:
    """Log each message once per process, to the configured log. A process with no logging configured yet
    (experiments.run's check before Hydra) logs nothing here: the validation inside the run logs it, so a config
    error that ends the command stays its one line on stderr."""
    if not log.hasHandlers():
        return
    for msg in messages:
        if msg not in _WARNED:
            _WARNED.add(msg)
            log.warning(msg)


def check_choice(key: str, value: Any, allowed: Sequence[Any]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}={value!r} is not allowed; expected one of: {', '.join(map(str, allowed))}")


def check_range(key: str, value: float, lo: float | None = None, hi: float | None = None) -> None:
    """lo <= value <= hi (a None bound is open), value finite: NaN compares false with every bound and so would pass
    both comparisons, and infinity would pass an open bound."""
    if not math.isfinite(value) or (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        what = "a value" if math.isfinite(value) else "a finite value"
        raise ConfigError(f"{key}={value!r} is out of range; expected {what} in {span}")


def check_positive(key: str, value: float) -> None:
    """value > 0 and finite (NaN and infinity refused): a zero timeout or heartbeat is accepted by nothing
    downstream, an infinite one never ends."""
    if not (value > 0 and math.isfinite(value)):
        what = "a finite value" if value > 0 else "a value"
        raise ConfigError(f"{key}={value!r} is out of range; expected {what} > 0")


def check_finite(cfg: Any, key: str = "") -> None:
    """Every float in cfg (dataclass fields, mappings and lists, walked) is a finite number: NaN or infinity in any
    setting is refused up front, like any value out of range, and never reaches a run."""
    if isinstance(cfg, float):
        if not math.isfinite(cfg):
            raise ConfigError(f"{key}={cfg!r} is out of range; expected a finite number")
    elif dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        for f in dataclasses.fields(cfg):
            check_finite(getattr(cfg, f.name), f"{key}.{f.name}" if key else f.name)
    elif isinstance(cfg, Mapping):
        for k, v in cfg.items():
            check_finite(v, f"{key}.{k}" if key else str(k))
    elif isinstance(cfg, (list, tuple)):
        for i, v in enumerate(cfg):
            check_finite(v, f"{key}[{i}]")


def check_harness(cfg: HarnessConfig) -> HarnessConfig:
    """Raise ConfigError on the first harness setting out of range or not allowed. The caller logs the judge
    warnings (warn_judge) once every check has passed: a config refused makes no backend probe."""
    from harness.inference import backend_names

    check_choice("backend.kind", cfg.backend.kind, backend_names())
    check_range("backend.n_ctx", cfg.backend.n_ctx, 256)
    check_range("backend.embedded_slots", cfg.backend.embedded_slots, 1)
    check_range("backend.parallel_default", cfg.backend.parallel_default, 1)
    check_range("backend.embedded_repeat_penalty", cfg.backend.embedded_repeat_penalty, 1.0, 2.0)
    check_range("backend.embedded_cache_ram_mib", cfg.backend.embedded_cache_ram_mib, 0)
    check_positive("backend.timeout_s", cfg.backend.timeout_s)  # 0 made every preflight say "not reachable"
    check_positive("backend.probe_timeout_s", cfg.backend.probe_timeout_s)
    check_range("backend.retries", cfg.backend.retries, 0)
    check_range("backend.backoff_s", cfg.backend.backoff_s, 0.0)
    for key, value in (("planner.temperature", cfg.planner.temperature), ("synth.temperature", cfg.synth.temperature),
                       ("evaluator.temperature", cfg.evaluator.temperature)):
        check_range(key, value, 0.0, 2.0)
    try:
        resolve_concurrency(cfg.backend.concurrency, "fake", environ={})
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    check_choice("planner.mode", cfg.planner.mode, PLANNER_MODES)
    check_choice("search.provider", cfg.search.provider, SEARCH_PROVIDERS)
    check_choice("evaluator.composite", cfg.evaluator.composite, COMPOSITES)
    check_choice("orchestrator.mode", cfg.orchestrator.mode, ORCHESTRATOR_MODES)
    check_range("evaluator.rubric_weight", cfg.evaluator.rubric_weight, 0.0, 1.0)
    check_range("evaluator.repeats", cfg.evaluator.repeats, 1)
    check_range("evaluator.judge_retries", cfg.evaluator.judge_retries, 0, 5)
    if cfg.evaluator.composite != "deterministic" and cfg.evaluator.rescore and cfg.evaluator.temperature == 0:
        check_range("evaluator.rescore_temperature", cfg.evaluator.rescore_temperature, 0.01, 2.0)
    check_range("wiggum.max_rounds", cfg.wiggum.max_rounds, 0)
    for key in cfg.synth.instructions:
        check_choice("synth.instructions key", key, TASK_TYPES)
    check_finite(cfg)  # every other float: NaN or infinity refused (the experiment's nodes too, when cfg has them)
    return cfg


def warn_judge(backend: Any) -> None:
    """Log each of judge_warnings(backend) once per process (a warning changes nothing else)."""
    warn_once(judge_warnings(backend))
