"""Checks on a composed experiment config, before Hydra writes anything: every setting in range (one line naming
the key, the value and what is allowed), and a design that cannot answer its question refused (reachability,
experiments.power) unless allow_underpowered. Entry: experiments.config.validate.
"""

from __future__ import annotations

import logging
import math
import re
from typing import Any, Sequence

from experiments.config import (
    COMPOSITES,
    ORCHESTRATOR_MODES,
    PLANNER_MODES,
    PRUNERS,
    SAMPLERS,
    SEARCH_PROVIDERS,
    SPLITS,
    SWEEP_KINDS,
    TASK_TYPES,
    ConfigError,
    ExperimentConfig,
)


log = logging.getLogger("experiments.validation")
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


def _warn_once(messages: Sequence[str]) -> None:
    """Log each message once per process, to the configured log. A process with no logging configured yet
    (experiments.run's check before Hydra) logs nothing here: the validation inside the run logs it, so a config
    error that ends the command stays its one line on stderr."""
    if not log.hasHandlers():
        return
    for msg in messages:
        if msg not in _WARNED:
            _WARNED.add(msg)
            log.warning(msg)


def _check(key: str, value: Any, allowed: Sequence[Any]) -> None:
    if value not in allowed:
        raise ConfigError(f"{key}={value!r} is not allowed; expected one of: {', '.join(map(str, allowed))}")


def _check_range(key: str, value: float, lo: float | None = None, hi: float | None = None) -> None:
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        span = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
        raise ConfigError(f"{key}={value!r} is out of range; expected a value in {span}")


def _check_positive(key: str, value: float) -> None:
    """value > 0 (NaN refused too): a zero timeout or heartbeat is accepted by nothing downstream."""
    if not value > 0:
        raise ConfigError(f"{key}={value!r} is out of range; expected a value > 0")


def _check_task_text(i: int, t: Any) -> None:
    """A benchmark task with a blank id or task, or only skill tokens, fails every run it starts: refuse it here,
    before the study and the MLflow store are created."""
    if not str(t.id or "").strip():
        raise ConfigError(f"benchmark.tasks[{i}].id={t.id!r} is empty; expected a non-empty task id")
    if not str(t.task or "").strip():
        raise ConfigError(f"benchmark.tasks[{i}].task={t.task!r} (id {t.id!r}) is empty; expected the task as a sentence")
    from harness.skills import parse_skills_detailed

    if not parse_skills_detailed(str(t.task))[0].strip():
        raise ConfigError(f"benchmark.tasks[{i}].task={t.task!r} (id {t.id!r}) has only skill tokens; expected a task "
                          "after them")


def check_store_paths(exp: ExperimentConfig) -> None:
    """results_dir and sweep.name, checked like output paths: every store lands inside results_dir/<sweep.name>.

    An empty results_dir put every store in the current folder; sweep.name '..' put the ledger, contexts, plots,
    summary and promoted_synth.yaml in results_dir's parent. '#', '?' and '%' in the folder's absolute path are
    refused: the sqlite:/// URLs of the Optuna and MLflow stores are parsed by SQLAlchemy ('?' starts a query,
    '%XX' is decoded) and by MLflow with urllib ('#' starts a fragment), and no one escaping reads back the same
    through both, so the stores landed at the path's prefix, outside the folder (issue 33 item 7)."""
    from pathlib import Path

    if not str(exp.results_dir or "").strip():
        raise ConfigError(f"results_dir={exp.results_dir!r} is empty; expected a folder (set results_dir=<folder> or "
                          "HARNESS_RESULTS_DIR)")
    resolved = str(Path(exp.results_dir).expanduser().resolve())
    bad = sorted({c for c in resolved if c in "#?%"})
    if bad:
        raise ConfigError(f"results_dir={exp.results_dir!r} is not allowed: its path {resolved!r} holds "
                          f"{' '.join(repr(c) for c in bad)}, which sqlite:/// store URLs cannot carry; expected a "
                          "folder without '#', '?' or '%'")
    name = exp.sweep.name
    if name in ("", ".", "..") or name != name.strip() or any(c in name for c in "/\\\x00"):
        raise ConfigError(f"sweep.name={name!r} is not allowed; expected a folder name inside results_dir (not "
                          "empty, '.' or '..', without '/', '\\' or surrounding spaces)")


