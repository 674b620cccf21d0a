"""The typed seam between the experiments and a harness run: what one task's run gave back.

`Runner.finish` returns a `TaskOutcome`; `outcome_from_result` builds it from the harness's `RunResult`, and
test or bench doubles construct it directly. Nothing across the seam is read with getattr.

Two scores are kept apart. `selection_score` is the wiggum loop's best round: that round was *chosen* by the
judge sample that scored it, so it is inflated by selection (a winner's curse). `score` is the objective: the
kept text re-scored by judge samples independent of that choice (see harness.agent, wiggum.verify: a sampled
judgement even when the loop's judge is greedy); `rescored` is False only with evaluator.rescore off.

A run whose judged score is missing (the judge's reply could not be read, after its retry) is a failed task, never
a score on another scale; `judge_failures` counts the judge replies that could not be read in the run (the run
record's field of that name, 0 when none), failed or not.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

OK, FAILED = "ok", "failed"


# a failed model call (the server, not the run): tried again. Not ContextOverflow: a prompt over the window is the
# run's own failure, except while a context is prepared (experiments.runs._runners.PREPARE_FAILURES)
MODEL_FAILURES = ("BackendError", "BackendUnavailable", "ModelMissing", "NotReady")


def raised(error: str, *names: str) -> bool:
    """Whether an error line ("Type: message", possibly after a stage's "... failed: " or inside parentheses) names
    one of these exception types."""
    return re.search(rf"(?:^|[\s(:])(?:{'|'.join(map(re.escape, names))}): ", error or "") is not None


@dataclass(frozen=True)
class Usage:
    """LLM usage of one run, summed over roles."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    llm_calls: int = 0
    cached_calls: int = 0

    @property
    def uncached_calls(self) -> int:
        return self.llm_calls - self.cached_calls

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> "Usage":
        """Sum of the run record's per-role `llm` usage."""
        roles = (record.get("llm") or {}).values()
        return cls(
            prompt_tokens=sum(int(u.get("prompt_tokens", 0)) for u in roles),
            completion_tokens=sum(int(u.get("completion_tokens", 0)) for u in roles),
            latency_s=sum(float(u.get("latency_s", 0.0)) for u in roles),
            llm_calls=sum(int(u.get("calls", 0)) for u in roles),
            cached_calls=sum(int(u.get("cached", 0)) for u in roles),
        )


@dataclass(frozen=True)
class TaskOutcome:
    """One finished harness run of one task, as the experiments read it."""

    status: str  # ok | failed
    score: float | None = None  # the objective: independent re-score of the kept text (or selection_score)
    selection_score: float | None = None  # the wiggum loop's best-round score (chosen by the same judge)
    dimensions: Mapping[str, float] = field(default_factory=dict)  # rubric dimensions and det_<criterion>
    judge_sd: float = 0.0
    feedback: str = ""
    weaknesses: tuple[str, ...] = ()
    usage: Usage = field(default_factory=Usage)
    output_text: str = ""
    output_path: str | None = None
    error: str | None = None
    smoke: bool = False
    rescored: bool = False  # score comes from an independent judge sample
    judge_failures: int = 0  # judge replies that could not be read in this run (re-asked ones included)
    trace_path: str | None = None  # the run's Chrome trace file (harness.tracing.Tracer.write)
    context_trace_path: str | None = None  # the Chrome trace of the reused context's preparation (Prepared.trace_path)

    def __post_init__(self) -> None:
        if self.status not in (OK, FAILED):
            raise ValueError(f"TaskOutcome.status must be 'ok' or 'failed', got {self.status!r}")
        if self.status == OK and (self.score is None or math.isnan(float(self.score))):
            raise ValueError("TaskOutcome with status 'ok' needs a numeric score")
        object.__setattr__(self, "dimensions", dict(self.dimensions))
        object.__setattr__(self, "weaknesses", tuple(self.weaknesses))
        if isinstance(self.judge_failures, bool) or not isinstance(self.judge_failures, int) or self.judge_failures < 0:
            raise ValueError(f"TaskOutcome.judge_failures must be an int >= 0, got {self.judge_failures!r}")
        if self.selection_score is None and self.score is not None:
            object.__setattr__(self, "selection_score", float(self.score))

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def selection_bias(self) -> float | None:
        """selection_score - score: how much the wiggum loop's own choice flattered the kept text."""
        if self.score is None or self.selection_score is None:
            return None
        return float(self.selection_score) - float(self.score)

    @classmethod
    def failed(cls, error: str, **kwargs: Any) -> "TaskOutcome":
        return cls(status=FAILED, error=error, **kwargs)


def dimensions_of(evaluation: Any) -> dict[str, float]:
    """Rubric dimensions plus the numeric deterministic criteria as det_<name>."""
    dims = dict(evaluation.rubric.dimensions) if evaluation.rubric is not None else {}
    for k, v in (evaluation.deterministic or {}).items():
        if isinstance(v, (int, float)):
            dims[f"det_{k}"] = float(v)
    return dims


def outcome_from_result(result: Any) -> TaskOutcome:
    """A harness.agent.RunResult -> TaskOutcome. A failed run, or one without a score (a judged score missing
    because the judge's reply could not be read), is status failed."""
    record = result.record or {}
    usage = Usage.from_record(record)
    base = dict(usage=usage, output_text=result.output_text or "", output_path=result.output_path,
                smoke=bool(result.smoke), trace_path=result.trace_path,
                judge_failures=int(record.get("judge_failures") or 0))
    if result.status != OK:
        return TaskOutcome.failed(result.error or result.status, **base)
    ev = result.evaluation
    if ev is not None and ev.composite is None and ev.fallback:
        return TaskOutcome.failed(f"the judged score is missing: {ev.fallback}", **base)
    if ev is None or ev.composite is None or math.isnan(float(ev.composite)):
        return TaskOutcome.failed("the run finished without an evaluation score", **base)
    rubric = ev.rubric
    wig = result.wiggum
    return TaskOutcome(
        status=OK,
        score=float(ev.composite),
        selection_score=float(wig.best_score) if wig is not None and wig.best_score is not None else None,
        dimensions=dimensions_of(ev),
        judge_sd=float(rubric.judge_sd or 0.0) if rubric is not None else 0.0,
        feedback=str(ev.feedback or ""),
        weaknesses=tuple(ev.weaknesses or ()),
        rescored=bool((record.get("wiggum") or {}).get("rescored", False)),
        **base,
    )
