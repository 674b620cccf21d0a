"""The two passes: prior knowledge (pass 1) and the plan (pass 2), each one model call; `make_plan` never raises."""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.config import PlannerConfig, apply_env, HarnessConfig

from ._parse import _clean_list, parse_plan, parse_prior_knowledge
from ._plan import MAX_QUERY_CHARS, Plan, PriorKnowledge
from ._prompts import plan_messages, plan_schema, prior_knowledge_messages, prior_knowledge_schema
from ._tasktype import infer_task_type


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


def _span(name: str):
    try:
        from harness.tracing import current_tracer

        return current_tracer().span(name, cat="planner")
    except Exception:  # noqa: BLE001 - tracing must never break planning
        import contextlib

        return contextlib.nullcontext()


def assess_prior_knowledge(
    task: str, llm: Any, *, memory_context: str = "", cfg: PlannerConfig, seed: int | None = None
) -> PriorKnowledge:
    """Pass 1. Backend errors become a PriorKnowledge with parser "error"."""
    try:
        with _span("planner.prior_knowledge"):
            result = llm.chat(
                prior_knowledge_messages(task, memory_context),
                schema=prior_knowledge_schema(),
                temperature=cfg.temperature,
                max_tokens=cfg.max_tokens,
                seed=seed,
            )
    except Exception as exc:  # noqa: BLE001 - the planner never raises
        return PriorKnowledge(parser="error", errors=(f"prior knowledge call failed: {_describe(exc)}",))
    prior = parse_prior_knowledge(result.text)
    if getattr(result, "finish_reason", "stop") == "length":
        prior = dataclasses.replace(prior, errors=prior.errors + ("prior knowledge reply cut at max_tokens",))
    return prior


def make_plan(
    task: str,
    llm: Any,
    *,
    memory_context: str = "",
    cfg: PlannerConfig | None = None,
    seed: int | None = None,
    memory_strong: bool = False,
) -> Plan:
    """Run pass 1 (unless disabled) and pass 2; never raises.

    cfg=None uses PlannerConfig defaults with the environment folded in (HARNESS_SKIP_PRIOR_KNOWLEDGE).
    memory_strong: memory recalled a strong match for the task; only then do empty gaps drop the queries.
    """
    try:
        return _make_plan(task, llm, memory_context=memory_context, cfg=cfg, seed=seed, memory_strong=memory_strong)
    except Exception as exc:  # noqa: BLE001 - last line of defence for the never-raises contract
        return Plan(task_type=infer_task_type(task if isinstance(task, str) else ""), errors=(f"planner failed: {_describe(exc)}",))


def _make_plan(task: str, llm: Any, *, memory_context: str, cfg: PlannerConfig | None, seed: int | None,
               memory_strong: bool) -> Plan:
    cfg = cfg if cfg is not None else apply_env(HarnessConfig()).planner
    task = task or ""
    memory_context = memory_context or ""
    max_queries = max(int(cfg.max_queries), 0)
    prior: PriorKnowledge | None = None
    if cfg.prior_knowledge_enabled:
        prior = assess_prior_knowledge(task, llm, memory_context=memory_context, cfg=cfg, seed=seed)
    no_gaps = prior is not None and prior.usable and not prior.gaps
    covered = no_gaps and memory_strong
    errors: list[str] = list(prior.errors) if prior else []
    if no_gaps and not memory_strong:
        errors.append("prior knowledge found no gaps but memory recalled no strong match: the plan keeps its queries")

    try:
        with _span("planner.plan"):
            result = llm.chat(
                plan_messages(task, memory_context, prior, max_queries, covered=covered),
                schema=plan_schema(max_queries, allow_queries=not covered),
                temperature=cfg.temperature,
                max_tokens=cfg.max_tokens,
                seed=seed,
            )
        plan = parse_plan(result.text, task=task, max_queries=max_queries)
        if getattr(result, "finish_reason", "stop") == "length":
            errors.append("plan reply cut at max_tokens")
    except Exception as exc:  # noqa: BLE001 - the planner never raises
        plan = Plan(task_type=infer_task_type(task))
        errors.append(f"plan call failed: {_describe(exc)}")
    errors.extend(plan.errors)

    queries = plan.search_queries
    if covered:
        if queries:
            errors.append(f"prior knowledge found no gaps; dropped {len(queries)} search queries")
        queries = ()
    elif prior is not None and prior.gaps and not queries:
        queries = _clean_list(list(prior.gaps), max_queries, MAX_QUERY_CHARS)

    return dataclasses.replace(
        plan,
        search_queries=queries,
        known_facts=prior.known_facts if prior else (),
        gaps=prior.gaps if prior else (),
        prior_knowledge_ran=bool(prior and prior.usable),
        memory_strong=memory_strong,
        prior_parser=prior.parser if prior else "skipped",
        errors=tuple(errors),
    )
