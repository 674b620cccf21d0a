"""The objective: rubric, deterministic criteria, or a blend of both, chosen by EvaluatorConfig.composite.

blend = rubric_weight * rubric + (1 - rubric_weight) * deterministic (both 0-10). When the judge's reply could
not be read (after its retries, evaluators.rubric), the composite of blend and rubric modes is missing (None) and
`fallback` says why: the deterministic score alone is another scale, and an answer that breaks the judge would
score higher on it than one the judge read (a judge giving 4 everywhere: 6.25; the same answer with the reply
cut off: 9.63). Deterministic mode never calls the judge and is unaffected.

A degenerate output (evaluators.deterministic.degenerate_reasons: empty, repeated, an echo of the prompt, empty
structure) has its composite capped at DEGENERATE_CAP in every mode, however high the judge scored it (a judge
can be fooled); the reasons are kept in `Evaluation.degenerate` and lead its feedback and weaknesses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaluators.deterministic import DEGENERATE_CAP, aggregate, count_items, degenerate_reasons, deterministic_scores
from evaluators.rubric import EvalResult, score_rubric
from harness.config import EvaluatorConfig

__all__ = ["MODES", "Evaluation", "combine", "evaluate"]

MODES = ("rubric", "deterministic", "blend")
_WEAK_BELOW = 6.0
_ADVICE = {
    "terms": "cover the required topics named in the task",
    "structure": "organise the answer with headings or numbered items and short paragraphs",
    "specificity": "add concrete names, numbers, versions and code-level details",
    "grounding": "tie claims to the gathered sources and cite them",
}


@dataclass(frozen=True)
class Evaluation:
    """One scored output: the rubric verdict (None in deterministic mode), the deterministic criteria, their
    aggregate, and the composite used as the objective. `composite` is None when the judged score is missing
    (the judge's reply could not be read), and `fallback` says why. `degenerate` holds why the output is
    degenerate (then every criterion and the composite are capped at DEGENERATE_CAP); () for an ordinary output."""

    rubric: EvalResult | None
    deterministic: dict[str, float | None]
    composite: float | None
    mode: str = "blend"
    deterministic_score: float = 0.0
    fallback: str | None = None
    expected_count: int | None = None
    found_count: int | None = None
    degenerate: tuple[str, ...] = ()

    @property
    def judge_failures(self) -> int:
        """Judge replies that could not be read for this evaluation (re-asked ones included); 0 without a judge."""
        return int(self.rubric.judge_failures) if self.rubric is not None else 0

    @property
    def attempted(self) -> bool | None:
        """The judge's verdict on whether the answer attempts the task: False when most readable repeats said
        answers_task false (scored 1 on every dimension), True otherwise; None without a readable judgement."""
        rubric = self.rubric
        if rubric is None or rubric.failed:
            return None
        readable = rubric.repeats - rubric.parse_failures
        if readable <= 0:
            return None
        return not 2 * rubric.not_attempted > readable

    @property
    def missing(self) -> bool:
        """The judged score could not be measured: composite is None."""
        return self.composite is None

    @property
    def feedback(self) -> str:
        """The judge's feedback when there is one, else advice derived from the weakest deterministic criteria;
        led by why the output is degenerate when it is."""
        if self.rubric is not None and not self.rubric.failed and self.rubric.feedback:
            base = self.rubric.feedback
        else:
            advice = list(self._deterministic_weaknesses())
            base = "; ".join(advice) if advice else "No specific weakness detected."
        if not self.degenerate:
            return base
        return (
            f"The answer is degenerate ({'; '.join(self.degenerate)}). Write a complete answer to the task itself: "
            f"no repeated sentences, no copy of the prompt or its headings, real content under every heading. {base}"
        )

    @property
    def weaknesses(self) -> tuple[str, ...]:
        if self.rubric is not None and not self.rubric.failed and self.rubric.weaknesses:
            base = tuple(self.rubric.weaknesses)
        else:
            base = self._deterministic_weaknesses()
        return (tuple(f"degenerate output: {r}" for r in self.degenerate) + base)[:3]

    def _deterministic_weaknesses(self) -> tuple[str, ...]:
        out = []
        count = self.deterministic.get("count")
        if count is not None and count < 10 and self.expected_count:
            out.append(f"has {self.found_count} items but the task asks for exactly {self.expected_count}")
        ranked = sorted(
            ((v, k) for k, v in self.deterministic.items() if k in _ADVICE and v is not None and v < _WEAK_BELOW)
        )
        out.extend(_ADVICE[k] for _, k in ranked)
        return tuple(out)

    def metrics(self) -> dict[str, float]:
        """Flat numeric metrics for tracking (MLflow): composite, deterministic criteria, rubric dimensions."""
        out: dict[str, float] = {"deterministic": self.deterministic_score,
                                 "degenerate": 1.0 if self.degenerate else 0.0,
                                 "judge_failures": float(self.judge_failures)}
        if self.composite is not None:  # a missing judged score is absent, never a number
            out["composite"] = self.composite
        for name, value in self.deterministic.items():
            if value is not None:
                out[f"det_{name}"] = float(value)
        if self.rubric is not None:
            if self.rubric.weighted is not None:
                out["rubric"] = self.rubric.weighted
            out["judge_sd"] = self.rubric.judge_sd
            out["rubric_parse_failures"] = float(self.rubric.parse_failures)
            for name, value in self.rubric.dimensions.items():
                out[f"dim_{name}"] = float(value)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "composite": self.composite,
            "deterministic_score": self.deterministic_score,
            "deterministic": dict(self.deterministic),
            "rubric": self.rubric.to_dict() if self.rubric is not None else None,
            "fallback": self.fallback,
            "expected_count": self.expected_count,
            "found_count": self.found_count,
            "degenerate": list(self.degenerate),
            "judge_failures": self.judge_failures,
            "feedback": self.feedback,
            "weaknesses": list(self.weaknesses),
        }


def combine(
    mode: str,
    rubric: EvalResult | None,
    deterministic: float,
    rubric_weight: float,
    *,
    degenerate: Sequence[str] = (),
) -> tuple[float | None, str | None]:
    """(composite, reason or None) for one mode; capped at DEGENERATE_CAP when `degenerate` names reasons,
    whatever the judge said. In rubric and blend modes an unread judge gives (None, why): missing, not scored."""
    composite, fallback = _combine(mode, rubric, deterministic, rubric_weight)
    if degenerate and composite is not None:
        composite = min(composite, DEGENERATE_CAP)
    return composite, fallback


def _combine(mode: str, rubric: EvalResult | None, deterministic: float,
             rubric_weight: float) -> tuple[float | None, str | None]:
    if mode not in MODES:
        raise ValueError(f"evaluator.composite must be one of {', '.join(MODES)}, got {mode!r}")
    if not 0.0 <= rubric_weight <= 1.0:
        raise ValueError(f"evaluator.rubric_weight must be in [0, 1], got {rubric_weight!r}")
    if mode == "deterministic":
        return round(deterministic, 4), None
    if rubric is None or rubric.failed:
        tried = f" ({rubric.judge_failures} unreadable replies)" if rubric is not None and rubric.judge_failures else ""
        return None, f"judge reply unreadable{tried}: the judged {mode} score is missing"
    if mode == "rubric":
        return round(float(rubric.weighted), 4), None
    return round(rubric_weight * float(rubric.weighted) + (1.0 - rubric_weight) * deterministic, 4), None


def evaluate(
    task: str,
    output: str,
    llm: Any,
    cfg: EvaluatorConfig,
    *,
    expected_count: int | None = None,
    required_terms: Sequence[str] = (),
    sources: Sequence[Any] = (),
    task_type: str = "research",
    seed: int = 0,
    prompt: Any = None,
) -> Evaluation:
    """Score one output per cfg.composite. The judge is called only in rubric and blend modes. `prompt` (text or
    chat messages), when given, is the prompt that produced the output: copying it counts as degenerate."""
    if cfg.composite not in MODES:
        raise ValueError(f"evaluator.composite must be one of {', '.join(MODES)}, got {cfg.composite!r}")
    if not isinstance(output, str):
        raise TypeError(f"output must be the answer text (str), got {type(output).__name__}")
    reasons = degenerate_reasons(output, task=task, prompt=prompt)
    det = deterministic_scores(
        output, task=task, expected_count=expected_count, required_terms=required_terms, sources=sources,
        prompt=prompt,
    )
    det_score = aggregate(det)
    rubric = None
    if cfg.composite != "deterministic":
        if llm is None:
            raise ValueError(f"evaluator.composite={cfg.composite!r} needs an evaluator LLM, got None")
        rubric = score_rubric(task, output, llm, cfg, task_type=task_type, seed=seed, expected_count=expected_count)
    composite, fallback = combine(cfg.composite, rubric, det_score, cfg.rubric_weight, degenerate=reasons)
    return Evaluation(
        rubric=rubric,
        deterministic=det,
        composite=composite,
        mode=cfg.composite,
        deterministic_score=det_score,
        fallback=fallback,
        expected_count=expected_count,
        found_count=count_items(output) if expected_count else None,
        degenerate=reasons,
    )