def known_operators() -> list[str] | None:
    """Operator names from mutators/, or None when that package does not provide them yet."""
    try:
        from mutators import operator_names
    except ImportError:
        return None
    return list(operator_names())


def validate(exp: ExperimentConfig) -> ExperimentConfig:
    """Raise ConfigError (one line: key, value, allowed values) on the first invalid setting; log each of
    `judge_warnings` once (a warning changes nothing else)."""
    from harness.inference import backend_names

    _check("backend.kind", exp.backend.kind, backend_names())
    _check_range("backend.n_ctx", exp.backend.n_ctx, 256)
    _check_range("backend.embedded_slots", exp.backend.embedded_slots, 1)
    _check_range("backend.parallel_default", exp.backend.parallel_default, 1)
    _check_range("backend.embedded_repeat_penalty", exp.backend.embedded_repeat_penalty, 1.0, 2.0)
    _check_range("backend.embedded_cache_ram_mib", exp.backend.embedded_cache_ram_mib, 0)
    _check_positive("backend.timeout_s", exp.backend.timeout_s)  # 0 made every preflight say "not reachable"
    _check_positive("backend.probe_timeout_s", exp.backend.probe_timeout_s)
    _check_range("backend.retries", exp.backend.retries, 0)
    _check_range("backend.backoff_s", exp.backend.backoff_s, 0.0)
    for key, value in (("planner.temperature", exp.planner.temperature), ("synth.temperature", exp.synth.temperature),
                       ("evaluator.temperature", exp.evaluator.temperature)):
        _check_range(key, value, 0.0, 2.0)
    try:
        from experiments.pool import resolve_concurrency

        resolve_concurrency(exp.backend.concurrency, "fake", environ={})
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    _check("planner.mode", exp.planner.mode, PLANNER_MODES)
    _check("search.provider", exp.search.provider, SEARCH_PROVIDERS)
    _check("evaluator.composite", exp.evaluator.composite, COMPOSITES)
    _check("orchestrator.mode", exp.orchestrator.mode, ORCHESTRATOR_MODES)
    _check_range("evaluator.rubric_weight", exp.evaluator.rubric_weight, 0.0, 1.0)
    _check_range("evaluator.repeats", exp.evaluator.repeats, 1)
    _check_range("evaluator.judge_retries", exp.evaluator.judge_retries, 0, 5)
    if exp.evaluator.composite != "deterministic" and exp.evaluator.rescore and exp.evaluator.temperature == 0:
        _check_range("evaluator.rescore_temperature", exp.evaluator.rescore_temperature, 0.01, 2.0)
    _check_range("wiggum.max_rounds", exp.wiggum.max_rounds, 0)
    for key in exp.synth.instructions:
        _check("synth.instructions key", key, TASK_TYPES)
    if not re.match(r"^[A-Za-z0-9_.-]+$", exp.mlflow.prompt_prefix):
        raise ConfigError(f"mlflow.prompt_prefix={exp.mlflow.prompt_prefix!r} is not allowed; expected letters, "
                          "digits, '_', '-' or '.' (MLflow prompt names)")
    sw = exp.sweep
    _check("sweep.kind", sw.kind, SWEEP_KINDS)
    _check("sweep.pruner", sw.pruner, PRUNERS)
    _check("sweep.sampler", sw.sampler, SAMPLERS)
    from experiments.optimizer import OPERATOR_CHOICES, PARENT_SELECTIONS, PRUNER_CORRECTIONS

    _check("sweep.pruner_correction", sw.pruner_correction, PRUNER_CORRECTIONS)
    _check("sweep.parent_selection", sw.parent_selection, PARENT_SELECTIONS)
    _check("sweep.operator_choice", sw.operator_choice, OPERATOR_CHOICES)
    _check_range("sweep.gate_tasks", sw.gate_tasks, 0)
    _check_range("sweep.gate_z", sw.gate_z, -3.0, 5.0)
    _check_range("sweep.max_merges", sw.max_merges, 0)
    _check_range("sweep.n_trials", sw.n_trials, 1)
    _check_range("sweep.baseline_repeats", sw.baseline_repeats, 1)
    # alpha 0 (or a subnormal such as 1e-320) overflowed the power check; 1 makes every difference significant
    if not 1e-300 <= sw.alpha < 1.0:
        raise ConfigError(f"sweep.alpha={sw.alpha!r} is out of range; expected a value in [1e-300, 1)")
    if not 0.0 < sw.pruner_p < 1.0:
        raise ConfigError(f"sweep.pruner_p={sw.pruner_p!r} is out of range; expected a value in (0, 1)")
    _check_range("sweep.max_chars", sw.max_chars, 40)  # mutators.base.MutationContext refuses less
    _check_positive("sweep.heartbeat_s", sw.heartbeat_s)
    _check_range("sweep.failure_rate_stop", sw.failure_rate_stop, 0.0, 1.0)
    _check_range("sweep.holdout_top_k", sw.holdout_top_k, 0)
    _check_range("sweep.race_top", sw.race_top, 0)
    from experiments.promotion import HOLDOUT_TESTS

    _check("sweep.holdout_test", sw.holdout_test, HOLDOUT_TESTS)
    _check_range("sweep.holdout_baseline_runs", sw.holdout_baseline_runs, 1)
    _check_range("sweep.holdout_candidate_runs", sw.holdout_candidate_runs, 1)
    from experiments.cost import COST_METRICS

    _check("sweep.cost_metric", sw.cost_metric, COST_METRICS)
    mci = sw.max_cost_increase
    if mci is not None and (isinstance(mci, bool) or not isinstance(mci, (int, float)) or not math.isfinite(mci)
                            or mci < 0):
        raise ConfigError(f"sweep.max_cost_increase={mci!r} is out of range; expected a fraction >= 0 (0.1 = at most "
                          f"10% more per task) or null (off)")
    if sw.max_llm_calls is not None:
        _check_range("sweep.max_llm_calls", sw.max_llm_calls, 1)
    if sw.timeout_s is not None:
        _check_range("sweep.timeout_s", sw.timeout_s, 0.0)
    check_store_paths(exp)
    for tt in sw.mutate_task_types:
        _check("sweep.mutate_task_types item", tt, TASK_TYPES)
    if sw.kind == "synth_mutation":
        if not sw.operators:
            raise ConfigError("sweep.operators=[] is not allowed; expected at least one mutation operator")
        ops = known_operators()
        if ops is not None:
            for op in sw.operators:
                _check("sweep.operators item", op, ops)
    ids = set()
    for i, t in enumerate(exp.benchmark.tasks):
        _check_task_text(i, t)
        _check(f"benchmark.tasks[{i}].task_type", t.task_type, TASK_TYPES)
        _check(f"benchmark.tasks[{i}].split", t.split, SPLITS)
        if t.id in ids:
            raise ConfigError(f"benchmark.tasks[{i}].id={t.id!r} is a duplicate; expected unique task ids")
        ids.add(t.id)
        if t.expected_count is not None:
            _check_range(f"benchmark.tasks[{i}].expected_count", t.expected_count, 1)
    if sw.kind in ("synth_mutation", "ab") and not exp.tasks("train"):
        raise ConfigError(f"benchmark.tasks has no split='train' task; expected at least one for sweep.kind={sw.kind}")
    if sw.kind == "synth_mutation":
        check_sweep_design(exp)
    if sw.kind == "ab":
        ab = exp.ab
        if ab.a == ab.b:
            raise ConfigError("ab.a and ab.b are identical; expected two different override sets")
        from experiments.stats import DIRECTIONS, TESTS

        _check("ab.direction", ab.direction, DIRECTIONS)
        _check("ab.test", ab.test, TESTS)
        _check("ab.split", ab.split, ("all", *SPLITS))
        _check_range("ab.replications", ab.replications, 1)
        _check_range("ab.min_effect", ab.min_effect, 0.0)
        _check_range("ab.looks", ab.looks, 2)
        if not 0.0 < ab.alpha < 1.0:
            raise ConfigError(f"ab.alpha={ab.alpha!r} is out of range; expected a value in (0, 1)")
        if not ab.hypothesis.strip():
            raise ConfigError("ab.hypothesis is empty; expected the hypothesis as a sentence, written before any data")
        if not ab.a_name or ab.a_name == ab.b_name or "/" in ab.a_name + ab.b_name:
            raise ConfigError(f"ab.a_name={ab.a_name!r}, ab.b_name={ab.b_name!r} are not allowed; expected two different non-empty names without '/'")
        from experiments.ab_design import check_ab_design

        check_ab_design(exp)
    if sw.kind == "calibrate":
        check_calibrate_design(exp)
    _warn_once(judge_warnings(exp.backend))
    return exp


