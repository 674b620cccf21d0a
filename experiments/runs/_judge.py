"""The side-by-side judge the A/B (ab.compare=pairwise) and the sweep's holdout (sweep.holdout_compare=pairwise)
share: evaluators.pairwise.compare_pair on the evaluator role."""

from __future__ import annotations

from typing import Any, Callable

Judge = Callable[[Any, str, str, int], Any]  # (task, candidate's answer, baseline's answer, seed) -> PairResult


def make_judge(exp: Any, llm: Any) -> Judge:
    """The real judge: evaluators.pairwise.compare_pair on `llm` (the evaluator role) at the evaluator's temperature
    and re-asks, with the task's expected item count where the benchmark gives one."""
    from evaluators import compare_pair

    ev = exp.evaluator

    def judge(task: Any, candidate: str, baseline: str, seed: int) -> Any:
        text = getattr(task, "task", task if isinstance(task, str) else str(task))
        count = getattr(task, "expected_count", None)
        return compare_pair(text, candidate, baseline, llm, seed=seed, temperature=ev.temperature,
                            judge_retries=ev.judge_retries, expected_count=count)

    return judge
