"""The prepared contexts of a sweep (plan + research per task): once per study, cached on disk and reused by every
trial, because only synthesis and evaluation depend on the instruction (experiments.storage holds them)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from experiments.config import ExperimentConfig
from experiments.storage import ContextCache

from ._pool import RunPool


def context_depends(exp: ExperimentConfig) -> dict[str, Any]:
    """What a task's prepared context depends on (its cache key besides the task text)."""
    b = exp.backend
    return {
        "planner": dataclasses.asdict(exp.planner),
        "search": dataclasses.asdict(exp.search),
        "research": dataclasses.asdict(exp.research),
        "memory": {"enabled": exp.memory.enabled, "embedding": exp.memory.embedding, "k": exp.memory.k},
        "models": [b.kind, b.planner_model, b.compressor_model],
        "seed": exp.seed,
    }


def _prepare_calls(prepared: Any) -> int:
    value = prepared.get("llm_calls", 0) if isinstance(prepared, Mapping) else getattr(prepared, "llm_calls", 0)
    return int(value or 0)


def prepare_contexts(exp: ExperimentConfig, runner: Any, tasks: Sequence[Any], *, folder: Path, pool: RunPool,
                     out: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, int]]:
    """(task id -> prepared context, {"hits", "computed", "prepare_calls_train"}): each task's context from the
    cache, else prepared by the runner (`pool` runs them side by side) and cached."""
    # the resolved models, not the configured kind ("auto" may have meant another server last time)
    cache = ContextCache(folder, {**context_depends(exp), "resolved": runner.identity()},
                         load=getattr(runner, "prepared_from_dict", None),
                         incomplete=getattr(runner, "context_incomplete", None))
    contexts, stats = {}, {"hits": 0, "computed": 0}
    prepared = pool.ordered(lambda t: cache.get_or_prepare(t, runner.prepare), tasks)
    with prepared:
        for i, (task, fut) in enumerate(prepared, 1):
            got = fut.result()
            contexts[task.id] = got.prepared
            stats["hits" if got.hit else "computed"] += 1
            if task.split == "train":
                stats["prepare_calls_train"] = stats.get("prepare_calls_train", 0) + _prepare_calls(got.prepared)
            if not got.hit:
                out(f"[{exp.sweep.name}] context {i}/{len(tasks)} {task.id}: prepared and cached")
    return contexts, stats
