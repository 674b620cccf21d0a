"""The evaluator seam: what the pipeline asks of the scorer it is handed.

The harness scores its answers (the wiggum loop's rounds, the verify re-score) with an `Evaluator` given to
`Harness` and imports no scorer itself: the scorers sit above it (evaluators/). The project's is
`evaluators.HARNESS_EVALUATOR` (the composite of the rubric judge and the deterministic criteria), handed over by
the command line (harness.__main__) and by the experiments' runners.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Evaluator:
    """evaluate(task, text, llm, EvaluatorConfig, *, expected_count, required_terms, sources, task_type, seed)
    returns an Evaluation (composite, dimensions, feedback, degenerate reasons, judge failures, and `attempted`:
    the judge's answers_task verdict, which verify_rescore compares between two judgements of one text);
    echo_reasons(text, *, prompt) says why a text echoes a prompt, or (): a revision the revise prompt it was given,
    and (prompt None: the scaffolding's headings and phrases only) a first answer the synthesis prompt."""

    evaluate: Callable[..., Any]
    echo_reasons: Callable[..., tuple[str, ...]]


class NoEvaluator(RuntimeError):
    """A Harness asked to score an answer was built without an evaluator."""
