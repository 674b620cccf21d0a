"""What a run leaves: its `RunResult`, and the runs.jsonl record built from the prepared context, the result
and what the stages left behind."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from harness.config import HarnessConfig, config_hash, to_dict
from harness.inference import Roles
from harness.tracing import Tracer

from ._prepared import Prepared


@dataclass(frozen=True)
class RunResult:
    run_id: str
    task: str
    status: str  # ok | failed
    output_text: str = ""
    output_path: str | None = None
    evaluation: Any = None  # evaluators.composite.Evaluation of the kept round
    wiggum: Any = None
    panel: tuple = ()
    record: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    smoke: bool = False
    trace_path: str | None = None
    sources: tuple = ()  # the research sources the output was written from

    @property
    def score(self) -> float | None:
        return None if self.evaluation is None else self.evaluation.composite


def run_record(cfg: HarnessConfig, roles: Roles, prepared: Prepared, result: RunResult, state: Mapping[str, Any],
               tracer: Tracer, finish_s: float, trace_path: Path, extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The runs.jsonl record of one run: its config, plan, research, stage timings, model use, scores, wiggum
    rounds and panel, from the prepared context, the result and what the stages left in `state`."""
    plan, research, ev = prepared.plan, prepared.research, result.evaluation
    stage_s = {**prepared.timings, **{k: round(v, 4) for k, v in tracer.stage_s.items()}}
    record: dict[str, Any] = {
        "run_id": result.run_id,
        "time": time.time(),
        "task": prepared.task,
        "clean_task": prepared.clean_task,
        "status": result.status,
        "error": result.error,
        "smoke": result.smoke,
        "smoke_label": roles.smoke_label if result.smoke else None,
        "backend": roles.description,
        "config_hash": config_hash(cfg),
        "config": to_dict(cfg),
        "skills": list(prepared.skills),
        "unknown_skills": list(prepared.unknown_skills),
        "memory_titles": list(prepared.memory_titles),
        "plan": plan.to_dict(),
        "research": {
            "quality": dataclasses.asdict(research.quality) if research.quality else None,
            "rounds": research.rounds,
            "search_calls": research.search_calls,
            "sources": len(research.sources),
            "from_cache": research.from_cache,
            "degraded_reason": research.degraded_reason,
            "flagged": research.flagged,
            "flags": list(research.flags)[:10],  # patterns, source URL or path, excerpt of what was removed
            "stop_reason": research.stop_reason,
            "query_rule": research.query_rule,  # which rule chose the queries (harness.research._queries.QUERY_RULES)
            "memory_match": research.memory_match,
            "errors": list(research.errors)[:5],
        },
        "synthesis": state.get("synth"),
        "instruction": state.get("instruction"),
        "prompt": state.get("prompt"),  # synth.source, the prompt version it resolved to, the text's sha256
        "stage_s": stage_s,
        "finish_s": round(finish_s, 4),
        "llm": {role: dict(u) for role, u in tracer.usage.items()},
        "llm_calls_by_stage": dict(tracer.calls_by_stage),
        "llm_calls_prepare": prepared.llm_calls,
        "cache": roles.cache_stats(),
        "scores": None,
        "wiggum": None,
        "panel": [dataclasses.asdict(p) for p in result.panel],
        "output_path": result.output_path or state.get("output_path"),
        "memory_stored": state.get("memory_stored", False),
        "unsourced_urls": state.get("unsourced_urls", []),  # URLs in the output that no gathered source has
        # judge replies that could not be read in this run (every round, the verify re-score, retries): an A/B
        # refuses arms that differ in them; 0 when none, or no judge ran
        "judge_failures": sum(int(e.judge_failures) for e in state.get("judged", ())),
        "trace": str(trace_path),
    }
    if ev is not None:
        rubric = ev.rubric
        record["scores"] = {
            "composite": ev.composite,
            "mode": getattr(ev, "mode", None),
            "rubric": None if rubric is None else {
                "dimensions": rubric.dimensions,
                "weighted": rubric.weighted,
                "judge_sd": rubric.judge_sd,
                "parser": rubric.parser,
            },
            "deterministic": ev.deterministic,
            "missing": getattr(ev, "fallback", None) if ev.composite is None else None,  # why no score
        }
    if result.wiggum is not None:
        w = result.wiggum
        record["wiggum"] = w.to_dict()
        record["wiggum"]["rescored"] = bool(state.get("rescored", False))
        # the attempt verdicts of the loop judge, the re-score and a tie-break (harness.review.verify_rescore)
        record["wiggum"]["attempt_verdicts"] = state.get("attempt_verdicts")
        # the loop's own best (selection) vs the run's score (independent when rescored); None when either
        # judged score is missing
        record["wiggum"]["selection_bias"] = (round(w.best_score - ev.composite, 4) if ev is not None
                                              and ev.composite is not None and w.best_score is not None else None)
    if extra:
        record.update(extra)
    return record