def check_calibrate_design(exp: ExperimentConfig) -> None:
    """ConfigError (one line) on an invalid calibrate.* value, or when the A/A test or the positive control over
    calibrate.tasks tasks cannot reach alpha (unless calibrate.allow_underpowered)."""
    from experiments.stats import TESTS

    c = exp.calibrate
    n_all = len(exp.benchmark.tasks)
    if n_all == 0:
        raise ConfigError(f"benchmark {exp.benchmark.name!r} has no tasks; expected at least 2 for sweep.kind=calibrate")
    _check_range("calibrate.tasks", c.tasks, 0)
    if c.tasks > n_all:
        raise ConfigError(f"calibrate.tasks={c.tasks} is out of range; benchmark {exp.benchmark.name!r} has {n_all} "
                          f"task(s) (0 uses them all)")
    if c.generator_repeats < 2:
        raise ConfigError(f"calibrate.generator_repeats={c.generator_repeats} measures no generator variance; "
                          f"expected a value in [2, inf]")
    if c.judge_repeats < 2:
        raise ConfigError(f"calibrate.judge_repeats={c.judge_repeats} measures no judge variance; "
                          f"expected a value in [2, inf]")
    _check_range("calibrate.replications", c.replications, 1)
    _check_range("calibrate.sims", c.sims, 200)
    _check("calibrate.test", c.test, TESTS)
    for key, value in (("calibrate.alpha", c.alpha), ("calibrate.power", c.power)):
        if not 0.0 < value < 1.0:
            raise ConfigError(f"{key}={value!r} is out of range; expected a value in (0, 1)")
    if not c.power > c.alpha:
        raise ConfigError(f"calibrate.power={c.power!r} is not above calibrate.alpha={c.alpha!r}; expected power > alpha")
    if not c.target_effect > 0:
        raise ConfigError(f"calibrate.target_effect={c.target_effect!r} is out of range; expected a value > 0 "
                          f"(composite points)")
    if not c.harmful_instruction.strip():
        raise ConfigError("calibrate.harmful_instruction is empty; expected an instruction that makes outputs worse")
    from experiments.power import calibrate_design_problem

    problem = calibrate_design_problem(exp)
    if problem and not c.allow_underpowered:
        raise ConfigError(problem)


def check_sweep_design(exp: ExperimentConfig) -> None:
    """ConfigError (one line: the numbers and the fixes) when the sweep cannot conclude, unless allowed."""
    from experiments.power import sweep_design_problem

    problem = sweep_design_problem(exp)
    if problem and not exp.sweep.allow_underpowered:
        raise ConfigError(problem)


