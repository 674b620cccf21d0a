"""Running tasks: a harness run behind the typed Runner seam, the pool that runs them N at once, the prepared
contexts, and a candidate's evaluation over a split. TaskOutcome (with its Usage) is the type a Runner's finish
returns, the seam a runner of one's own implements."""

from __future__ import annotations

from ._contexts import prepare_contexts
from ._evaluate import (CandidateEval, FailedRun, TaskScore, TrialFailed, abandoned_run, baseline_instructions,
                        evaluate_candidate, model_failure)
from ._judge import Judge, make_judge
from ._outcome import TaskOutcome, Usage
from ._pool import SERIAL, RunPool, runner_pool
from ._runners import HarnessCells, HarnessRunner, Runner, TimedRunner, llm_calls

__all__ = [
    "CandidateEval",
    "FailedRun",
    "HarnessCells",
    "HarnessRunner",
    "Judge",
    "RunPool",
    "Runner",
    "SERIAL",
    "TaskOutcome",
    "TaskScore",
    "TimedRunner",
    "TrialFailed",
    "Usage",
    "abandoned_run",
    "baseline_instructions",
    "evaluate_candidate",
    "llm_calls",
    "make_judge",
    "model_failure",
    "prepare_contexts",
    "runner_pool",
]
